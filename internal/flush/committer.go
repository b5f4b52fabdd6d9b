package flush

import (
	"context"
	"fmt"
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
	keys, err := deltaKeys(e, m)
	if err != nil {
		return Result{}, err
	}
	deltas, err := c.upload(ctx, e, keys)
	if err != nil {
		return Result{}, fmt.Errorf("flush epoch %d: write delta files: %w", e.Number, err)
	}
	failpoint.Inject("flush/after-deltas")

	// Step 2: the manifest, with CAS. The mutation is monotonic so that a
	// conflict retry re-applies it to a fresh manifest safely.
	u := e.uploaded(deltas, c.Now())
	if _, err := c.Manifest.Commit(ctx, func(m *manifest.Manifest) error { return applyEpoch(m, u) }); err != nil {
		return Result{}, fmt.Errorf("flush epoch %d: %w", e.Number, err)
	}
	failpoint.Inject("flush/after-manifest")
	return u.result(), nil
}

// deltaKeys names the delta file of every segment of e (design.md §1 rule 6),
// under the generation m gives the table unless the segment names one. A
// table written under two schema versions in this epoch has a file (and a
// delta entry) per version, numbered in write order. Every table must be
// in m before any upload starts, so an error never returns while uploads
// are still running.
func deltaKeys(e *Epoch, m *manifest.Manifest) (map[segment]string, error) {
	keys := make(map[segment]string, len(e.order))
	parts := map[cdc.TableID]int{}
	for _, seg := range e.order {
		mt := m.Tables[seg.id.String()]
		if mt == nil {
			return nil, fmt.Errorf("flush epoch %d: table %s is not in the manifest", e.Number, seg.id)
		}
		gen := mt.Generation
		if seg.gen != "" {
			gen = seg.gen
		}
		keys[seg] = manifest.FileKey(seg.id, gen, manifest.KindDelta, e.Number, parts[seg.id])
		parts[seg.id]++
	}
	return keys, nil
}

// upload finishes every segment's delta file and puts it under its key, at
// most Workers at a time. A failed upload is wrapped with
// blob.ErrUnavailable. It returns the uploaded files in e.order.
func (c *Committer) upload(ctx context.Context, e *Epoch, keys map[segment]string) ([]uploadedDelta, error) {
	out := make([]uploadedDelta, len(e.order)) // each goroutine fills its own element
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, c.Workers))
	for i, seg := range e.order {
		td, key := e.tables[seg], keys[seg]
		g.Go(func() error {
			size, err := td.file.Finish()
			if err != nil {
				return err
			}
			if err := td.file.Upload(gctx, c.Store, key); err != nil {
				return fmt.Errorf("%w: %w", blob.ErrUnavailable, err)
			}
			out[i] = uploadedDelta{
				Table: td.table.ID, Generation: seg.gen, SchemaVersion: td.table.SchemaVersion,
				Key: key, Rows: td.file.Rows(), Bytes: size, MinLSN: td.minLSN, MaxLSN: td.maxLSN,
				Adjusted: td.file.Adjusted(), UnrecoveredTOAST: td.unrecovered,
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// uploaded describes e for its manifest write once its delta files
// (deltas) are in the store; now is the flush time.
func (e *Epoch) uploaded(deltas []uploadedDelta, now time.Time) *uploadedEpoch {
	return &uploadedEpoch{
		Record:  manifest.EpochRecord{Epoch: e.Number, EndLSN: e.endLSN, MaxCommitTime: e.maxCommitTime.UTC(), FlushedAt: now.UTC()},
		Schemas: e.schemas,
		Labels:  e.labels,
		Deltas:  deltas,
		Also:    e.also,
	}
}

// result sums up the committed epoch u.
func (u *uploadedEpoch) result() Result {
	res := Result{Epoch: u.Record.Epoch, Tables: len(u.Deltas), Durable: u.Record}
	for _, d := range u.Deltas {
		res.Rows += d.Rows
		res.Bytes += d.Bytes
		for _, n := range d.Adjusted {
			res.Adjusted += n
		}
	}
	return res
}

// AdvanceIdle records an idle position in the manifest (no new epoch, no
// files) so that it may be confirmed; see IdleAdvance. at is when the
// server reported pos as its WAL end (zero if unknown): with nothing
// pending, the sink then holds every transaction committed up to it, so it
// moves the manifest's FreshAsOf.
func (c *Committer) AdvanceIdle(ctx context.Context, pos cdc.LSN, at time.Time) error {
	_, err := c.Manifest.Commit(ctx, func(m *manifest.Manifest) error {
		m.EndLSN = max(m.EndLSN, pos)
		if at.After(m.FreshAsOf) {
			m.FreshAsOf = at.UTC()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record idle position %s: %w", pos, err)
	}
	return nil
}
