package flush

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/failpoint"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Committer makes epochs durable: delta files, then the manifest.
type Committer struct {
	Store    blob.Store
	Manifest *manifest.Committer
	Workers  int
	Now      func() time.Time
}

// Result describes a flushed epoch.
type Result struct {
	Epoch  uint64
	Tables int
	Rows   int64
	Bytes  int64
	// Adjusted counts the values a documented type rule wrote (see
	// parquetfile.Rule), over all tables.
	Adjusted int64
	// Durable is the end LSN the new manifest holds: the position that may
	// now be confirmed to PostgreSQL.
	Durable manifest.EpochRecord
}

// Flush makes e durable and returns the manifest's new end LSN. On error
// nothing is confirmed: the previous manifest stays authoritative and the
// epoch's transactions will be replayed. e is consumed either way.
func (c *Committer) Flush(ctx context.Context, e *Epoch) (Result, error) {
	defer e.Discard()
	if e.inTxn {
		return Result{}, fmt.Errorf("flush epoch %d: a transaction is still open (flushes are cut only at commit boundaries)", e.Number)
	}
	m := c.Manifest.Current()
	if e.Number != m.Epoch+1 {
		return Result{}, fmt.Errorf("flush epoch %d: the manifest is at epoch %d", e.Number, m.Epoch)
	}

	// Step 1: delta files, in parallel across tables.
	type uploaded struct {
		key      string
		rows     int64
		bytes    int64
		adjusted map[string]int64
		td       *tableDelta
		gen      string
	}
	var (
		mu    sync.Mutex
		files []uploaded
	)
	// Every table must be known before any upload starts, so an error never
	// returns while uploads are still running.
	// A table written under two schema versions in this epoch has a file
	// (and a delta entry) per version, numbered in write order.
	keys := make(map[segment]string, len(e.order))
	parts := map[cdc.TableID]int{}
	for _, seg := range e.order {
		mt := m.Tables[seg.id.String()]
		if mt == nil {
			return Result{}, fmt.Errorf("flush epoch %d: table %s is not in the manifest", e.Number, seg.id)
		}
		gen := mt.Generation
		if seg.gen != "" {
			gen = seg.gen
		}
		keys[seg] = manifest.FileKey(seg.id, gen, manifest.KindDelta, e.Number, parts[seg.id])
		parts[seg.id]++
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, c.Workers))
	for _, seg := range e.order {
		td, key := e.tables[seg], keys[seg]
		g.Go(func() error {
			size, err := td.file.Finish()
			if err != nil {
				return err
			}
			if err := td.file.Upload(gctx, c.Store, key); err != nil {
				return fmt.Errorf("%w: %w", blob.ErrUnavailable, err)
			}
			mu.Lock()
			files = append(files, uploaded{key: key, rows: td.file.Rows(), bytes: size, adjusted: td.file.Adjusted(), td: td, gen: seg.gen})
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Result{}, fmt.Errorf("flush epoch %d: write delta files: %w", e.Number, err)
	}
	failpoint.Inject("flush/after-deltas")
	// Uploads finish in any order; the manifest lists a table's deltas in
	// the order they were written (their part numbers).
	slices.SortFunc(files, func(a, b uploaded) int { return strings.Compare(a.key, b.key) })

	// Step 2: the manifest, with CAS. The mutation is monotonic so that a
	// conflict retry re-applies it to a fresh manifest safely.
	now := c.Now().UTC()
	rec := manifest.EpochRecord{Epoch: e.Number, EndLSN: e.endLSN, MaxCommitTime: e.maxCommitTime.UTC(), FlushedAt: now}
	res := Result{Epoch: e.Number, Tables: len(files), Durable: rec}
	_, err := c.Manifest.Commit(ctx, func(m *manifest.Manifest) error {
		if m.Epoch >= e.Number {
			return fmt.Errorf("flush epoch %d: another writer committed epoch %d", e.Number, m.Epoch)
		}
		// Schema versions first: a delta names the version it was written
		// with, and both land in this one write.
		for _, ns := range e.schemas {
			t := m.Tables[ns.Table.String()]
			if t == nil {
				return fmt.Errorf("flush epoch %d: table %s vanished from the manifest", e.Number, ns.Table)
			}
			if t.SchemaAt(ns.Version) != nil && ns.Version != 0 {
				return fmt.Errorf("flush epoch %d: table %s already has schema version %d", e.Number, ns.Table, ns.Version)
			}
			t.Schemas = append(t.Schemas, manifest.SchemaVersion{Version: ns.Version, FromEpoch: e.Number, Columns: ns.Columns})
			t.SchemaVersion = max(t.SchemaVersion, ns.Version)
		}
		for _, u := range e.labels {
			t := m.Tables[u.Table.String()]
			if t == nil {
				continue
			}
			if sv := t.SchemaAt(u.Version); sv != nil && u.Version != 0 {
				for i := range sv.Columns {
					if c := &sv.Columns[i]; c.FieldID == u.FieldID && len(u.Labels) > len(c.EnumLabels) {
						c.EnumLabels = u.Labels
					}
				}
			}
		}
		for _, f := range files {
			t := m.Tables[f.td.table.ID.String()]
			if t == nil {
				return fmt.Errorf("flush epoch %d: table %s vanished from the manifest", e.Number, f.td.table.ID)
			}
			version := f.td.table.SchemaVersion
			if version == 0 {
				version = t.SchemaVersion
			}
			d := manifest.Delta{
				Epoch: e.Number, MinLSN: f.td.minLSN, MaxLSN: f.td.maxLSN, Rows: f.rows,
				SchemaVersion:    version,
				Files:            []manifest.File{{Path: f.key, Rows: f.rows, Bytes: f.bytes}},
				Adjusted:         f.adjusted,
				UnrecoveredTOAST: f.td.unrecovered,
			}
			switch {
			case f.gen == "" || f.gen == t.Generation:
				t.Deltas = append(t.Deltas, d)
			case t.Resnapshot != nil && t.Resnapshot.Generation == f.gen:
				t.Resnapshot.Deltas = append(t.Resnapshot.Deltas, d)
			default:
				return fmt.Errorf("flush epoch %d: table %s has no generation %s being built", e.Number, f.td.table.ID, f.gen)
			}
		}
		for _, fn := range e.also {
			if err := fn(m); err != nil {
				return err
			}
		}
		m.Epoch = e.Number
		m.EndLSN = max(m.EndLSN, e.endLSN)
		m.History = append(m.History, rec)
		if n := len(m.History); n > manifest.HistoryLimit {
			m.History = append([]manifest.EpochRecord(nil), m.History[n-manifest.HistoryLimit:]...)
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("flush epoch %d: %w", e.Number, err)
	}
	failpoint.Inject("flush/after-manifest")
	for _, f := range files {
		res.Rows += f.rows
		res.Bytes += f.bytes
		for _, n := range f.adjusted {
			res.Adjusted += n
		}
	}
	return res, nil
}

// AdvanceIdle records an idle position in the manifest (no new epoch, no
// files) so that it may be confirmed; see IdleAdvance.
func (c *Committer) AdvanceIdle(ctx context.Context, pos cdc.LSN) error {
	_, err := c.Manifest.Commit(ctx, func(m *manifest.Manifest) error {
		m.EndLSN = max(m.EndLSN, pos)
		return nil
	})
	if err != nil {
		return fmt.Errorf("record idle position %s: %w", pos, err)
	}
	return nil
}
