package replicate

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/backfill"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/pgoutput"
)

// ChunkSource reads backfill chunks and writes their markers (DESIGN §5).
// The postgres adapter implements it.
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
// command implements it from the configuration.
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
}

// MarkerPrefix is the prefix of a backfill chunk's marker message.
const MarkerPrefix = "pgcdc.backfill"

// AddPrefix is the prefix of the message that hands a newly found table to
// the loop, before the table is published.
const AddPrefix = "pgcdc.addtable"

// ResnapshotPrefix is the prefix of the message pg-cdc resnapshot writes
// after recording its request in the manifest: the loop re-reads the
// manifest and takes the request up.
const ResnapshotPrefix = "pgcdc.resnapshot"

// DefaultChunkRows is the chunk size when Config.ChunkRows is zero.
const DefaultChunkRows = 50_000

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
	placed   chan struct{}
}

// backfills is what the loop and the chunk worker share, under mu: the
// chunk waiting for its marker, the new table waiting for its message, the
// queued jobs. Everything else belongs to one side (trackers and shadow to
// the loop).
type backfills struct {
	mu      sync.Mutex
	pending *chunk
	adding  *addition
	jobs    []backfillJob // queued for the worker
	notify  chan struct{} // a job was queued (capacity 1)
	errc    chan error    // the worker's error, at most one
}

// queue hands the worker a job.
func (b *backfills) queue(job backfillJob) {
	b.mu.Lock()
	b.jobs = append(b.jobs, job)
	b.mu.Unlock()
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

// next takes the next queued job, if any.
func (b *backfills) next() (backfillJob, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.jobs) == 0 {
		return backfillJob{}, false
	}
	job := b.jobs[0]
	b.jobs = b.jobs[1:]
	return job, true
}

// addition is a newly found table waiting for its AddPrefix message.
type addition struct {
	id    string
	table *manifest.Table
	done  chan struct{}
}

// newBackfills lists the tables of m whose snapshot is not complete and
// starts tracking their changes. A table without a primary key cannot be
// backfilled: it is refused with what to do.
func (s *Service) newBackfills(m *manifest.Manifest) error {
	s.trackers = map[cdc.TableID]*backfill.Tracker{}
	s.shadow = map[cdc.TableID]string{}
	s.pruneAt = pruneFloor
	s.bf = &backfills{errc: make(chan error, 1), notify: make(chan struct{}, 1)}
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	s.bfRun = hex.EncodeToString(b[:])
	keys := make([]string, 0, len(m.Tables))
	for key := range m.Tables {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		mt := m.Tables[key]
		s.byNameAtStart = append(s.byNameAtStart, mt.ID())
		if mt.Snapshot.Complete() {
			if err := s.takeResnapshot(mt); err != nil {
				return err
			}
			continue
		}
		t := s.byName[key]
		if len(t.PrimaryKey) == 0 {
			return &cdc.Error{
				Class: cdc.ErrSchemaChanged,
				Msg:   fmt.Sprintf("table %s has no primary key: it cannot be backfilled while streaming (its snapshot is %q)", t.ID, mt.Snapshot.State),
				Hint:  "a backfill places copied rows by primary key, which REPLICA IDENTITY FULL does not give; add a primary key (ALTER TABLE ... ADD PRIMARY KEY), or remove the table from tables.include and the publication",
			}
		}
		s.trackers[t.ID] = backfill.NewTracker()
		s.bf.queue(backfillJob{table: t, after: slices.Clone(mt.Snapshot.LastKey), estimate: mt.Snapshot.RowsEstimate == 0})
	}
	return nil
}

// takeResnapshot takes up mt's resnapshot request, if it has one not yet
// taken up in this session: from here on every streamed change of the table
// is written to the generation being built as well (write), its changes
// are tracked, and the worker copies it into that generation.
func (s *Service) takeResnapshot(mt *manifest.Table) error {
	r := mt.Resnapshot
	if r == nil || r.Generation == mt.Generation || s.shadow[mt.ID()] != "" {
		return nil
	}
	t := s.byName[mt.ID().String()]
	if t == nil {
		return nil
	}
	if len(t.PrimaryKey) == 0 {
		return &cdc.Error{
			Class: cdc.ErrSchemaChanged,
			Msg:   fmt.Sprintf("table %s has no primary key: it cannot be resnapshotted", t.ID),
			Hint:  "a resnapshot places copied rows by primary key; add one (ALTER TABLE ... ADD PRIMARY KEY), or rebuild the capture",
		}
	}
	s.shadow[t.ID] = r.Generation
	s.trackers[t.ID] = backfill.NewTracker()
	s.log.Info("resnapshot taken up: building the next generation", "table", t.ID.String(), "generation", r.Generation, "after", r.Snapshot.LastKey)
	s.bf.queue(backfillJob{table: t, after: slices.Clone(r.Snapshot.LastKey), estimate: r.Snapshot.RowsEstimate == 0, gen: r.Generation})
	return nil
}

