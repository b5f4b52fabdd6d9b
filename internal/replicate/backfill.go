package replicate

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/backfill"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// backfills is the loop's side of a session's backfills (design.md §5):
// the tables whose changes are tracked while their chunks are copied, the
// generations a resnapshot writes to as well, and the handoff to the
// chunk worker. It belongs to the loop's goroutine; the worker sees only
// the handoff.
type backfills struct {
	h      *handoff
	worker *chunkWorker // nil without a chunk source
	// trackers record the changes of each table being backfilled;
	// shadow names, per table being resnapshotted, the generation its
	// streamed changes are written to as well.
	trackers map[cdc.TableID]*backfill.Tracker
	shadow   map[cdc.TableID]string
	// pruneAt: a tracker this large is pruned early (pruneEarly).
	pruneAt int
}

// pruneFloor is the tracker size from which the loop prunes before the
// pending chunk's marker arrives.
const pruneFloor = 100_000

// newBackfills lists the tables of m whose snapshot is not complete, and
// the resnapshots requested, and starts tracking their changes. A table
// without a primary key cannot be backfilled: it is refused with what to do.
func (s *Service) newBackfills(m *manifest.Manifest) error {
	var id [6]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails on supported platforms
	s.bf = &backfills{h: newHandoff(), trackers: map[cdc.TableID]*backfill.Tracker{}, shadow: map[cdc.TableID]string{}, pruneAt: pruneFloor}
	known := map[cdc.TableID]bool{}
	for _, key := range slices.Sorted(maps.Keys(m.Tables)) {
		mt := m.Tables[key]
		known[mt.ID()] = true
		if mt.Partitions != nil {
			s.bf.h.setPartitions(mt.ID(), slices.Clone(mt.Partitions))
		}
		if mt.Snapshot.Complete() {
			if err := s.takeResnapshot(mt); err != nil {
				return err
			}
			continue
		}
		t := s.binder.table(key)
		if len(t.PrimaryKey) == 0 {
			return &cdc.Error{
				Class: cdc.ErrSchemaChanged,
				Msg:   fmt.Sprintf("table %s has no primary key: it cannot be backfilled while streaming (its snapshot is %q)", t.ID, mt.Snapshot.State),
				Hint:  "a backfill places copied rows by primary key, which REPLICA IDENTITY FULL does not give; add a primary key (ALTER TABLE ... ADD PRIMARY KEY), or remove the table from tables.include and the publication",
			}
		}
		s.bf.trackers[t.ID] = backfill.NewTracker()
		s.bf.h.queue(backfillJob{table: t, after: slices.Clone(mt.Snapshot.LastKey), estimate: mt.Snapshot.RowsEstimate == 0})
	}
	if s.cfg.Chunks != nil {
		s.bf.worker = &chunkWorker{chunks: s.cfg.Chunks, tables: s.cfg.Tables, maxRows: s.cfg.ChunkRows, discover: s.cfg.DiscoverInterval,
			log: s.log, now: s.now, run: hex.EncodeToString(id[:]), h: s.bf.h, known: known}
	}
	return nil
}

// startBackfills runs the chunk worker beside the loop and returns the
// function that stops it and waits for it.
func (s *Service) startBackfills(ctx context.Context) (stop func()) {
	if s.bf.worker == nil {
		if n := s.bf.h.queued(); n > 0 {
			s.log.Warn("tables wait for a backfill, but this session has no chunk source", "tables", n)
		}
		return func() {}
	}
	return s.bf.worker.start(ctx)
}

