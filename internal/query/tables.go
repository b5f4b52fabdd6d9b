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
		n, err := r.count(ctx, at, vn.String())
		if err != nil {
			return nil, fmt.Errorf("count %s: %w", key, err)
		}
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

// count returns the live rows of a view at a point, counted once per
// engine: a version never changes, and a server lists its tables far more
// often than a version lands.
func (r *Reader) count(ctx context.Context, at At, view string) (int64, error) {
	en, done, err := r.engine(ctx, at)
	if err != nil {
		return 0, err
	}
	defer done()
	en.countMu.Lock()
	defer en.countMu.Unlock()
	if n, ok := en.counts[view]; ok {
		return n, nil
	}
	res, err := r.Query(ctx, at, "SELECT count(*) FROM "+view)
	if err != nil {
		return 0, err
	}
	n, _ := res.Rows[0][0].(int64)
	if en.counts == nil {
		en.counts = map[string]int64{}
	}
	en.counts[view] = n
	return n, nil
}
