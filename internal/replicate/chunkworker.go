package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// ChunkSource reads backfill chunks and writes their markers (design.md
// §5). The postgres adapter implements it.
type ChunkSource interface {
	// ReadChunk calls fn for each of the next limit rows of t in
	// primary-key order after the key after (text form; nil: from the
	// start), values valid only during the call, and returns the snapshot
	// they were read under.
	ReadChunk(ctx context.Context, t *cdc.Table, after []string, limit int, fn func(values []cdc.Datum) error) (cdc.Snapshot, int64, error)
	// EmitMarker writes a non-transactional logical message.
	EmitMarker(ctx context.Context, prefix, content string) (cdc.LSN, error)
	// EstimateRows is pg_class.reltuples, for progress reports.
	EstimateRows(ctx context.Context, id cdc.TableID) (int64, error)
}

// TableSource finds tables to capture that the manifest lacks (a table
// created in a watched schema while start runs) and publishes them. The
// daemon implements it from the configuration.
type TableSource interface {
	// NewTables returns the tables to capture for which known is false, as
	// the manifest is to record them (snapshot backfilling, no base).
	NewTables(ctx context.Context, known func(cdc.TableID) bool) ([]*manifest.Table, error)
	// Publish adds the tables to the publication and waits until the
	// transactions older than that change have ended.
	Publish(ctx context.Context, ids []cdc.TableID) error
	// WaitInFlight waits until the transactions open when it is called
	// have ended: before the first chunk of a table that may just have
	// been published (docs/decisions.md, the publication's boundary).
	WaitInFlight(ctx context.Context) error
	// PartitionLeaves returns the leaf partitions (OIDs, sorted) of those
	// of ids that are partitioned tables.
	PartitionLeaves(ctx context.Context, ids []cdc.TableID) (map[cdc.TableID][]uint32, error)
	// PartitionHasRows reports whether partition oid holds rows of its own.
	PartitionHasRows(ctx context.Context, oid uint32) (bool, error)
}

// DefaultChunkRows is the chunk size when Config.ChunkRows is zero.
const DefaultChunkRows = 50_000

// firstChunkRows is the size of a table's first chunk in a session, and
// chunkBytes what a chunk may hold in memory (about) after it.
const (
	firstChunkRows = 1000
	chunkBytes     = 32 << 20
)

// backfillJob is one table to backfill in this session.
type backfillJob struct {
	table    *cdc.Table
	after    []string // the manifest's last_key when the session started
	estimate bool     // the manifest has no rows estimate yet
	// gen is the generation a resnapshot builds; empty for a backfill of
	// the current generation.
	gen string
}

// chunk is one chunk read, waiting for its marker. The worker fills it
// before it writes the marker; the loop takes it when the marker arrives.
type chunk struct {
	id       string
	table    *cdc.Table
	snap     cdc.Snapshot
	rows     [][]cdc.Datum
	limit    int
	lastKey  []string
	estimate int64 // rows estimate to record, or 0
	gen      string
	readAt   time.Time
	placed   chan struct{} // closed by the loop once the chunk is in its epoch
}

// addition is a newly found table waiting for its AddTable message.
type addition struct {
	id    string
	table *manifest.Table
	done  chan struct{} // closed by the loop once the manifest holds the table
}

// handoff is all the loop and the chunk worker share, under mu: the chunk
// waiting for its marker, the new table waiting for its message, the
// queued jobs, and the worker's error. Everything else belongs to one side.
type handoff struct {
	mu      sync.Mutex
	pending *chunk
	adding  *addition
	jobs    []backfillJob
	notify  chan struct{} // a job was queued (capacity 1)
	errc    chan error    // the worker's error, at most one
	// partitions are the leaf partitions the manifest records per
	// partitioned table, as the loop last committed them (partitions.go):
	// the loop writes, the worker compares.
	partitions map[cdc.TableID][]uint32
}

func newHandoff() *handoff {
	return &handoff{notify: make(chan struct{}, 1), errc: make(chan error, 1), partitions: map[cdc.TableID][]uint32{}}
}

// recordedPartitions returns the leaves the manifest records for id (ok
// false: none recorded).
func (h *handoff) recordedPartitions(id cdc.TableID) ([]uint32, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	leaves, ok := h.partitions[id]
	return leaves, ok
}

// setPartitions notes the leaves the manifest now records for id (loop
// side, once they are durable).
func (h *handoff) setPartitions(id cdc.TableID, leaves []uint32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.partitions[id] = leaves
}

// queue hands the worker a job (loop side).
func (h *handoff) queue(job backfillJob) {
	h.mu.Lock()
	h.jobs = append(h.jobs, job)
	h.mu.Unlock()
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

// queued counts the jobs not taken yet.
func (h *handoff) queued() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.jobs)
}

