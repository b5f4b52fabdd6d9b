package replicate

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/pgoutput"
)

// handle routes one message: keepalives to the positions, pgoutput
// messages to the open transaction, the assembler, the binder or, for
// pg-cdc's own control messages, to what they ask for.
func (s *Service) handle(ctx context.Context, msg Message) error {
	if msg.Keepalive {
		if msg.ServerWALEnd >= s.serverEnd && !msg.ServerTime.IsZero() {
			s.serverEndAt = msg.ServerTime
		}
		s.serverEnd = max(s.serverEnd, msg.ServerWALEnd)
		if msg.ReplyRequested {
			return s.sendStatus(ctx, false)
		}
		return nil
	}
	m, err := s.dec.Decode(msg.Data)
	if err != nil {
		return fmt.Errorf("decode pgoutput message: %w", err)
	}
	switch m := m.(type) {
	case *pgoutput.Begin:
		if s.cur != nil {
			return fmt.Errorf("protocol: BEGIN of transaction %d inside transaction %d", m.XID, s.cur.meta.XID)
		}
		s.cur = &openTxn{meta: cdc.TxnMeta{XID: s.extendXID(m.XID), CommitLSN: m.FinalLSN, CommitTime: m.CommitTime}}
	case *pgoutput.Commit:
		if s.cur == nil {
			return fmt.Errorf("protocol: COMMIT at %s without BEGIN", m.CommitLSN)
		}
		meta := s.cur.meta
		meta.EndLSN = m.EndLSN
		s.openEpoch().CommitTxn(meta, s.now())
		s.received(meta)
		s.cur = nil
	case *pgoutput.Relation:
		nt, err := s.binder.relation(ctx, m, s.position())
		if err != nil {
			return err
		}
		s.recordVersions(nt)
	case *pgoutput.Insert, *pgoutput.Update, *pgoutput.Delete, *pgoutput.Truncate:
		return s.change(ctx, m)
	case *pgoutput.StreamStart:
		s.streamTop = m.XID
	case *pgoutput.StreamStop:
		s.streamTop = 0
	case *pgoutput.StreamCommit:
		return s.streamCommit(ctx, m)
	case *pgoutput.StreamAbort:
		if err := s.asm.Abort(m.XID, m.SubXID); err != nil {
			return fmt.Errorf("abort streamed transaction %d: %w", m.XID, err)
		}
		s.binder.aborted(m.XID, m.SubXID)
	case *pgoutput.LogicalMessage:
		// A non-transactional message is sent when it is decoded, after
		// every transaction that committed before it: its LSN is a safe
		// idle position, like a keepalive's WAL end. A transactional one
		// belongs to its transaction (verify's watermark) and is nothing
		// to act on.
		if !m.Transactional && s.cur == nil {
			s.serverEnd = max(s.serverEnd, m.LSN)
			return s.control(ctx, m)
		}
	default:
		// Type and Origin messages carry nothing to capture.
	}
	return nil
}

// control acts on one of pg-cdc's own control messages at its position
// (internal/control); any other message is a position only.
func (s *Service) control(ctx context.Context, m *pgoutput.LogicalMessage) error {
	msg, err := control.Decode(m.Prefix, m.Content)
	if err != nil {
		// Another version's format, or a corrupt write: acting on a guess
		// could bind the wrong schema; the stream goes on as without it.
		s.log.Warn("ignoring a control message this version cannot read", "lsn", m.LSN, "prefix", m.Prefix, "err", err)
		return nil
	}
	switch msg := msg.(type) {
	case control.Reconcile:
		return s.reconcile(ctx, msg, m.LSN)
	case control.Chunk:
		return s.placeChunk(ctx, m.LSN, msg.ID)
	case control.AddTable:
		return s.placeAddition(ctx, m.LSN, msg.ID)
	case control.Resnapshot:
		return s.resnapshotRequested(ctx)
	case control.Partitions:
		return s.partitionsChanged(ctx, msg, m.LSN)
	case control.Heartbeat, control.Watermark, nil:
		// A position only.
	}
	return nil
}

