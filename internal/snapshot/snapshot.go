// Package snapshot takes the initial snapshot (design.md §5): every table is
// copied under the slot's exported snapshot, in parallel, into base Parquet
// files stamped with the slot's consistent point, so streaming can start at
// exactly that LSN with no gap and no overlap.
//
// Snapshot rows carry __op 'I', __lsn = the consistent point, __xid 0 and a
// negative __seq, unique within the table, so that they order before any
// change committed at the consistent point itself.
package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/failpoint"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/spool"
)

// Source copies one table under an exported snapshot.
type Source interface {
	// CopyTable calls fn for every row; values are valid only during the call.
	CopyTable(ctx context.Context, snapshot string, t *cdc.Table, fn func(values []cdc.Datum) error) (int64, error)
}

// Options describe one snapshot.
type Options struct {
	// Snapshot is the exported snapshot name ("" reads the current state;
	// only tests do that).
	Snapshot string
	// LSN is the slot's consistent point.
	LSN cdc.LSN
	// Time stamps __op_ts of snapshot rows.
	Time       time.Time
	Workers    int
	Generation string
	// SpoolDir is local scratch space for files before upload.
	SpoolDir string
	// PartRows starts a new base file after this many rows (0: one file).
	PartRows int64
	// Encoders is how many goroutines encode one table's rows into Parquet
	// (at most 2; 0 or 1: one). A table gets its second encoder, and so a
	// second base file, only past secondEncoderAfter rows.
	Encoders int
	// Done, when set, is called as soon as a table's base files are all
	// uploaded, on the worker that copied it: concurrently for different
	// tables, so it must be safe for that (Recorder is). An error fails the
	// run. init commits each table's base with it, so a crash keeps the
	// tables already copied.
	Done func(ctx context.Context, t *cdc.Table, base *manifest.Base) error
	// Progress, when set, counts each table's rows as the COPY reads them.
	Progress *Progress
}

// Progress counts the rows read so far per table, for progress reports.
// It is safe for concurrent use.
type Progress struct {
	mu   sync.Mutex
	rows map[string]int64
}

func (p *Progress) add(id cdc.TableID, n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rows == nil {
		p.rows = map[string]int64{}
	}
	p.rows[id.String()] += n
}

// Rows returns a copy of the counts so far, keyed by "schema.table".
func (p *Progress) Rows() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.rows)
}

// FailpointBatch names the failpoint hit after each batch of rows (up to
// batchRows) a table's COPY hands to its encoders; the table's "schema.table"
// follows the slash. Crash tests stop or kill init there, mid-table.
const FailpointBatch = "snapshot/batch/"