// next takes the next queued job, if any (worker side).
func (h *handoff) next() (backfillJob, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.jobs) == 0 {
		return backfillJob{}, false
	}
	job := h.jobs[0]
	h.jobs = h.jobs[1:]
	return job, true
}

// park leaves the chunk for the loop before its marker is written (worker side).
func (h *handoff) park(c *chunk) {
	h.mu.Lock()
	h.pending = c
	h.mu.Unlock()
}

// takeChunk takes the parked chunk if id names it (loop side): a marker of
// no parked chunk is a replay, or another process's.
func (h *handoff) takeChunk(id string) *chunk {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.pending
	if c == nil || c.id != id {
		return nil
	}
	h.pending = nil
	return c
}

// pendingSnapshot is the snapshot of the parked chunk, if one is parked.
func (h *handoff) pendingSnapshot() (cdc.Snapshot, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pending == nil {
		return cdc.Snapshot{}, false
	}
	return h.pending.snap, true
}

// parkAddition leaves a new table for the loop (worker side).
func (h *handoff) parkAddition(a *addition) {
	h.mu.Lock()
	h.adding = a
	h.mu.Unlock()
}

// takeAddition takes the parked new table if id names it (loop side).
func (h *handoff) takeAddition(id string) *addition {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.adding
	if a == nil || a.id != id {
		return nil
	}
	h.adding = nil
	return a
}

// fail records the worker's error for the loop.
func (h *handoff) fail(err error) {
	select {
	case h.errc <- err:
	default:
	}
}

// err returns the worker's error, if it failed (loop side).
func (h *handoff) err() error {
	select {
	case err := <-h.errc:
		return fmt.Errorf("backfill: %w", err)
	default:
		return nil
	}
}

// chunkWorker copies the tables of a session's backfills, a chunk at a
// time, beside the loop: it reads a chunk, parks it in the handoff, writes
// its marker, and waits until the loop has placed it (design.md §5); then,
// with a TableSource, it looks for new tables every discover interval.
// The handoff is its only contact with the loop. One chunk is in memory at
// a time.
type chunkWorker struct {
	chunks   ChunkSource
	tables   TableSource // nil: no new tables while streaming
	maxRows  int
	discover time.Duration
	log      *slog.Logger
	now      func() time.Time
	run      string // this session's part of every marker id
	h        *handoff
	known    map[cdc.TableID]bool // the manifest's tables, and those added since
}

