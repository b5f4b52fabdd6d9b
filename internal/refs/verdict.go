package refs

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Verdict is what a promotion from one point to another would do to the
// readers of the branch it moves (design.md §11).
type Verdict string

const (
	// NoChange: the same tables, schemas and rows.
	NoChange Verdict = "no_change"
	// Safe: rows changed, nothing in the schemas.
	Safe Verdict = "safe"
	// SchemaChange: additive schema changes (a table or column added, an
	// integer widened) that a reader's queries survive.
	SchemaChange Verdict = "schema_change"
	// Breaking: a change a reader's queries may not survive (a table or
	// column removed or renamed, a type changed otherwise than widened, a
	// primary key changed); pg-cdc promote refuses it without --force.
	Breaking Verdict = "breaking"
)

// Counts are the keys a table's data diff found.
type Counts struct {
	Inserted int64 `json:"inserted"`
	Deleted  int64 `json:"deleted"`
	Changed  int64 `json:"changed"`
}

// Any reports whether any key changed.
func (c Counts) Any() bool { return c.Inserted+c.Deleted+c.Changed > 0 }

// TableChange is one table's part of a promotion.
type TableChange struct {
	Table string `json:"table"`
	Counts
	// Schema lists the schema changes, each worded for the operator;
	// Breaking those of them that are breaking.
	Schema   []string `json:"schema,omitempty"`
	Breaking []string `json:"breaking,omitempty"`
}

// Judge compares the schemas of from and to, adds the data counts per
// table ("schema.table" → counts), and returns the verdict and the tables
// that changed, sorted.
func Judge(from, to *manifest.Manifest, data map[string]Counts) (Verdict, []TableChange) {
	names := map[string]bool{}
	for k := range from.Tables {
		names[k] = true
	}
	for k := range to.Tables {
		names[k] = true
	}
	verdict := NoChange
	raise := func(v Verdict) {
		rank := map[Verdict]int{NoChange: 0, Safe: 1, SchemaChange: 2, Breaking: 3}
		if rank[v] > rank[verdict] {
			verdict = v
		}
	}
	var out []TableChange
	for _, name := range slices.Sorted(maps.Keys(names)) {
		tc := TableChange{Table: name, Counts: data[name]}
		tc.Schema, tc.Breaking = schemaChanges(from.Tables[name], to.Tables[name])
		switch {
		case len(tc.Breaking) > 0:
			raise(Breaking)
		case len(tc.Schema) > 0:
			raise(SchemaChange)
		case tc.Any():
			raise(Safe)
		default:
			continue // nothing changed
		}
		out = append(out, tc)
	}
	return verdict, out
}

// schemaChanges words what changed between a table's schema in from and
// in to, and which of those changes are breaking.
func schemaChanges(a, b *manifest.Table) (all, breaking []string) {
	switch {
	case a == nil && b == nil:
		return nil, nil
	case a == nil:
		return []string{"table added"}, nil
	case b == nil:
		return []string{"table removed"}, []string{"table removed"}
	}
	add := func(msg string, isBreaking bool) {
		all = append(all, msg)
		if isBreaking {
			breaking = append(breaking, msg)
		}
	}
	if !slices.Equal(a.PrimaryKey, b.PrimaryKey) {
		add(fmt.Sprintf("primary key (%s) → (%s)", strings.Join(a.PrimaryKey, ", "), strings.Join(b.PrimaryKey, ", ")), true)
	}
	sa, sb := a.CurrentSchema(), b.CurrentSchema()
	if sa == nil || sb == nil || sa.Version == sb.Version && a.Generation == b.Generation {
		return all, breaking
	}
	byID := func(sv *manifest.SchemaVersion) map[int]manifest.Column {
		m := map[int]manifest.Column{}
		for i, c := range sv.Columns {
			id := c.FieldID
			if id == 0 {
				id = -(i + 1) // no field ids: by position, an older manifest
			}
			m[id] = c
		}
		return m
	}
	ca, cb := byID(sa), byID(sb)
	for _, c := range sb.Columns {
		old, ok := ca[fieldKey(c, sb)]
		switch {
		case !ok:
			add(fmt.Sprintf("column %q added (%s)", c.Name, c.PGType), false)
		case old.Name != c.Name:
			add(fmt.Sprintf("column %q renamed to %q", old.Name, c.Name), true)
		}
		if ok && old.ParquetType != c.ParquetType {
			add(fmt.Sprintf("column %q changed type from %s to %s", c.Name, old.PGType, c.PGType), !widening(old.ParquetType, c.ParquetType))
		}
	}
	for _, c := range sa.Columns {
		if _, ok := cb[fieldKey(c, sa)]; !ok {
			add(fmt.Sprintf("column %q dropped", c.Name), true)
		}
	}
	return all, breaking
}

func fieldKey(c manifest.Column, sv *manifest.SchemaVersion) int {
	if c.FieldID != 0 {
		return c.FieldID
	}
	return -(slices.IndexFunc(sv.Columns, func(x manifest.Column) bool { return x.Name == c.Name }) + 1)
}

// widening reports an integer widening, which every reader reads on.
func widening(from, to string) bool {
	rank := map[string]int{"INT16": 1, "INT32": 2, "INT64": 3}
	return rank[from] > 0 && rank[to] > rank[from]
}
