package query

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
)

// ChangesCatalog is the attached database that holds every table's change
// rows: changes.<schema>.<table>. No captured table can take the name: a
// query names PostgreSQL tables by schema and table only.
const ChangesCatalog = "changes"

// ViewName is where a captured table is read in an engine: a schema and
// a table name, both as identifiers (unquoted here; quote with
// mergesql.Ident).
type ViewName struct {
	Schema, Name string
}

// String is the name as a query writes it: "schema"."name".
func (v ViewName) String() string { return mergesql.Ident(v.Schema) + "." + mergesql.Ident(v.Name) }

// ViewNames gives every captured table of m its name in an engine. DuckDB
// matches identifiers without regard to case, even quoted, while
// PostgreSQL does not: public."T" and public.t are two tables there and one
// name here. A table whose (schema, name) no other table's equals in any
// case keeps its PostgreSQL name. The tables of a group that do collide
// each get an alias — the name, "#" and its sink key element
// (manifest.EscapeKeyElement, which spells upper-case letters as %XX), so
// "T#%54" and "t#t" — and none keeps the plain name: a query naming any
// case of it must fail rather than read one of them silently. The aliases
// are listed by pg-cdc query --tables (Table.View).
func ViewNames(m *manifest.Manifest) map[string]ViewName {
	fold := func(schema, name string) string { return strings.ToLower(schema) + "\x00" + strings.ToLower(name) }
	groups := map[string][]string{}
	for key, mt := range m.Tables {
		groups[fold(mt.Schema, mt.Name)] = append(groups[fold(mt.Schema, mt.Name)], key)
	}
	used := map[string]bool{}
	for k := range groups {
		used[k] = true
	}
	out := make(map[string]ViewName, len(m.Tables))
	for _, key := range slices.Sorted(maps.Keys(m.Tables)) {
		mt := m.Tables[key]
		if len(groups[fold(mt.Schema, mt.Name)]) == 1 {
			out[key] = ViewName{mt.Schema, mt.Name}
			continue
		}
		alias := mt.Name + "#" + manifest.EscapeKeyElement(mt.Name)
		for n := 2; used[fold(mt.Schema, alias)]; n++ {
			alias = fmt.Sprintf("%s#%s#%d", mt.Name, manifest.EscapeKeyElement(mt.Name), n)
		}
		used[fold(mt.Schema, alias)] = true
		out[key] = ViewName{mt.Schema, alias}
	}
	return out
}

// Views are the statements that define, in an engine, every captured table
// of m as of bound (design.md §11), under its ViewNames name:
//
//   - "<schema>"."<table>": its current state (mergesql.State), in a schema
//     named as PostgreSQL names it;
//   - "<table>" in DuckDB's default schema, where no other captured table
//     has that name (in any case) and no table of the default schema is
//     named so;
//   - changes."<schema>"."<table>": its change rows with the metadata
//     columns (mergesql.Changes).
//
// Schemas whose names differ only in case share one DuckDB schema.
func Views(m *manifest.Manifest, bound mergesql.Bound, path func(string) (string, error)) ([]string, error) {
	stmts := []string{fmt.Sprintf("ATTACH ':memory:' AS %s", mergesql.Ident(ChangesCatalog))}
	names := ViewNames(m)
	schemas := map[string]bool{}
	byName := map[string][]string{} // lower-cased view name → table keys
	inMain := map[string]bool{}     // lower-cased names of views in the default schema
	keys := slices.Sorted(maps.Keys(m.Tables))
	for _, key := range keys {
		mt, vn := m.Tables[key], names[key]
		if !schemas[strings.ToLower(vn.Schema)] {
			schemas[strings.ToLower(vn.Schema)] = true
			stmts = append(stmts,
				fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %s", mergesql.Ident(vn.Schema)),
				fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %s.%s", mergesql.Ident(ChangesCatalog), mergesql.Ident(vn.Schema)))
		}
		in := mergesql.Input{Table: mt, Path: path, Bound: bound}
		state, err := viewQuery(mt, in, false)
		if err != nil {
			return nil, err
		}
		changes, err := viewQuery(mt, in, true)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts,
			fmt.Sprintf("CREATE VIEW %s AS %s", vn, state),
			fmt.Sprintf("CREATE VIEW %s.%s AS %s", mergesql.Ident(ChangesCatalog), vn, changes))
		lower := strings.ToLower(vn.Name)
		byName[lower] = append(byName[lower], key)
		if strings.EqualFold(vn.Schema, "main") {
			inMain[lower] = true
		}
	}
	for _, lower := range slices.Sorted(maps.Keys(byName)) {
		owners := byName[lower]
		if len(owners) != 1 || inMain[lower] {
			continue // ambiguous, or already in the default schema
		}
		vn := names[owners[0]]
		stmts = append(stmts, fmt.Sprintf("CREATE VIEW main.%s AS SELECT * FROM %s", mergesql.Ident(vn.Name), vn))
	}
	return stmts, nil
}

// viewQuery is a table's state (or change rows) query, or an empty one
// with its columns when it has no file yet.
func viewQuery(mt *manifest.Table, in mergesql.Input, changes bool) (string, error) {
	var q string
	var err error
	if changes {
		q, err = mergesql.Changes(in)
	} else {
		q, err = mergesql.State(in)
	}
	if errors.Is(err, mergesql.ErrNoFiles) {
		return mergesql.Empty(mt, changes)
	}
	return q, err
}

// ViewName is where table (schema.table) of m is read in an engine
// (ViewNames): the read path's transports build their SQL with it.
func (r *Reader) ViewName(m *manifest.Manifest, table string) (schema, name string) {
	vn, ok := ViewNames(m)[table]
	if !ok {
		if mt := m.Tables[table]; mt != nil {
			return mt.Schema, mt.Name
		}
	}
	return vn.Schema, vn.Name
}
