package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/pgoutput"
)

// ReconcilePrefix is the prefix of the logical decoding messages that carry
// a ReconcileRequest.
const ReconcilePrefix = "pgcdc.reconcile"

// reconcileFormat is the ReconcileRequest encoding this version writes and
// reads.
const reconcileFormat = 1

// ReconcileRequest asks the streaming loop to record schema changes that no
// Relation message has announced yet (an ADD COLUMN with no row changed
// since, say). It travels as a non-transactional logical decoding message
// written while the tables' shapes cannot change
// (postgres.DB.EmitAtShapes), so the loop receives it exactly at the WAL
// position where the shapes hold: after every change made under an older
// shape, before any made under a newer one. Binding it there is what a
// Relation message at that position would do. It is an internal wire
// format between pg-cdc processes; Format guards against a reader of
// another version.
type ReconcileRequest struct {
	Format int              `json:"format"`
	Tables []ReconcileTable `json:"tables"`
}

// ReconcileTable is one table's shape: its live columns in attnum order,
// described as the Catalog port describes them.
type ReconcileTable struct {
	Schema  string       `json:"schema"`
	Name    string       `json:"name"`
	OID     uint32       `json:"oid"`
	Columns []cdc.Column `json:"columns"`
}

// NewReconcileRequest returns the encoded request for these shapes.
func NewReconcileRequest(tables []ReconcileTable) (string, error) {
	b, err := json.Marshal(ReconcileRequest{Format: reconcileFormat, Tables: tables})
	if err != nil {
		return "", fmt.Errorf("encode reconcile request: %w", err)
	}
	return string(b), nil
}

// SameShape reports whether the table's recorded schema version t has the
// columns (names, types, order) of shape: reconciling would record nothing.
func SameShape(t *cdc.Table, shape ReconcileTable) bool {
	if len(t.Columns) != len(shape.Columns) {
		return false
	}
	d, err := diffRelation(t, shape.relation())
	return err == nil && d.same()
}

// relation is the Relation message pgoutput would send for the shape.
func (rt ReconcileTable) relation() *pgoutput.Relation {
	r := &pgoutput.Relation{RelID: rt.OID, Namespace: rt.Schema, Name: rt.Name}
	for _, c := range rt.Columns {
		r.Columns = append(r.Columns, pgoutput.RelationColumn{Name: c.Name, TypeOID: c.TypeOID, TypeMod: c.TypeMod})
	}
	return r
}

// DescribeColumns answers from the shape, which holds the catalog as it was
// at the request's position: the loop must not read the catalog as it is
// when the request arrives, which may be later.
func (rt ReconcileTable) DescribeColumns(_ context.Context, rel uint32, names []string) ([]cdc.Column, error) {
	if rel != rt.OID {
		return nil, fmt.Errorf("reconcile request for table %s.%s (OID %d) asked about relation %d", rt.Schema, rt.Name, rt.OID, rel)
	}
	out := make([]cdc.Column, len(names))
	for i, n := range names {
		out[i].Name = n
		for _, c := range rt.Columns {
			if c.Name == n {
				out[i] = c
			}
		}
	}
	return out, nil
}

// reconcile applies a ReconcileRequest message: every table whose shape
// differs from its current schema version gets the next version, exactly
// as a Relation message at this position would make it. A change this
// version does not follow is logged, not fatal: the stream stops with it
// at the table's next row change, if one ever comes. The message counts as
// a transaction of the epoch, so the versions it records become durable
// (and the waiting `pg-cdc reconcile` sees them) at the next flush even on
// an idle source.
func (s *Service) reconcile(ctx context.Context, m *pgoutput.LogicalMessage) error {
	if m.LSN <= s.replayEnd {
		return nil // the manifest already holds what it recorded
	}
	if s.streamTop != 0 {
		// pgoutput sends a non-transactional message when it decodes it,
		// never inside a block of a streamed transaction; binding here would
		// attach the version to that transaction.
		return fmt.Errorf("protocol: reconcile message at %s inside a block of streamed transaction %d", m.LSN, s.streamTop)
	}
	var req ReconcileRequest
	if err := json.Unmarshal(m.Content, &req); err != nil || req.Format != reconcileFormat {
		s.log.Warn("reconcile: ignoring a request this version cannot read", "lsn", m.LSN, "format", req.Format, "err", err)
		return nil
	}
	for _, rt := range req.Tables {
		id := cdc.TableID{Schema: rt.Schema, Name: rt.Name}
		t := s.byName[id.String()]
		switch {
		case t == nil:
			s.log.Warn("reconcile: table is not captured", "table", id.String())
			continue
		case t.OID != rt.OID:
			s.log.Error("reconcile: table was dropped and re-created; the stream stops at its next change",
				"table", id.String(), "oid", rt.OID, "manifest_oid", t.OID)
			continue
		}
		r := rt.relation()
		if d, err := diffRelation(t, r); err == nil && d.same() {
			continue
		}
		nt, change, err := s.nextVersion(ctx, rt, t, r)
		var u unsupported
		if errors.As(err, &u) {
			s.log.Error("reconcile: a schema change this version does not follow; the stream stops at the table's next change",
				"table", id.String(), "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("table %s: reconcile: %w", id, err)
		}
		if err := s.adopt(t, nt, change, "reconcile"); err != nil {
			return err
		}
	}
	s.openEpoch().CommitTxn(cdc.TxnMeta{CommitLSN: m.LSN, EndLSN: m.LSN}, s.now())
	return nil
}