// resnapshotRequested re-reads the manifest after pg-cdc resnapshot
// recorded a request, and takes up the requests it finds.
func (s *Service) resnapshotRequested(ctx context.Context) error {
	if err := s.committer.Manifest.Resync(ctx); err != nil {
		return fmt.Errorf("re-read the manifest for a resnapshot request: %w", err)
	}
	m := s.committer.Manifest.Current()
	for _, key := range slices.Sorted(maps.Keys(m.Tables)) {
		if err := s.takeResnapshot(m.Tables[key]); err != nil {
			return err
		}
	}
	return nil
}

// startBackfills runs the chunk worker beside the loop and returns the
// function that stops it and waits for it.
func (s *Service) startBackfills(ctx context.Context) (stop func()) {
	if s.cfg.Chunks == nil {
		if len(s.bf.jobs) > 0 {
			s.log.Warn("tables wait for a backfill, but this session has no chunk source", "tables", len(s.bf.jobs))
		}
		return func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.runBackfills(wctx); err != nil && wctx.Err() == nil {
			s.bf.errc <- err
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// backfillErr returns the worker's error, if it failed.
func (s *Service) backfillErr() error {
	if s.bf == nil {
		return nil
	}
	select {
	case err := <-s.bf.errc:
		return fmt.Errorf("backfill: %w", err)
	default:
		return nil
	}
}

// runBackfills copies the tables one after the other, a chunk at a time,
// then (with a TableSource) looks for new tables every DiscoverInterval and
// backfills each it finds.
func (s *Service) runBackfills(ctx context.Context) error {
	known := map[cdc.TableID]bool{}
	for _, t := range s.byNameAtStart {
		known[t] = true
	}
	var tick <-chan time.Time
	if s.cfg.Tables != nil && s.cfg.DiscoverInterval > 0 {
		ticker := time.NewTicker(s.cfg.DiscoverInterval)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		for job, ok := s.bf.next(); ok; job, ok = s.bf.next() {
			if err := s.backfillTable(ctx, job); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.bf.notify:
			continue
		case <-tick:
		}
		found, err := s.cfg.Tables.NewTables(ctx, func(id cdc.TableID) bool { return known[id] })
		var refused *cdc.Error
		switch {
		case err == nil:
		case errors.As(err, &refused) || ctx.Err() != nil:
			return err
		default:
			// Looking is not worth stopping the stream for (a table named
			// in tables.include was dropped, say): the next round tries
			// again.
			s.log.Warn("looking for new tables failed; trying again at the next interval", "err", err)
			continue
		}
		for _, mt := range found {
			if err := s.addTable(ctx, mt); err != nil {
				return err
			}
			known[mt.ID()] = true
			t, err := mt.SourceTable()
			if err != nil {
				return err
			}
			if err := s.backfillTable(ctx, backfillJob{table: t, estimate: true}); err != nil {
				return err
			}
		}
	}
}

// addTable hands a newly found table to the loop, which records it in the
// manifest (flushed at once), and only then publishes it: the stream knows
// the table before its first change can arrive. A crash in between leaves a
// table in the publication that the manifest lacks; start adds it again
// before streaming (the command's addNewTables).
func (s *Service) addTable(ctx context.Context, mt *manifest.Table) error {
	a := &addition{id: fmt.Sprintf("%s/add/%s", s.bfRun, mt.ID()), table: mt, done: make(chan struct{})}
	s.bf.mu.Lock()
	s.bf.adding = a
	s.bf.mu.Unlock()
	if _, err := s.cfg.Chunks.EmitMarker(ctx, AddPrefix, a.id); err != nil {
		return err
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.log.Info("new table captured; publishing it, then backfilling it", "table", mt.ID().String())
	return s.cfg.Tables.Publish(ctx, []cdc.TableID{mt.ID()})
}

// backfillTable copies one table: read a chunk, hand it to the loop, write
// its marker, wait until the loop has placed it. One chunk is in memory at a
// time.
func (s *Service) backfillTable(ctx context.Context, job backfillJob) error {
	maxRows := s.cfg.ChunkRows
	if maxRows <= 0 {
		maxRows = DefaultChunkRows
	}
	// The first chunk is small; later ones as many rows as chunkBytes holds
	// at the size rows had so far, at most maxRows: wide rows (8 KB of
	// text each) must not make a 50,000-row chunk 400 MB in memory.
	limit := min(maxRows, firstChunkRows)
	t := job.table
	var estimate int64
	if job.estimate {
		n, err := s.cfg.Chunks.EstimateRows(ctx, t.ID)
		if err != nil {
			return err
		}
		estimate = n // 0 (never analysed): asked again next session
	}
	s.log.Info("backfill started", "table", t.ID.String(), "after", job.after, "chunk_rows", limit, "generation", job.gen)
	if job.after == nil && job.gen == "" && s.cfg.Tables != nil {
		// A table start published before streaming (or a crash left for
		// it to publish): the wait is here, beside the stream, so a
		// transaction left open in the database delays this copy only.
		if err := s.cfg.Tables.WaitInFlight(ctx); err != nil {
			return err
		}
	}
	after := job.after
	keyIdx := make([]int, len(t.PrimaryKey))
	for i, k := range t.PrimaryKey {
		keyIdx[i] = t.ColumnIndex(k)
	}
	for n := 0; ; n++ {
		c := &chunk{id: fmt.Sprintf("%s/%s/%d", s.bfRun, t.ID, n), table: t, limit: limit, estimate: estimate, gen: job.gen, placed: make(chan struct{})}
		estimate = 0
		var size int64
		snap, _, err := s.cfg.Chunks.ReadChunk(ctx, t, after, limit, func(values []cdc.Datum) error {
			row := copyRow(values)
			c.rows = append(c.rows, row)
			size += int64((&cdc.Change{Values: row}).Size())
			return nil
		})
		if err != nil {
			return err
		}
		c.snap, c.readAt = snap, s.now()
		if len(c.rows) > 0 {
			last := c.rows[len(c.rows)-1]
			c.lastKey = make([]string, len(keyIdx))
			for i, j := range keyIdx {
				c.lastKey[i] = string(last[j].Text)
			}
		}
		s.bf.mu.Lock()
		s.bf.pending = c
		s.bf.mu.Unlock()
		if _, err := s.cfg.Chunks.EmitMarker(ctx, MarkerPrefix, c.id); err != nil {
			return err
		}
		select {
		case <-c.placed:
		case <-ctx.Done():
			return ctx.Err()
		}
		if len(c.rows) < limit {
			s.log.Info("backfill copied every row; complete with the next flush", "table", t.ID.String(), "chunks", n+1)
			return nil
		}
		after = c.lastKey
		limit = nextChunkRows(maxRows, len(c.rows), size)
	}
}

// firstChunkRows is the size of a table's first chunk in a session, and
// chunkBytes what a chunk may hold in memory (about) after it.
const (
	firstChunkRows = 1000
	chunkBytes     = 32 << 20
)

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

// placeChunk places the chunk whose marker m the stream just delivered:
// every row as an insert at the position the planner gives (backfill.Chunk),
// its progress committed with the epoch, the trackers pruned. A marker of
// no pending chunk (a replay after a restart, or written by an earlier
// process) is ignored: its chunk is in the manifest already, or will be read
// again after the manifest's last key.
func (s *Service) placeChunk(ctx context.Context, m *pgoutput.LogicalMessage) error {
	s.bf.mu.Lock()
	c := s.bf.pending
	if c == nil || c.id != string(m.Content) {
		s.bf.mu.Unlock()
		return nil
	}
	s.bf.pending = nil
	s.bf.mu.Unlock()
	if s.cur != nil || s.streamTop != 0 {
		return fmt.Errorf("protocol: backfill marker %s at %s inside a transaction", c.id, m.LSN)
	}
	t := c.table
	tr := s.trackers[t.ID]
	if tr == nil {
		return fmt.Errorf("backfill of %s: chunk %s for a table not being backfilled", t.ID, c.id)
	}
	e := s.openEpoch()
	place := tr.Chunk(c.snap, m.LSN)
	moved := 0
	for i, values := range c.rows {
		key, err := s.trackKey(t, values)
		if err != nil {
			return fmt.Errorf("backfill of %s: %w", t.ID, err)
		}
		pos := place.Place(key, i, len(c.rows))
		if pos.LSN != m.LSN {
			moved++
		}
		ch := &cdc.Change{Table: t, Op: cdc.OpInsert, Values: values}
		if err := s.checkEnumLabels(ctx, e, ch); err != nil {
			return err
		}
		// __xid 0 marks a snapshot row (DESIGN §4): it reflects every
		// transaction the chunk's snapshot saw, none of them alone.
		meta := cdc.RowMeta{Op: cdc.OpInsert, LSN: pos.LSN, Seq: pos.Seq, CommitTime: c.readAt}
		write := e.Write
		if c.gen != "" {
			write = func(meta cdc.RowMeta, ch *cdc.Change) error { return e.WriteTo(c.gen, meta, ch) }
		}
		if err := write(meta, ch); err != nil {
			return fmt.Errorf("backfill of %s: %w", t.ID, err)
		}
	}
	for _, other := range s.trackers {
		other.Prune(c.snap)
	}
	res := backfill.ChunkResult{Rows: len(c.rows), Limit: c.limit, LastKey: c.lastKey, Marker: m.LSN}
	now, estimate, gen := s.now(), c.estimate, c.gen
	e.Also(func(mf *manifest.Manifest) error {
		mt := mf.Tables[t.ID.String()]
		if mt == nil {
			return fmt.Errorf("backfill of %s: the table vanished from the manifest", t.ID)
		}
		if gen != "" {
			return advanceResnapshot(mf, mt, gen, res, estimate, now)
		}
		mt.Snapshot = backfill.Advance(mt.Snapshot, res, now)
		if estimate > 0 && mt.Snapshot.RowsEstimate == 0 {
			mt.Snapshot.RowsEstimate = estimate
		}
		return nil
	})
	// The chunk is no transaction of the source, but the epoch holds it as
	// one so that it is flushed; its end is a position already received.
	e.CommitTxn(cdc.TxnMeta{EndLSN: max(s.durable, s.receivedLSN)}, s.now())
	s.log.Info("backfill chunk placed", "table", t.ID.String(), "rows", len(c.rows), "marker", m.LSN,
		"before_invisible_changes", moved, "tracked_changes", tr.Len(), "epoch", e.Number, "generation", c.gen)
	if len(c.rows) < c.limit {
		delete(s.trackers, t.ID)
		if c.gen != "" {
			// The epoch switches the table's generation: flush it now, so
			// that no later change lands in it for the generation it
			// retires (the flush names files by the manifest's current
			// generation, and the next epoch's is the new one).
			delete(s.shadow, t.ID)
			if err := s.flush(ctx, "resnapshot-switch"); err != nil {
				return err
			}
			s.log.Info("resnapshot complete: switched to the new generation", "table", t.ID.String(), "generation", c.gen)
		}
	}
	close(c.placed)
	return nil
}

// advanceResnapshot records a resnapshot's chunk; after the last one it
// switches the table to the generation built, in this same manifest write
// (DESIGN §8): base none, its deltas the chunks and the changes streamed
// since the request was taken up; the current generation's files retired.
func advanceResnapshot(mf *manifest.Manifest, mt *manifest.Table, gen string, res backfill.ChunkResult, estimate int64, now time.Time) error {
	r := mt.Resnapshot
	if r == nil || r.Generation != gen {
		return fmt.Errorf("resnapshot of %s: generation %s is no longer being built", mt.ID(), gen)
	}
	r.Snapshot = backfill.Advance(r.Snapshot, res, now)
	if estimate > 0 && r.Snapshot.RowsEstimate == 0 {
		r.Snapshot.RowsEstimate = estimate
	}
	if !r.Snapshot.Complete() {
		return nil
	}
	var rows int64
	for _, d := range r.Deltas {
		rows += d.Rows
	}
	if rows < r.Snapshot.RowsCopied {
		// Every copied row is in a delta of the new generation, besides the
		// streamed ones: fewer rows means a chunk's file is missing.
		return fmt.Errorf("resnapshot of %s: generation %s holds %d rows in its deltas, fewer than the %d rows copied", mt.ID(), gen, rows, r.Snapshot.RowsCopied)
	}
	next := *mt
	next.Generation = gen
	next.Base = nil
	next.Deltas = r.Deltas
	next.Snapshot = r.Snapshot
	next.Resnapshot = nil
	return mf.SwitchGeneration(&next, now)
}

// placeAddition records the table the worker found, whose AddPrefix message
// m the stream just delivered: the loop knows it from here on, and the
// manifest holds it once the flush made here returns, before the worker
// publishes it.
func (s *Service) placeAddition(ctx context.Context, m *pgoutput.LogicalMessage) error {
	s.bf.mu.Lock()
	a := s.bf.adding
	if a == nil || a.id != string(m.Content) {
		s.bf.mu.Unlock()
		return nil
	}
	s.bf.adding = nil
	s.bf.mu.Unlock()
	if s.cur != nil || s.streamTop != 0 {
		return fmt.Errorf("protocol: new-table message %s at %s inside a transaction", a.id, m.LSN)
	}
	key := a.table.ID().String()
	t, err := a.table.SourceTable()
	if err != nil {
		return err
	}
	s.byName[key] = t
	s.trackers[t.ID] = backfill.NewTracker()
	e := s.openEpoch()
	mt := a.table
	e.Also(func(mf *manifest.Manifest) error {
		if mf.Tables[key] == nil {
			mf.Tables[key] = mt
		}
		return nil
	})
	e.CommitTxn(cdc.TxnMeta{EndLSN: max(s.durable, s.receivedLSN)}, s.now())
	if err := s.flush(ctx, "new-table"); err != nil {
		return err
	}
	close(a.done)
	return nil
}

// track records a committed change of a table being backfilled.
func (s *Service) track(tr *backfill.Tracker, meta cdc.RowMeta, c *cdc.Change) error {
	if c.Op == cdc.OpTruncate {
		tr.Truncate(meta.XID, meta.LSN)
		return nil
	}
	key, err := s.trackKey(c.Table, c.Values)
	if err != nil {
		return err
	}
	tr.Change(key, meta.XID, meta.LSN)
	if tr.Len() >= s.pruneAt {
		s.pruneEarly()
	}
	return nil
}

// pruneFloor is the tracker size from which the loop prunes before the
// pending chunk's marker arrives.
const pruneFloor = 100_000

// pruneEarly prunes the trackers with the snapshot of the chunk waiting for
// its marker. While the loop works through a backlog (a resumed init
// streams from its consistent point) the marker is far ahead and every
// change of the backlog would be tracked until it arrives; the pending
// chunk's snapshot sees almost all of them, and pruning with it is as safe
// as after placement: that chunk and every later one only look at changes
// their (later) snapshots do not see.
func (s *Service) pruneEarly() {
	s.bf.mu.Lock()
	c := s.bf.pending
	s.bf.mu.Unlock()
	if c == nil {
		// No snapshot to prune with yet: the worker is reading the chunk.
		s.pruneAt += pruneFloor
		return
	}
	n := 0
	for _, tr := range s.trackers {
		tr.Prune(c.snap)
		n += tr.Len()
	}
	s.pruneAt = max(pruneFloor, 2*n)
}

// trackKey is the key of a row as the tracker compares it: each key
// column's typed value (the Parquet value the row's text converts to), so
// that the stream's text and the COPY's text of one value always agree.
func (s *Service) trackKey(t *cdc.Table, values []cdc.Datum) (string, error) {
	sc, err := s.schema(t)
	if err != nil {
		return "", err
	}
	var b []byte
	for _, name := range t.PrimaryKey {
		i := t.ColumnIndex(name)
		if i < 0 || i >= len(values) || values[i].Kind != cdc.DatumText {
			b = append(b, 0)
			continue
		}
		text := string(values[i].Text)
		vals, err := sc.ColumnValues(i, &text)
		if err != nil {
			return "", fmt.Errorf("table %s: key column %q: %w", t.ID, name, err)
		}
		for _, v := range vals {
			str := v.String()
			b = binary.AppendUvarint(append(b, 1), uint64(len(str)))
			b = append(b, str...)
		}
	}
	return string(b), nil
}
