package replicate

import (
	"context"
	"errors"
	"fmt"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/pgoutput"
)

// SameShape reports whether the table's recorded schema version t has the
// columns (names, types, order) of shape: reconciling would record nothing.
func SameShape(t *cdc.Table, shape control.Shape) bool {
	if len(t.Columns) != len(shape.Columns) {
		return false
	}
	d, err := diffRelation(t, relationOf(shape))
	return err == nil && d.same()
}

// relationOf is the Relation message pgoutput would send for the shape.
func relationOf(s control.Shape) *pgoutput.Relation {
	r := &pgoutput.Relation{RelID: s.OID, Namespace: s.Schema, Name: s.Name}
	for _, c := range s.Columns {
		r.Columns = append(r.Columns, pgoutput.RelationColumn{Name: c.Name, TypeOID: c.TypeOID, TypeMod: c.TypeMod})
	}
	return r
}

// shapeColumns describes columns from a reconcile request's shape, which
// holds the catalog as it was at the request's position: the loop must not
// read the catalog as it is when the request arrives, which may be later.
type shapeColumns control.Shape

func (s shapeColumns) DescribeColumns(_ context.Context, rel uint32, names []string) ([]cdc.Column, error) {
	if rel != s.OID {
		return nil, fmt.Errorf("reconcile request for table %s.%s (OID %d) asked about relation %d", s.Schema, s.Name, s.OID, rel)
	}
	out := make([]cdc.Column, len(names))
	for i, n := range names {
		out[i].Name = n
		for _, c := range s.Columns {
			if c.Name == n {
				out[i] = c
			}
		}
	}
	return out, nil
}

// reconcile applies a reconcile request that arrived at lsn: every table
// whose shape differs from its current schema version gets the next
// version, exactly as a Relation message at this position would make it,
// returned for the epoch to record. A change this version does not follow
// is logged, not fatal: the stream stops with it at the table's next row
// change, if one ever comes.
func (b *binder) reconcile(ctx context.Context, req control.Reconcile, lsn cdc.LSN) ([]*cdc.Table, error) {
	var out []*cdc.Table
	for _, shape := range req.Tables {
		id := shape.ID()
		t := b.byName[id.String()]
		switch {
		case t == nil:
			b.log.Warn("reconcile: table is not captured", "table", id.String())
			continue
		case t.OID != shape.OID:
			b.log.Error("reconcile: table was dropped and re-created; the stream stops at its next change",
				"table", id.String(), "oid", shape.OID, "manifest_oid", t.OID)
			continue
		}
		r := relationOf(shape)
		if d, err := diffRelation(t, r); err == nil && d.same() {
			continue
		}
		nt, change, err := b.nextVersion(ctx, shapeColumns(shape), t, r)
		var u unsupported
		if errors.As(err, &u) {
			b.log.Error("reconcile: a schema change this version does not follow; the stream stops at the table's next change",
				"table", id.String(), "lsn", lsn, "err", err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("table %s: reconcile: %w", id, err)
		}
		if nt, err = b.adopt(t, nt, change, "reconcile", at{}); err != nil {
			return nil, err
		}
		out = append(out, nt)
	}
	return out, nil
}
