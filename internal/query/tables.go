package query

import (
	"context"
	"fmt"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
	"maps"
	"slices"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
)

// Table describes one captured table at a point (readpath.Table).
type Table = readpath.Table

// Tables lists the captured tables at a point, with their live rows.
func (r *Reader) Tables(ctx context.Context, at At) ([]Table, error) {
	m := at.Manifest
	fresh := m.Freshness()
	if !at.Bound.Time.IsZero() && at.Bound.Time.Before(fresh) {
		fresh = at.Bound.Time // a point inside the version holds no more
	}
	var out []Table
	for _, key := range slices.Sorted(maps.Keys(m.Tables)) {
		mt := m.Tables[key]
		res, err := r.Query(ctx, at, fmt.Sprintf("SELECT count(*) FROM %s.%s", mergesql.Ident(mt.Schema), mergesql.Ident(mt.Name)))
		if err != nil {
			return nil, fmt.Errorf("count %s: %w", key, err)
		}
		n, _ := res.Rows[0][0].(int64)
		state := mt.Snapshot.State
		if state == "" {
			state = manifest.SnapshotComplete
		}
		out = append(out, Table{Name: key, Rows: n, SchemaVersion: mt.SchemaVersion, Generation: mt.Generation, Snapshot: state, FreshAsOf: fresh})
	}
	return out, nil
}
