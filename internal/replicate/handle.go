package replicate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/pgoutput"
)

func (s *Service) handle(ctx context.Context, msg Message) error {
	if msg.Keepalive {
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
		return s.bind(ctx, m)
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
		if m.SubXID == 0 || m.SubXID == m.XID {
			delete(s.pendingVersions, m.XID)
		}
	case *pgoutput.LogicalMessage:
		// A non-transactional message is sent when it is decoded, after
		// every transaction that committed before it: its LSN is a safe idle
		// position, like a keepalive's WAL end. Heartbeats and test
		// markers use this to advance an idle slot without waiting for a
		// keepalive.
		if !m.Transactional && s.cur == nil {
			s.serverEnd = max(s.serverEnd, m.LSN)
			if m.Prefix == ReconcilePrefix {
				return s.reconcile(ctx, m)
			}
			if m.Prefix == MarkerPrefix && s.bf != nil {
				return s.placeChunk(ctx, m)
			}
			if m.Prefix == AddPrefix && s.bf != nil {
				return s.placeAddition(ctx, m)
			}
			if m.Prefix == ResnapshotPrefix && s.bf != nil {
				return s.resnapshotRequested(ctx)
			}
		}
	default:
		// Type and Origin messages carry nothing to capture.
	}
	return nil
}

func (s *Service) openEpoch() *flush.Epoch {
	if s.epoch == nil {
		next := s.committer.Manifest.Current().Epoch + 1
		s.epoch = flush.NewEpoch(next, filepath.Join(s.cfg.StateDir, "spool"), s.schema)
	}
	return s.epoch
}

func (s *Service) schema(t *cdc.Table) (*parquetfile.Schema, error) {
	key := versionKey{t.ID, t.SchemaVersion}
	if sc, ok := s.schemas[key]; ok {
		return sc, nil
	}
	sc, err := parquetfile.NewSchema(t)
	if err != nil {
		return nil, fmt.Errorf("table %s: parquet schema: %w", t.ID, err)
	}
	if err := s.checkRecordedTypes(t, sc); err != nil {
		return nil, err
	}
	// A value a documented type rule changed lands and is counted in the
	// delta's manifest entry; the first of each column is logged.
	sc.SetReporter(func(a parquetfile.Adjustment) {
		s.log.Warn("value written by a type rule", "table", a.Table.String(), "column", a.Column,
			"rule", string(a.Rule), "key", a.Key, "value", a.Value, "detail", a.String())
	})
	s.schemas[key] = sc
	return sc, nil
}

func (s *Service) extendXID(x uint32) cdc.XID {
	xid := cdc.ExtendXID(s.xidRef, x)
	s.xidRef = max(s.xidRef, xid)
	return xid
}

// bind checks a Relation message against the table's current schema
// version and remembers which table the relation id means. A Relation that
// adds, drops, renames or (readably) retypes columns makes the next schema
// version (nextVersion), which the open epoch commits with its deltas: rows
// from here on are written under it. One that describes an older version
// inside a replayed transaction binds that version. Other changes (a type
// change readers cannot cast, a dropped or renamed key column) and a table
// that is not captured, or was re-created, are hard errors: writing rows
// under the wrong columns would corrupt the table silently.
func (s *Service) bind(ctx context.Context, r *pgoutput.Relation) error {
	id := cdc.TableID{Schema: r.Namespace, Name: r.Name}
	t := s.byName[id.String()]
	if t == nil {
		return &cdc.Error{
			Class: cdc.ErrSchemaChanged,
			Msg:   fmt.Sprintf("table %s is published but not captured (it is not in the manifest)", id),
			Hint:  "to capture it, add it to the configuration (tables.include, or a schema of source.postgres.schemas): start records and backfills it; otherwise remove it from the publication",
		}
	}
	if r.RelID != t.OID {
		return &cdc.Error{
			Class: cdc.ErrSchemaChanged,
			Msg:   fmt.Sprintf("table %s has OID %d, the manifest has %d (the table was dropped and re-created)", id, r.RelID, t.OID),
			Hint:  "a re-created table is a new table; rebuild the capture with teardown and init",
		}
	}
	if d, err := diffRelation(t, r); err == nil && d.same() {
		s.byRel[r.RelID] = newBinding(t)
		return nil
	}
	if old := s.replayedVersion(id, r); old != nil {
		// A transaction the manifest already holds, replayed with the
		// schema it was written under: not a change.
		s.byRel[r.RelID] = newBinding(old)
		return nil
	}
	nt, change, err := s.nextVersion(ctx, s.catalog, t, r)
	var u unsupported
	if errors.As(err, &u) {
		return unsupportedChange(id, err)
	}
	if err != nil {
		return fmt.Errorf("table %s: schema change: %w", id, err)
	}
	return s.adopt(t, nt, change, "relation")
}