// Run copies tables and uploads their base files. It returns each table's
// base, keyed by "schema.table".
func Run(ctx context.Context, src Source, store blob.Store, tables []*cdc.Table, opts Options, log *slog.Logger) (map[string]*manifest.Base, error) {
	var (
		mu    sync.Mutex
		bases = map[string]*manifest.Base{}
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, opts.Workers))
	// extra holds the encoders beyond each table's first, shared by all
	// tables so that memory stays bounded by Workers + Encoders - 1 writers.
	extra := make(chan struct{}, max(0, min(opts.Encoders, 2)-1))
	for _, t := range tables {
		g.Go(func() error {
			started := time.Now()
			b, err := copyTable(gctx, src, store, t, opts, extra, log)
			if err != nil {
				return fmt.Errorf("snapshot table %s: %w", t.ID, err)
			}
			log.Info("snapshotted table", "table", t.ID.String(), "rows", b.RowCount, "files", len(b.Files),
				"duration_ms", time.Since(started).Milliseconds())
			if opts.Done != nil {
				if err := opts.Done(gctx, t, b); err != nil {
					return fmt.Errorf("snapshot table %s: record its base: %w", t.ID, err)
				}
			}
			mu.Lock()
			bases[t.ID.String()] = b
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return bases, nil
}

// Rows travel from the COPY to the encoders in batches of batchRows rows or
// batchBytes bytes of values, whichever comes first; batchesInFlight bounds
// the batches queued or being encoded (memory: about batchesInFlight ×
// batchBytes besides the writers' row groups).
const (
	batchRows       = 512
	batchBytes      = 256 << 10
	batchesInFlight = 8
)

// secondEncoderAfter is the row count after which a table gets its second
// encoder: small tables keep one base file, big ones spread the encoding
// (conversion, Parquet, zstd: most of a snapshot's CPU) over two cores.
const secondEncoderAfter = 200_000

// batch is a run of consecutive rows of one table, copied out of the COPY
// parser's buffers (which it reuses for every row).
type batch struct {
	first  int64       // row number of the first row, from 0
	values []cdc.Datum // rows × columns, Text pointing into data
	data   []byte      // the values' bytes
	rows   int
}

func (b *batch) add(values []cdc.Datum) {
	for _, v := range values {
		if v.Kind == cdc.DatumText {
			start := len(b.data)
			b.data = append(b.data, v.Text...)
			// Text is re-pointed after the batch is full: data may still
			// move while it grows.
			b.values = append(b.values, cdc.Datum{Kind: v.Kind, Text: b.data[start:len(b.data):len(b.data)]})
			continue
		}
		b.values = append(b.values, cdc.Datum{Kind: v.Kind})
	}
	b.rows++
}

// seal points every Text at its final place in data: appends may have moved
// data since the values were added.
func (b *batch) seal() {
	off := 0
	for i := range b.values {
		if b.values[i].Kind != cdc.DatumText {
			continue
		}
		n := len(b.values[i].Text)
		b.values[i].Text = b.data[off : off+n : off+n]
		off += n
	}
}

func (b *batch) reset() {
	clear(b.values)
	b.values, b.data, b.rows = b.values[:0], b.data[:0], 0
	if cap(b.data) > 4*batchBytes {
		b.data = nil // one huge value must not stay allocated
	}
}

// copyTable reads the table (the COPY and its parser) on one goroutine and
// encodes it on one or, past secondEncoderAfter rows and when extra has
// room, two others, each writing base parts of its own; the base lists every
// part. Row numbers, and so __seq, follow the COPY's order whatever part a
// row lands in.
func copyTable(ctx context.Context, src Source, store blob.Store, t *cdc.Table, opts Options, extra chan struct{}, log *slog.Logger) (*manifest.Base, error) {
	schema, err := parquetfile.NewSchema(t)
	if err != nil {
		return nil, err
	}
	schema.SetReporter(func(a parquetfile.Adjustment) {
		log.Warn("value written by a type rule", "table", a.Table.String(), "column", a.Column,
			"rule", string(a.Rule), "key", a.Key, "value", a.Value, "detail", a.String())
	})
	g, gctx := errgroup.WithContext(ctx)
	enc := &encoders{ctx: gctx, store: store, t: t, schema: schema, opts: opts,
		dir:  filepath.Join(opts.SpoolDir, "snapshot"),
		base: &manifest.Base{Epoch: 0, MaxLSN: opts.LSN, Files: []manifest.File{}},
		full: make(chan *batch, batchesInFlight), free: make(chan *batch, batchesInFlight)}
	for range batchesInFlight {
		enc.free <- &batch{}
	}
	g.Go(enc.run)

	var n int64 // rows read
	fp := FailpointBatch + t.ID.String()
	g.Go(func() error {
		defer close(enc.full)
		var cur *batch
		send := func() error {
			cur.seal()
			rows := int64(cur.rows) // the encoder owns cur once it is sent
			select {
			case enc.full <- cur:
				opts.Progress.add(t.ID, rows)
				cur = nil
				failpoint.Inject(fp)
				return nil
			case <-gctx.Done():
				return context.Cause(gctx)
			}
		}
		second := false
		_, err := src.CopyTable(gctx, opts.Snapshot, t, func(values []cdc.Datum) error {
			if cur == nil {
				select {
				case cur = <-enc.free:
				case <-gctx.Done():
					return context.Cause(gctx)
				}
				cur.first = n
			}
			cur.add(values)
			n++
			if !second && n > secondEncoderAfter {
				second = true
				select {
				case extra <- struct{}{}:
					g.Go(func() error {
						defer func() { <-extra }()
						return enc.run()
					})
				default: // another table has the spare encoder
				}
			}
			if cur.rows >= batchRows || len(cur.data) >= batchBytes {
				return send()
			}
			return nil
		})
		if err == nil && cur != nil && cur.rows > 0 {
			err = send()
		}
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	base := enc.base
	if len(base.Files) == 0 {
		// An empty table still gets one (empty) base file, so readers and
		// catalogs always find its schema.
		part, err := spool.Create(enc.dir, schema)
		if err != nil {
			return nil, err
		}
		enc.ctx = ctx
		if err := enc.finish(part); err != nil {
			return nil, err
		}
	}
	// Parts finish in any order; the base lists them by key.
	slices.SortFunc(base.Files, func(a, b manifest.File) int { return strings.Compare(a.Path, b.Path) })
	base.RowCount = n
	return base, nil
}

// encoders are the shared state of a table's encoding goroutines: the
// batches in flight, and the base that every finished part joins under the
// next file number.
type encoders struct {
	ctx    context.Context
	store  blob.Store
	t      *cdc.Table
	schema *parquetfile.Schema
	opts   Options
	dir    string

	full chan *batch // filled by the COPY, closed at its end
	free chan *batch // emptied batches, back to the COPY

	mu    sync.Mutex
	base  *manifest.Base
	parts int
}

// run encodes batches until the COPY ends, into parts of at most
// opts.PartRows rows.
func (e *encoders) run() error {
	var part *spool.File
	defer func() {
		if part != nil {
			_ = part.Remove()
		}
	}()
	width := len(e.t.Columns)
	for b := range e.full {
		if err := e.ctx.Err(); err != nil {
			return context.Cause(e.ctx)
		}
		for r := range b.rows {
			if part == nil {
				var err error
				if part, err = spool.Create(e.dir, e.schema); err != nil {
					return err
				}
			}
			n := b.first + int64(r)
			meta := cdc.RowMeta{Op: cdc.OpInsert, LSN: e.opts.LSN, Seq: math.MinInt64 + n, CommitTime: e.opts.Time}
			if err := part.Write(meta, b.values[r*width:(r+1)*width]); err != nil {
				return fmt.Errorf("row %d: %w", n+1, err)
			}
			if e.opts.PartRows > 0 && part.Rows() >= e.opts.PartRows {
				p := part
				part = nil
				if err := e.finish(p); err != nil {
					return err
				}
			}
		}
		b.reset()
		e.free <- b // never blocks: it has room for every batch
	}
	if part == nil {
		return nil
	}
	p := part
	part = nil
	return e.finish(p)
}

// finish writes the part's footer, uploads it under the next part number,
// records it in the base and removes the local file.
func (e *encoders) finish(part *spool.File) error {
	defer func() { _ = part.Remove() }()
	size, err := part.Finish()
	if err != nil {
		return err
	}
	e.mu.Lock()
	idx := e.parts
	e.parts++
	e.mu.Unlock()
	key := manifest.FileKey(e.t.ID, e.opts.Generation, manifest.KindBase, 0, idx)
	if err := part.Upload(e.ctx, e.store, key); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.base.Files = append(e.base.Files, manifest.File{Path: key, Rows: part.Rows(), Bytes: size})
	for col, n := range part.Adjusted() {
		if e.base.Adjusted == nil {
			e.base.Adjusted = map[string]int64{}
		}
		e.base.Adjusted[col] += n
	}
	return nil
}