// start runs the worker beside the loop and returns the function that
// stops it and waits for it; a failure reaches the loop through the
// handoff.
func (w *chunkWorker) start(ctx context.Context) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.runJobs(wctx); err != nil && wctx.Err() == nil {
			w.h.fail(err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// runJobs copies the queued tables one after the other, then looks for
// new tables at every tick and backfills each it finds.
func (w *chunkWorker) runJobs(ctx context.Context) error {
	var tick <-chan time.Time
	if w.tables != nil && w.discover > 0 {
		ticker := time.NewTicker(w.discover)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		for job, ok := w.h.next(); ok; job, ok = w.h.next() {
			if err := w.copyTable(ctx, job); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.h.notify:
			continue
		case <-tick:
		}
		if err := w.discoverTables(ctx); err != nil {
			return err
		}
		if err := w.checkPartitions(ctx); err != nil {
			return err
		}
	}
}

// discoverTables backfills the tables to capture the manifest lacks.
func (w *chunkWorker) discoverTables(ctx context.Context) error {
	found, err := w.tables.NewTables(ctx, func(id cdc.TableID) bool { return w.known[id] })
	var refused *cdc.Error
	switch {
	case err == nil:
	case errors.As(err, &refused) || ctx.Err() != nil:
		return err
	default:
		// Looking is not worth stopping the stream for (a table named in
		// tables.include was dropped, say): the next round tries again.
		w.log.Warn("looking for new tables failed; trying again at the next interval", "err", err)
		return nil
	}
	for _, mt := range found {
		if err := w.addTable(ctx, mt); err != nil {
			return err
		}
		w.known[mt.ID()] = true
		t, err := mt.SourceTable()
		if err != nil {
			return err
		}
		if err := w.copyTable(ctx, backfillJob{table: t, estimate: true}); err != nil {
			return err
		}
	}
	return nil
}

// addTable hands a newly found table to the loop, which records it in the
// manifest (flushed at once), and only then publishes it: the stream knows
// the table before its first change can arrive. A crash in between leaves a
// table in the publication that the manifest lacks; start adds it again
// before streaming (the daemon's new-table discovery).
func (w *chunkWorker) addTable(ctx context.Context, mt *manifest.Table) error {
	a := &addition{id: fmt.Sprintf("%s/add/%s", w.run, mt.ID()), table: mt, done: make(chan struct{})}
	w.h.parkAddition(a)
	if err := w.emit(ctx, control.AddTable{ID: a.id}); err != nil {
		return err
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	w.log.Info("new table captured; publishing it, then backfilling it", "table", mt.ID().String())
	return w.tables.Publish(ctx, []cdc.TableID{mt.ID()})
}

func (w *chunkWorker) emit(ctx context.Context, m control.Message) error {
	prefix, content, err := control.Encode(m)
	if err != nil {
		return err
	}
	_, err = w.chunks.EmitMarker(ctx, prefix, content)
	return err
}

// copyTable copies one table, a chunk at a time: read, park, mark, wait.
// The first chunk is small; later ones as many rows as chunkBytes holds at
// the size rows had so far, at most maxRows: wide rows (8 KB of text each)
// must not make a 50,000-row chunk 400 MB in memory.
func (w *chunkWorker) copyTable(ctx context.Context, job backfillJob) error {
	maxRows := w.maxRows
	if maxRows <= 0 {
		maxRows = DefaultChunkRows
	}
	limit := min(maxRows, firstChunkRows)
	t := job.table
	var estimate int64
	if job.estimate {
		n, err := w.chunks.EstimateRows(ctx, t.ID)
		if err != nil {
			return err
		}
		estimate = n // 0 (never analysed): asked again next session
	}
	w.log.Info("backfill started", "table", t.ID.String(), "after", job.after, "chunk_rows", limit, "generation", job.gen)
	if job.after == nil && job.gen == "" && w.tables != nil {
		// A table start published before streaming (or a crash left for
		// it to publish): the wait is here, beside the stream, so a
		// transaction left open in the database delays this copy only.
		if err := w.tables.WaitInFlight(ctx); err != nil {
			return err
		}
	}
	after := job.after
	for n := 0; ; n++ {
		c, size, err := w.readChunk(ctx, t, after, limit, n, job.gen)
		if err != nil {
			return err
		}
		c.estimate, estimate = estimate, 0
		w.h.park(c)
		if err := w.emit(ctx, control.Chunk{ID: c.id}); err != nil {
			return err
		}
		select {
		case <-c.placed:
		case <-ctx.Done():
			return ctx.Err()
		}
		if len(c.rows) < limit {
			w.log.Info("backfill copied every row; complete with the next flush", "table", t.ID.String(), "chunks", n+1)
			return nil
		}
		after = c.lastKey
		limit = nextChunkRows(maxRows, len(c.rows), size)
	}
}

// readChunk reads chunk n of t: up to limit rows after the key after,
// copied out of the reader's buffers, and their size in bytes.
func (w *chunkWorker) readChunk(ctx context.Context, t *cdc.Table, after []string, limit, n int, gen string) (*chunk, int64, error) {
	c := &chunk{id: fmt.Sprintf("%s/%s/%d", w.run, t.ID, n), table: t, limit: limit, gen: gen, placed: make(chan struct{})}
	var size int64
	snap, _, err := w.chunks.ReadChunk(ctx, t, after, limit, func(values []cdc.Datum) error {
		row := copyRow(values)
		c.rows = append(c.rows, row)
		size += int64((&cdc.Change{Values: row}).Size())
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	c.snap, c.readAt = snap, w.now()
	if len(c.rows) > 0 {
		last := c.rows[len(c.rows)-1]
		c.lastKey = make([]string, len(t.PrimaryKey))
		for i, k := range t.PrimaryKey {
			c.lastKey[i] = string(last[t.ColumnIndex(k)].Text)
		}
	}
	return c, size, nil
}

// nextChunkRows is how many rows the next chunk asks for: what chunkBytes
// holds at the average size of the rows just read, between 1 and maxRows.
func nextChunkRows(maxRows, rows int, size int64) int {
	if rows == 0 || size <= 0 {
		return maxRows
	}
	return int(max(1, min(int64(maxRows), chunkBytes*int64(rows)/size)))
}

// copyRow copies values out of the COPY parser's buffers into one block.
func copyRow(values []cdc.Datum) []cdc.Datum {
	size := 0
	for _, v := range values {
		size += len(v.Text)
	}
	data := make([]byte, 0, size)
	out := make([]cdc.Datum, len(values))
	for i, v := range values {
		out[i].Kind = v.Kind
		if v.Kind == cdc.DatumText {
			start := len(data)
			data = append(data, v.Text...)
			out[i].Text = data[start:len(data):len(data)]
		}
	}
	return out
}
