package query

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
)

// Table describes one captured table at a point: `pg-cdc query --tables`.
type Table struct {
	Name          string `json:"name"` // schema.table
	Rows          int64  `json:"rows"` // live rows of its current state
	SchemaVersion int    `json:"schema_version"`
	Generation    string `json:"generation"`
	// Snapshot is the table's snapshot state: until it is complete, its
	// state is part of the table only.
	Snapshot string `json:"snapshot"`
	// FreshAsOf: the sink holds every transaction the source committed up
	// to this time (the version's newest commit); zero before any flush.
	FreshAsOf time.Time `json:"fresh_as_of"`
}

// Tables lists the captured tables at a point, with their live rows.
func (r *Reader) Tables(ctx context.Context, at At) ([]Table, error) {
	m := at.Manifest
	var fresh time.Time
	if n := len(m.History); n > 0 {
		fresh = m.History[n-1].MaxCommitTime
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