// reconcile applies a reconcile request at its position. The message
// counts as a transaction of the epoch, so the versions it records become
// durable (and the waiting `pg-cdc reconcile` sees them) at the next flush
// even on an idle source.
func (s *Service) reconcile(ctx context.Context, req control.Reconcile, lsn cdc.LSN) error {
	if lsn <= s.binder.replayEnd {
		return nil // the manifest already holds what it recorded
	}
	if s.streamTop != 0 {
		// pgoutput sends a non-transactional message when it decodes it,
		// never inside a block of a streamed transaction; binding here would
		// attach the version to that transaction.
		return fmt.Errorf("protocol: reconcile message at %s inside a block of streamed transaction %d", lsn, s.streamTop)
	}
	versions, err := s.binder.reconcile(ctx, req, lsn)
	if err != nil {
		return err
	}
	s.recordVersions(versions...)
	s.openEpoch().CommitTxn(cdc.TxnMeta{CommitLSN: lsn, EndLSN: lsn}, s.now())
	return nil
}

// position says where the stream is, for the binder.
func (s *Service) position() at {
	replaying := s.receivedLSN < s.binder.replayEnd
	if s.cur != nil {
		replaying = s.cur.meta.CommitLSN <= s.binder.replayEnd
	}
	return at{streamTop: s.streamTop, replaying: replaying}
}

// recordVersions commits new schema versions with the open epoch's deltas.
func (s *Service) recordVersions(versions ...*cdc.Table) {
	for _, nt := range versions {
		if nt != nil {
			s.openEpoch().AddSchema(nt.ID, s.binder.manifestColumns(nt), nt.SchemaVersion)
		}
	}
}

func (s *Service) openEpoch() *flush.Epoch {
	if s.epoch == nil {
		next := s.committer.Manifest.Current().Epoch + 1
		s.epoch = flush.NewEpoch(next, filepath.Join(s.cfg.StateDir, "spool"), s.binder.schema)
	}
	return s.epoch
}

func (s *Service) extendXID(x uint32) cdc.XID {
	xid := cdc.ExtendXID(s.xidRef, x)
	s.xidRef = max(s.xidRef, xid)
	return xid
}

// change turns one DML message into change rows and routes them: into the
// streamed transaction's buffer, or straight into the epoch for a
// transaction PostgreSQL sends whole at commit.
func (s *Service) change(ctx context.Context, m pgoutput.Message) error {
	rows, xid, err := s.changeRows(m)
	if err != nil {
		return err
	}
	if s.streamTop != 0 {
		sub := xid
		if sub == 0 {
			sub = s.streamTop
		}
		for _, c := range rows {
			if err := s.asm.Add(s.streamTop, sub, c); err != nil {
				return fmt.Errorf("buffer streamed transaction %d: %w", s.streamTop, err)
			}
		}
		return nil
	}
	if s.cur == nil {
		return fmt.Errorf("protocol: DML outside a transaction")
	}
	e := s.openEpoch()
	for _, c := range rows {
		meta := cdc.RowMeta{Op: c.Op, LSN: s.cur.meta.CommitLSN, Seq: s.cur.seq, XID: s.cur.meta.XID, CommitTime: s.cur.meta.CommitTime}
		s.cur.seq++
		if err := s.write(ctx, e, meta, c); err != nil {
			return err
		}
	}
	return nil
}

// changeRows returns the change rows of a DML message and the (sub)xid a
// streamed one carries.
func (s *Service) changeRows(m pgoutput.Message) ([]*cdc.Change, uint32, error) {
	switch m := m.(type) {
	case *pgoutput.Insert:
		b, err := s.binder.lookup(m.RelID)
		if err != nil {
			return nil, 0, err
		}
		return []*cdc.Change{{Table: b.table, Op: cdc.OpInsert, Values: m.New}}, m.XID, nil
	case *pgoutput.Update:
		b, err := s.binder.lookup(m.RelID)
		if err != nil {
			return nil, 0, err
		}
		return updateRows(b, m), m.XID, nil
	case *pgoutput.Delete:
		b, err := s.binder.lookup(m.RelID)
		if err != nil {
			return nil, 0, err
		}
		if m.Old == nil {
			return nil, 0, fmt.Errorf("table %s: DELETE without old key", b.table.ID)
		}
		return []*cdc.Change{{Table: b.table, Op: cdc.OpDelete, Values: m.Old}}, m.XID, nil
	case *pgoutput.Truncate:
		var rows []*cdc.Change
		for _, rel := range m.RelIDs {
			b, err := s.binder.lookup(rel)
			if err != nil {
				return nil, 0, err
			}
			rows = append(rows, &cdc.Change{Table: b.table, Op: cdc.OpTruncate, Values: make([]cdc.Datum, len(b.table.Columns))})
		}
		return rows, m.XID, nil
	}
	return nil, 0, fmt.Errorf("protocol: %T is not a change", m)
}

