package query

import (
	"context"
	"fmt"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
	"maps"
	"slices"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
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
	names := ViewNames(m)
	for _, key := range slices.Sorted(maps.Keys(m.Tables)) {
		mt, vn := m.Tables[key], names[key]
		res, err := r.Query(ctx, at, "SELECT count(*) FROM "+vn.String())
		if err != nil {
			return nil, fmt.Errorf("count %s: %w", key, err)
		}
		n, _ := res.Rows[0][0].(int64)
		state := mt.Snapshot.State
		if state == "" {
			state = manifest.SnapshotComplete
		}
		t := Table{Name: key, Rows: n, SchemaVersion: mt.SchemaVersion, Generation: mt.Generation, Snapshot: state, FreshAsOf: fresh}
		if vn.Name != mt.Name {
			t.View = vn.String()
		}
		out = append(out, t)
	}
	return out, nil
}
