package query

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/blobcache"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

// Compare is the diff from one point to another as an operator reads it:
// per table that changed, the keys inserted, deleted and changed and the
// schema changes, with the verdict a promotion from from to to would get
// (refs.Judge). only limits it to some tables (schema.table, or a table's
// name where one schema has it); empty means all.
func (r *Reader) Compare(ctx context.Context, from, to At, only []string) (refs.Verdict, []refs.TableChange, error) {
	keys, err := tableKeys(only, from.Manifest, to.Manifest)
	if err != nil {
		return "", nil, err
	}
	counts, err := r.Diff(ctx, from, to, keys)
	if err != nil {
		return "", nil, err
	}
	a, b := subset(from.Manifest, keys), subset(to.Manifest, keys)
	verdict, changes := refs.Judge(a, b, counts)
	return verdict, changes, nil
}

// tableKeys turns table names as a user gives them into manifest keys:
// schema.table as is, a bare name to the one table of either manifest
// that has it.
func tableKeys(names []string, ms ...*manifest.Manifest) ([]string, error) {
	var out []string
	for _, name := range names {
		found := map[string]bool{}
		for _, m := range ms {
			for key, mt := range m.Tables {
				if key == name || mt.Name == name {
					found[key] = true
				}
			}
		}
		switch keys := slices.Sorted(maps.Keys(found)); len(keys) {
		case 0:
			return nil, fmt.Errorf("table %q: neither point has it%s", name, closest(name, ms...))
		case 1:
			out = append(out, keys[0])
		default:
			if found[name] {
				out = append(out, name)
				continue
			}
			return nil, fmt.Errorf("table %q is ambiguous: %s; name it with its schema", name, strings.Join(keys, ", "))
		}
	}
	return out, nil
}

// subset is m with only the tables keys names (all when keys is empty).
func subset(m *manifest.Manifest, keys []string) *manifest.Manifest {
	if len(keys) == 0 {
		return m
	}
	out := *m
	out.Tables = map[string]*manifest.Table{}
	for _, k := range keys {
		if mt, ok := m.Tables[k]; ok {
			out.Tables[k] = mt
		}
	}
	return &out
}

// Diff counts, per table ("schema.table"; only those named, or all), the
// keys inserted, deleted and changed from one point to another (a table
// without a primary key: the rows one point has more of than the other, as
// multisets), on the columns both points have. A table only one point has
// counts all its rows as inserted or deleted.
func (r *Reader) Diff(ctx context.Context, from, to At, only []string) (map[string]refs.Counts, error) {
	en, release, err := r.diffEngine(ctx, from, to)
	if err != nil {
		return nil, err
	}
	defer release()
	names := map[string]bool{}
	for k := range from.Manifest.Tables {
		names[k] = true
	}
	for k := range to.Manifest.Tables {
		names[k] = true
	}
	out := map[string]refs.Counts{}
	for _, key := range slices.Sorted(maps.Keys(names)) {
		if len(only) > 0 && !slices.Contains(only, key) {
			continue
		}
		q := diffQuery(key, from.Manifest.Tables[key], to.Manifest.Tables[key])
		res, err := en.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("diff %s: %w", key, err)
		}
		row := res.Rows[0]
		out[key] = refs.Counts{Inserted: toInt64(row[0]), Deleted: toInt64(row[1]), Changed: toInt64(row[2])}
	}
	return out, nil
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int32:
		return int64(x)
	}
	return 0
}

// The diff engine's two schemas: the states of from and to, one view per
// table named "schema.table".
const (
	fromSchema = "__from"
	toSchema   = "__to"
)