// updateRows is an UPDATE's change rows: one U, preceded by a D of the old
// key when the key changed, so a reader merging by key never keeps both.
func updateRows(b *binding, m *pgoutput.Update) []*cdc.Change {
	values := m.New
	if m.OldKind == 'O' {
		// Under REPLICA IDENTITY FULL the old row arrives whole, TOAST
		// included: it supplies what the new row left unchanged.
		values = fillUnchanged(m.New, m.Old)
	}
	u := &cdc.Change{Table: b.table, Op: cdc.OpUpdate, Values: values}
	if m.Old != nil && keyChanged(b.keys, m.Old, m.New) {
		u.KeyChanged = true
		return []*cdc.Change{{Table: b.table, Op: cdc.OpDelete, Values: m.Old}, u}
	}
	return []*cdc.Change{u}
}

func (s *Service) streamCommit(ctx context.Context, m *pgoutput.StreamCommit) error {
	meta := cdc.TxnMeta{XID: s.extendXID(m.XID), CommitLSN: m.CommitLSN, EndLSN: m.EndLSN, CommitTime: m.CommitTime}
	e := s.openEpoch()
	versions, err := s.binder.committed(ctx, m.XID)
	if err != nil {
		return err
	}
	s.recordVersions(versions...)
	err = s.asm.Commit(m.XID, func(seq int64, c *cdc.Change) error {
		return s.write(ctx, e, cdc.RowMeta{Op: c.Op, LSN: meta.CommitLSN, Seq: seq, XID: meta.XID, CommitTime: meta.CommitTime}, c)
	})
	if err != nil {
		return fmt.Errorf("commit streamed transaction %d: %w", m.XID, err)
	}
	e.CommitTxn(meta, s.now())
	s.received(meta)
	return nil
}

// fillUnchanged returns new with every unchanged value taken from old.
func fillUnchanged(new, old []cdc.Datum) []cdc.Datum {
	var out []cdc.Datum
	for i, v := range new {
		if v.Kind != cdc.DatumUnchanged || i >= len(old) || old[i].Kind == cdc.DatumUnchanged {
			continue
		}
		if out == nil {
			out = append([]cdc.Datum(nil), new...)
		}
		out[i] = old[i]
	}
	if out == nil {
		return new
	}
	return out
}

func keyChanged(keys []int, old, new []cdc.Datum) bool {
	for _, i := range keys {
		if i < 0 || i >= len(old) || i >= len(new) {
			continue
		}
		o, n := old[i], new[i]
		if n.Kind == cdc.DatumUnchanged {
			continue
		}
		if o.Kind != n.Kind || !bytes.Equal(o.Text, n.Text) {
			return true
		}
	}
	return false
}

// write adds one committed change row to the epoch: the unchanged TOAST
// values of a key-changing UPDATE recovered first, a new enum label
// recorded, the change tracked for a table being backfilled and written to
// the generation a resnapshot builds as well.
func (s *Service) write(ctx context.Context, e *flush.Epoch, meta cdc.RowMeta, c *cdc.Change) error {
	var lost []string
	if c.KeyChanged {
		var err error
		if lost, err = s.toast.recover(ctx, c); err != nil {
			return err
		}
	}
	if err := s.recordEnumLabels(ctx, e, c); err != nil {
		return err
	}
	if err := e.Write(meta, c); err != nil {
		return err
	}
	s.countEvent(c.Table, c.Op)
	if tr := s.bf.trackers[c.Table.ID]; tr != nil {
		if err := s.track(tr, meta, c); err != nil {
			return err
		}
	}
	if gen := s.bf.shadow[c.Table.ID]; gen != "" {
		// A resnapshot builds the next generation: the change counts for it
		// too (its chunks are placed around it by visibility).
		if err := e.WriteTo(gen, meta, c); err != nil {
			return err
		}
	}
	for _, column := range lost {
		e.CountUnrecovered(c.Table, column)
	}
	return nil
}

// recordEnumLabels records in e the labels of an enum that grew, when c
// holds a label its table version does not list.
func (s *Service) recordEnumLabels(ctx context.Context, e *flush.Epoch, c *cdc.Change) error {
	updates, err := s.binder.enumLabels(ctx, c)
	for _, u := range updates {
		e.UpdateEnumLabels(u.Table, u.Version, u.FieldID, u.Labels)
	}
	return err
}
