package query

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
)

// ChangesCatalog is the attached database that holds every table's change
// rows: changes.<schema>.<table>. No captured table can take the name: a
// query names PostgreSQL tables by schema and table only.
const ChangesCatalog = "changes"

// Views are the statements that define, in an engine, every captured table
// of m as of bound (design.md §11):
//
//   - "<schema>"."<table>": its current state (mergesql.State), in a schema
//     named as PostgreSQL names it;
//   - "<table>" in DuckDB's default schema, where no other captured table
//     has that name and the schema has no table of its own by it;
//   - changes."<schema>"."<table>": its change rows with the metadata
//     columns (mergesql.Changes).
func Views(m *manifest.Manifest, bound mergesql.Bound, path func(string) (string, error)) ([]string, error) {
	stmts := []string{fmt.Sprintf("ATTACH ':memory:' AS %s", mergesql.Ident(ChangesCatalog))}
	schemas := map[string]bool{}
	byName := map[string][]string{}
	keys := slices.Sorted(maps.Keys(m.Tables))
	for _, key := range keys {
		mt := m.Tables[key]
		if !schemas[mt.Schema] {
			schemas[mt.Schema] = true
			stmts = append(stmts,
				fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %s", mergesql.Ident(mt.Schema)),
				fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %s.%s", mergesql.Ident(ChangesCatalog), mergesql.Ident(mt.Schema)))
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
			fmt.Sprintf("CREATE VIEW %s.%s AS %s", mergesql.Ident(mt.Schema), mergesql.Ident(mt.Name), state),
			fmt.Sprintf("CREATE VIEW %s.%s.%s AS %s", mergesql.Ident(ChangesCatalog), mergesql.Ident(mt.Schema), mergesql.Ident(mt.Name), changes))
		byName[mt.Name] = append(byName[mt.Name], key)
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		owners := byName[name]
		if len(owners) != 1 || m.Tables[owners[0]].Schema == "main" {
			continue // ambiguous, or already in the default schema
		}
		if mt := m.Tables["main."+name]; mt != nil {
			continue
		}
		mt := m.Tables[owners[0]]
		stmts = append(stmts, fmt.Sprintf("CREATE VIEW main.%s AS SELECT * FROM %s.%s", mergesql.Ident(name), mergesql.Ident(mt.Schema), mergesql.Ident(mt.Name)))
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