// diffEngine opens an engine (not kept) with both points' states.
func (r *Reader) diffEngine(ctx context.Context, from, to At) (*Engine, func(), error) {
	var files []blobcache.File
	for _, at := range []At{from, to} {
		for _, key := range slices.Sorted(maps.Keys(at.Manifest.Tables)) {
			files = append(files, tableFiles(at.Manifest.Tables[key])...)
		}
	}
	paths, release, err := r.files.Acquire(ctx, files)
	if err != nil {
		return nil, nil, fmt.Errorf("read the files of versions %d and %d: %w", from.Version(), to.Version(), err)
	}
	local := map[string]string{}
	for i, f := range files {
		local[f.Key] = paths[i]
	}
	path := func(key string) (string, error) { return local[key], nil }
	var setup []string
	for _, side := range []struct {
		schema string
		at     At
	}{{fromSchema, from}, {toSchema, to}} {
		setup = append(setup, "CREATE SCHEMA "+mergesql.Ident(side.schema))
		for _, key := range slices.Sorted(maps.Keys(side.at.Manifest.Tables)) {
			mt := side.at.Manifest.Tables[key]
			q, err := viewQuery(mt, mergesql.Input{Table: mt, Path: path, Bound: side.at.Bound}, false)
			if err != nil {
				release()
				return nil, nil, err
			}
			setup = append(setup, fmt.Sprintf("CREATE VIEW %s.%s AS %s", mergesql.Ident(side.schema), diffView(key), q))
		}
	}
	en, err := Open(ctx, Options{DataDirs: []string{r.files.Dir()}, TempDir: r.o.TempDir, Limits: r.o.Limits, Isolation: r.o.Isolation}, setup)
	if err != nil {
		release()
		return nil, nil, err
	}
	return en, func() { en.Close(); release() }, nil
}

// diffView is table key's view name in the diff engine: its key in hex, so
// that two tables whose names differ only in case (one name to DuckDB)
// keep views of their own.
func diffView(key string) string { return mergesql.Ident(fmt.Sprintf("t_%x", key)) }

// diffQuery counts (inserted, deleted, changed) of table key between the
// two schemas.
func diffQuery(key string, a, b *manifest.Table) string {
	view := func(schema string) string { return mergesql.Ident(schema) + "." + diffView(key) }
	switch {
	case a == nil:
		return fmt.Sprintf("SELECT count(*), 0, 0 FROM %s", view(toSchema))
	case b == nil:
		return fmt.Sprintf("SELECT 0, count(*), 0 FROM %s", view(fromSchema))
	}
	cols := commonColumns(a, b)
	list := strings.Join(cols, ", ")
	if len(a.PrimaryKey) == 0 || !slices.Equal(a.PrimaryKey, b.PrimaryKey) {
		return fmt.Sprintf(`SELECT (SELECT count(*) FROM (SELECT %[1]s FROM %[3]s EXCEPT ALL SELECT %[1]s FROM %[2]s)),
  (SELECT count(*) FROM (SELECT %[1]s FROM %[2]s EXCEPT ALL SELECT %[1]s FROM %[3]s)), 0`, list, view(fromSchema), view(toSchema))
	}
	keys := make([]string, len(a.PrimaryKey))
	for i, k := range a.PrimaryKey {
		keys[i] = mergesql.Ident(k)
	}
	var fields []string
	for _, c := range cols {
		fields = append(fields, c+" := "+c)
	}
	side := func(schema string) string {
		return fmt.Sprintf("(SELECT %s, true AS __in, struct_pack(%s) AS __row FROM %s)", strings.Join(keys, ", "), strings.Join(fields, ", "), view(schema))
	}
	return fmt.Sprintf(`SELECT count(*) FILTER (WHERE a.__in IS NULL), count(*) FILTER (WHERE b.__in IS NULL),
  count(*) FILTER (WHERE a.__in AND b.__in AND a.__row IS DISTINCT FROM b.__row)
FROM %s a FULL OUTER JOIN %s b USING (%s)`, side(fromSchema), side(toSchema), strings.Join(keys, ", "))
}

// commonColumns are the quoted names of the columns both tables' newest
// schema versions have, in a's order.
func commonColumns(a, b *manifest.Table) []string {
	have := map[string]bool{}
	for _, c := range mergesql.Columns(b) {
		have[c] = true
	}
	var out []string
	for _, c := range mergesql.Columns(a) {
		if have[c] {
			out = append(out, mergesql.Ident(c))
		}
	}
	return out
}
