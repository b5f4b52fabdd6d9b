package replicate

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// A partitioned table is captured through its root: PostgreSQL publishes
// every partition's row changes as the root's (publish_via_partition_root).
// Three changes to the partitions change the root's rows with no row
// change in the WAL: ATTACH PARTITION of a table that holds rows, DETACH
// PARTITION and DROP of a partition. The chunk worker notices them by
// comparing the root's leaf partitions with those the manifest records,
// at every discovery tick, and the loop makes each such table copy itself
// again into its next generation (a resnapshot, design.md §8) while the
// stream goes on: the one way to the source's rows exactly whatever the
// partitions held. A partition created empty (CREATE TABLE … PARTITION OF,
// what pg_partman does ahead of time) only updates the record: its rows
// arrive as the root's row changes.

// checkPartitions tells the loop of each captured partitioned table whose
// leaf partitions differ from the manifest's record (control.Partitions).
// A table with no record yet (captured before pg-cdc recorded partitions)
// gets one, with no resnapshot. The record is the loop's (handoff): until
// the loop has committed the new one, the next tick tells it again, which
// is how a change the loop had to defer is not forgotten. Failing to look
// is logged and tried again at the next tick: the stream does not depend
// on it.
func (w *chunkWorker) checkPartitions(ctx context.Context) error {
	ids := slices.SortedFunc(maps.Keys(w.known), func(a, b cdc.TableID) int { return strings.Compare(a.String(), b.String()) })
	if len(ids) == 0 {
		return nil
	}
	now, err := w.tables.PartitionLeaves(ctx, ids)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.log.Warn("looking at the partitions of the captured tables failed; trying again at the next interval", "err", err)
		return nil
	}
	for _, id := range ids {
		leaves, ok := now[id]
		if !ok {
			continue
		}
		was, recorded := w.h.recordedPartitions(id)
		if recorded && slices.Equal(was, leaves) {
			continue
		}
		why, err := w.partitionChange(ctx, was, leaves, recorded)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.log.Warn("looking at a new partition failed; trying again at the next interval", "table", id.String(), "err", err)
			return nil
		}
		if err := w.emit(ctx, control.Partitions{Table: id.String(), Leaves: leaves, Resnapshot: why != ""}); err != nil {
			return err
		}
		if why != "" {
			w.log.Warn("the partitions of a captured table changed its rows with no row change in the WAL", "table", id.String(), "change", why)
		}
	}
	return nil
}

// partitionChange says why the leaves going from was to now need a
// resnapshot ("" for none): a partition gone (detached or dropped), or one
// added that holds rows (attached with them; or written to since it was
// created, which a resnapshot also gets right).
func (w *chunkWorker) partitionChange(ctx context.Context, was, now []uint32, recorded bool) (string, error) {
	if !recorded {
		return "", nil
	}
	var gone, full []string
	for _, oid := range was {
		if !slices.Contains(now, oid) {
			gone = append(gone, fmt.Sprint(oid))
		}
	}
	for _, oid := range now {
		if slices.Contains(was, oid) {
			continue
		}
		has, err := w.tables.PartitionHasRows(ctx, oid)
		if err != nil {
			return "", err
		}
		if has {
			full = append(full, fmt.Sprint(oid))
		}
	}
	var why []string
	if len(gone) > 0 {
		why = append(why, "partitions detached or dropped (OID "+strings.Join(gone, ", ")+")")
	}
	if len(full) > 0 {
		why = append(why, "partitions added with rows (OID "+strings.Join(full, ", ")+")")
	}
	return strings.Join(why, "; "), nil
}

// partitionsChanged records a table's leaf partitions at the message's
// position and, when the worker asks for it, the table's resnapshot, in
// an epoch flushed at once, then takes the resnapshot up and tells the
// worker the record. A message the manifest already holds (a replay, or a
// worker that told twice) changes nothing.
//
// A change that needs a resnapshot while one of the table is running is
// deferred, not recorded: the copy under way may have read the partitions
// before the change, so only a copy started after it is exact. The worker
// tells again at every tick; once the running one has switched, the next
// message starts the new copy.
func (s *Service) partitionsChanged(ctx context.Context, msg control.Partitions, lsn cdc.LSN) error {
	if lsn <= s.binder.replayEnd {
		return nil
	}
	if s.cur != nil || s.streamTop != 0 {
		return fmt.Errorf("protocol: partitions message for %s at %s inside a transaction", msg.Table, lsn)
	}
	mt := s.committer.Manifest.Current().Tables[msg.Table]
	if mt == nil {
		return nil
	}
	id := mt.ID()
	if mt.Partitions != nil && slices.Equal(mt.Partitions, msg.Leaves) {
		s.bf.h.setPartitions(id, slices.Clone(mt.Partitions))
		return nil
	}
	switch {
	case msg.Resnapshot && mt.Resnapshot != nil:
		s.log.Warn("the partitions of a table changed while its resnapshot runs; copying it again once that one has switched", "table", msg.Table, "generation", mt.Resnapshot.Generation)
		return nil
	case msg.Resnapshot && !mt.Snapshot.Complete():
		// The same for a table still being backfilled: chunks copied before
		// the change may hold rows it moved.
		s.log.Warn("the partitions of a table changed while it is being snapshotted; copying it again once the snapshot is complete", "table", msg.Table)
		return nil
	case msg.Resnapshot && len(mt.PrimaryKey) == 0:
		// Copied rows are placed by key: without one the sink cannot be
		// brought back to the source's rows while streaming, and going on
		// would leave them wrong for good.
		return &cdc.Error{
			Class: cdc.ErrSchemaChanged,
			Msg:   fmt.Sprintf("the partitions of %s changed its rows with no row change in the WAL (a partition attached with rows, detached or dropped), and it has no primary key to copy it again by while streaming", msg.Table),
			Hint:  "rebuild the capture (pg-cdc rebuild), which copies every table again; a partitioned table captured with a primary key is copied again by start itself",
		}
	}
	resnapshot := msg.Resnapshot
	var gen string
	if resnapshot {
		var err error
		if gen, err = manifest.NextGeneration(mt.Generation); err != nil {
			return err
		}
	}
	leaves := slices.Clone(msg.Leaves)
	now := s.now().UTC()
	e := s.openEpoch()
	e.Also(func(mf *manifest.Manifest) error {
		t := mf.Tables[msg.Table]
		if t == nil {
			return nil
		}
		t.Partitions = leaves
		if resnapshot && t.Resnapshot == nil && t.Generation == mt.Generation {
			t.Resnapshot = &manifest.Resnapshot{Generation: gen, RequestedAt: now,
				Snapshot: manifest.Snapshot{State: manifest.SnapshotPending}, Deltas: []manifest.Delta{}}
		}
		return nil
	})
	e.CommitTxn(cdc.TxnMeta{EndLSN: max(s.durable, s.receivedLSN)}, s.now())
	if err := s.flush(ctx, "partitions"); err != nil {
		return err
	}
	s.bf.h.setPartitions(id, leaves)
	if !resnapshot {
		s.log.Info("partitions of a captured table recorded", "table", msg.Table, "partitions", len(leaves))
		return nil
	}
	s.log.Warn("copying a table again into its next generation: its partitions changed its rows with no row change in the WAL", "table", msg.Table, "generation", gen)
	return s.takeResnapshot(s.committer.Manifest.Current().Tables[msg.Table])
}