// adopt makes nt, the schema version that follows t, the table's current
// one: committed with the open epoch's deltas (or, inside a streamed
// transaction, at its commit), and bound to the relation id. source says
// what announced it, for the log.
func (s *Service) adopt(t, nt *cdc.Table, change, source string) error {
	if _, err := s.schema(nt); err != nil {
		return err
	}
	if s.streamTop != 0 {
		// Inside a streamed transaction that has not committed: the
		// catalog, read from another session, cannot see its DDL yet, so
		// an added column's value for earlier rows is unknown. The version
		// is recorded, its added columns described again, at the commit.
		s.pendingVersions[s.streamTop] = append(s.pendingVersions[s.streamTop], pendingVersion{table: nt, prevMaxField: maxFieldID(t)})
	} else {
		s.openEpoch().AddSchema(nt.ID, s.manifestColumns(nt), nt.SchemaVersion)
	}
	s.byName[nt.ID.String()] = nt
	s.log.Info("schema change: new schema version", "table", nt.ID.String(), "schema_version", nt.SchemaVersion, "change", change, "source", source)
	s.byRel[nt.OID] = newBinding(nt)
	return nil
}

func unsupportedChange(id cdc.TableID, err error) error {
	return &cdc.Error{
		Class: cdc.ErrSchemaChanged,
		Msg:   fmt.Sprintf("table %s: %v", id, err),
		Hint:  "this schema change is not followed by this version (docs/decisions.md, schema evolution); rebuild the capture with teardown and init",
	}
}

func newBinding(t *cdc.Table) *binding {
	b := &binding{table: t}
	for _, k := range t.PrimaryKey {
		b.keys = append(b.keys, t.ColumnIndex(k))
	}
	return b
}

func (s *Service) lookup(relID uint32) (*binding, error) {
	b := s.byRel[relID]
	if b == nil {
		return nil, fmt.Errorf("protocol: DML for relation OID %d before its Relation message", relID)
	}
	return b, nil
}

// change turns one DML message into change rows and routes them: into the
// streamed transaction's buffer, or straight into the epoch for a
// transaction PostgreSQL sends whole at commit.
func (s *Service) change(ctx context.Context, m pgoutput.Message) error {
	var (
		rows []*cdc.Change
		xid  uint32
	)
	switch m := m.(type) {
	case *pgoutput.Insert:
		b, err := s.lookup(m.RelID)
		if err != nil {
			return err
		}
		xid = m.XID
		rows = []*cdc.Change{{Table: b.table, Op: cdc.OpInsert, Values: m.New}}
	case *pgoutput.Update:
		b, err := s.lookup(m.RelID)
		if err != nil {
			return err
		}
		xid = m.XID
		values := m.New
		if m.OldKind == 'O' {
			// Under REPLICA IDENTITY FULL the old row arrives whole, TOAST
			// included: it supplies what the new row left unchanged.
			values = fillUnchanged(m.New, m.Old)
		}
		u := &cdc.Change{Table: b.table, Op: cdc.OpUpdate, Values: values}
		if m.Old != nil && keyChanged(b.keys, m.Old, m.New) {
			// A key change is a delete of the old key and a write of the
			// new one, so a reader merging by key never keeps both.
			rows = append(rows, &cdc.Change{Table: b.table, Op: cdc.OpDelete, Values: m.Old})
			u.KeyChanged = true
		}
		rows = append(rows, u)
	case *pgoutput.Delete:
		b, err := s.lookup(m.RelID)
		if err != nil {
			return err
		}
		if m.Old == nil {
			return fmt.Errorf("table %s: DELETE without old key", b.table.ID)
		}
		xid = m.XID
		rows = []*cdc.Change{{Table: b.table, Op: cdc.OpDelete, Values: m.Old}}
	case *pgoutput.Truncate:
		xid = m.XID
		for _, rel := range m.RelIDs {
			b, err := s.lookup(rel)
			if err != nil {
				return err
			}
			rows = append(rows, &cdc.Change{Table: b.table, Op: cdc.OpTruncate, Values: make([]cdc.Datum, len(b.table.Columns))})
		}
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

func (s *Service) streamCommit(ctx context.Context, m *pgoutput.StreamCommit) error {
	meta := cdc.TxnMeta{XID: s.extendXID(m.XID), CommitLSN: m.CommitLSN, EndLSN: m.EndLSN, CommitTime: m.CommitTime}
	e := s.openEpoch()
	for _, pv := range s.pendingVersions[m.XID] {
		if err := s.describeAdded(ctx, pv); err != nil {
			return err
		}
		e.AddSchema(pv.table.ID, s.manifestColumns(pv.table), pv.table.SchemaVersion)
	}
	delete(s.pendingVersions, m.XID)
	err := s.asm.Commit(m.XID, func(seq int64, c *cdc.Change) error {
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