// takeResnapshot takes up mt's resnapshot request, if it has one not yet
// taken up in this session: from here on every streamed change of the table
// is written to the generation being built as well (write), its changes
// are tracked, and the worker copies it into that generation.
func (s *Service) takeResnapshot(mt *manifest.Table) error {
	r := mt.Resnapshot
	if r == nil || r.Generation == mt.Generation || s.bf.shadow[mt.ID()] != "" {
		return nil
	}
	t := s.binder.table(mt.ID().String())
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
	s.bf.shadow[t.ID] = r.Generation
	s.bf.trackers[t.ID] = backfill.NewTracker()
	s.log.Info("resnapshot taken up: building the next generation", "table", t.ID.String(), "generation", r.Generation, "after", r.Snapshot.LastKey)
	s.bf.h.queue(backfillJob{table: t, after: slices.Clone(r.Snapshot.LastKey), estimate: r.Snapshot.RowsEstimate == 0, gen: r.Generation})
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

// placeChunk places the chunk whose marker (id, at lsn) the stream just
// delivered: every row as an insert at the position the planner gives
// (backfill.Chunk), its progress committed with the epoch, the trackers
// pruned. A marker of no parked chunk (a replay after a restart, or written
// by an earlier process) is ignored: its chunk is in the manifest already,
// or will be read again after the manifest's last key.
func (s *Service) placeChunk(ctx context.Context, lsn cdc.LSN, id string) error {
	c := s.bf.h.takeChunk(id)
	if c == nil {
		return nil
	}
	if s.cur != nil || s.streamTop != 0 {
		return fmt.Errorf("protocol: backfill marker %s at %s inside a transaction", c.id, lsn)
	}
	tr := s.bf.trackers[c.table.ID]
	if tr == nil {
		return fmt.Errorf("backfill of %s: chunk %s for a table not being backfilled", c.table.ID, c.id)
	}
	e := s.openEpoch()
	moved, err := s.writeChunk(ctx, c, tr.Chunk(c.snap, lsn), lsn)
	if err != nil {
		return err
	}
	for _, other := range s.bf.trackers {
		other.Prune(c.snap)
	}
	e.Also(chunkProgress(c, backfill.ChunkResult{Rows: len(c.rows), Limit: c.limit, LastKey: c.lastKey, Marker: lsn}, s.now()))
	// The chunk is no transaction of the source, but the epoch holds it as
	// one so that it is flushed; its end is a position already received.
	e.CommitTxn(cdc.TxnMeta{EndLSN: max(s.durable, s.receivedLSN)}, s.now())
	s.log.Info("backfill chunk placed", "table", c.table.ID.String(), "rows", len(c.rows), "marker", lsn,
		"before_invisible_changes", moved, "tracked_changes", tr.Len(), "epoch", e.Number, "generation", c.gen)
	if len(c.rows) < c.limit {
		if err := s.backfillDone(ctx, c); err != nil {
			return err
		}
	}
	close(c.placed)
	return nil
}

// writeChunk writes the chunk's rows into the open epoch where place puts
// them, and counts those placed before a change their snapshot does not see.
func (s *Service) writeChunk(ctx context.Context, c *chunk, place *backfill.Chunk, lsn cdc.LSN) (moved int, err error) {
	e := s.openEpoch()
	t := c.table
	for i, values := range c.rows {
		key, err := s.trackKey(t, values)
		if err != nil {
			return 0, fmt.Errorf("backfill of %s: %w", t.ID, err)
		}
		pos := place.Place(key, i, len(c.rows))
		if pos.LSN != lsn {
			moved++
		}
		ch := &cdc.Change{Table: t, Op: cdc.OpInsert, Values: values}
		if err := s.recordEnumLabels(ctx, e, ch); err != nil {
			return 0, err
		}
		// __xid 0 marks a snapshot row (design.md §4): it reflects every
		// transaction the chunk's snapshot saw, none of them alone.
		meta := cdc.RowMeta{Op: cdc.OpInsert, LSN: pos.LSN, Seq: pos.Seq, CommitTime: c.readAt}
		if c.gen != "" {
			err = e.WriteTo(c.gen, meta, ch)
		} else {
			err = e.Write(meta, ch)
		}
		if err != nil {
			return 0, fmt.Errorf("backfill of %s: %w", t.ID, err)
		}
	}
	return moved, nil
}

// chunkProgress is the manifest edit that records a placed chunk, in the
// same write as its rows.
func chunkProgress(c *chunk, res backfill.ChunkResult, now time.Time) func(*manifest.Manifest) error {
	id, estimate, gen := c.table.ID, c.estimate, c.gen
	return func(mf *manifest.Manifest) error {
		mt := mf.Tables[id.String()]
		if mt == nil {
			return fmt.Errorf("backfill of %s: the table vanished from the manifest", id)
		}
		if gen != "" {
			return advanceResnapshot(mf, mt, gen, res, estimate, now)
		}
		mt.Snapshot = backfill.Advance(mt.Snapshot, res, now)
		if estimate > 0 && mt.Snapshot.RowsEstimate == 0 {
			mt.Snapshot.RowsEstimate = estimate
		}
		return nil
	}
}

// backfillDone ends the tracking of a table whose last chunk was just
// placed. A resnapshot's epoch switches the table's generation: it is
// flushed now, so that no later change lands in it for the generation it
// retires (the flush names files by the manifest's current generation, and
// the next epoch's is the new one).
func (s *Service) backfillDone(ctx context.Context, c *chunk) error {
	delete(s.bf.trackers, c.table.ID)
	if c.gen == "" {
		return nil
	}
	delete(s.bf.shadow, c.table.ID)
	if err := s.flush(ctx, "resnapshot-switch"); err != nil {
		return err
	}
	s.log.Info("resnapshot complete: switched to the new generation", "table", c.table.ID.String(), "generation", c.gen)
	return nil
}

// advanceResnapshot records a resnapshot's chunk; after the last one it
// switches the table to the generation built, in this same manifest write
// (design.md §8): base none, its deltas the chunks and the changes streamed
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

// placeAddition records the table the worker found, whose AddTable message
// (id, at lsn) the stream just delivered: the loop knows it from here on,
// and the manifest holds it once the flush made here returns, before the
// worker publishes it.
func (s *Service) placeAddition(ctx context.Context, lsn cdc.LSN, id string) error {
	a := s.bf.h.takeAddition(id)
	if a == nil {
		return nil
	}
	if s.cur != nil || s.streamTop != 0 {
		return fmt.Errorf("protocol: new-table message %s at %s inside a transaction", a.id, lsn)
	}
	key := a.table.ID().String()
	t, err := a.table.SourceTable()
	if err != nil {
		return err
	}
	s.binder.add(t)
	s.bf.trackers[t.ID] = backfill.NewTracker()
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
	if tr.Len() >= s.bf.pruneAt {
		s.pruneEarly()
	}
	return nil
}

// pruneEarly prunes the trackers with the snapshot of the chunk waiting for
// its marker. While the loop works through a backlog (a resumed init
// streams from its consistent point) the marker is far ahead and every
// change of the backlog would be tracked until it arrives; the pending
// chunk's snapshot sees almost all of them, and pruning with it is as safe
// as after placement: that chunk and every later one only look at changes
// their (later) snapshots do not see.
func (s *Service) pruneEarly() {
	snap, ok := s.bf.h.pendingSnapshot()
	if !ok {
		// No snapshot to prune with yet: the worker is reading the chunk.
		s.bf.pruneAt += pruneFloor
		return
	}
	n := 0
	for _, tr := range s.bf.trackers {
		tr.Prune(snap)
		n += tr.Len()
	}
	s.bf.pruneAt = max(pruneFloor, 2*n)
}

// trackKey is the key of a row as the tracker compares it: each key
// column's typed value (the Parquet value the row's text converts to), so
// that the stream's text and the COPY's text of one value always agree.
func (s *Service) trackKey(t *cdc.Table, values []cdc.Datum) (string, error) {
	sc, err := s.binder.schema(t)
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
