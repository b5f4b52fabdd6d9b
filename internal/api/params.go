package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// query checks r's query parameters: only those named, and those not in
// multi at most once. It returns the single values.
func queryParams(r *http.Request, single []string, multi ...string) (map[string]string, error) {
	q := r.URL.Query()
	out := map[string]string{}
	for name, vals := range q {
		switch {
		case slices.Contains(multi, name):
		case slices.Contains(single, name):
			if len(vals) > 1 {
				return nil, bad("repeated_parameter", name, "parameter %s is given %d times; give it once", name, len(vals))
			}
			out[name] = vals[0]
		default:
			known := append(append([]string{}, single...), multi...)
			return nil, bad("unknown_parameter", name, "unknown parameter %q; this endpoint takes %s", name, strings.Join(known, ", "))
		}
	}
	return out, nil
}

// limitParam parses limit= (default DefaultLimit, at most max).
func limitParam(s string, maxRows int) (int, error) {
	if s == "" {
		return min(DefaultLimit, maxRows), nil
	}
	if len(s) > 10 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, bad("bad_limit", "limit", "limit %q: want a whole number from 1 to %d", trimmed(s), maxRows)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxRows {
		return 0, bad("bad_limit", "limit", "limit %s: want a whole number from 1 to %d", trimmed(s), maxRows)
	}
	return n, nil
}

// trimmed is s cut for an error message.
func trimmed(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// resolve resolves as_of= ("" is the newest version) and records it.
func (a *api) resolve(r *http.Request, point string) (readpath.At, error) {
	if point != "" {
		access.RecordFrom(r.Context()).Point = point
	}
	if len(point) > 128 {
		return readpath.At{}, bad("bad_point", "as_of", "as_of is %d characters: a point is a version, epoch:N, lsn:X/Y, an RFC 3339 time, main, staging or raw@<time>", len(point))
	}
	at, err := a.o.Reader.Resolve(r.Context(), point)
	if err != nil {
		return readpath.At{}, err
	}
	return at, nil
}

// lookup finds the table a path names: its manifest key ("schema.table"),
// or a bare name exactly one schema has. An unknown name is a 404 naming
// the closest tables.
func lookup(r *http.Request, m *manifest.Manifest, name string) (string, *manifest.Table, error) {
	if mt := m.Tables[name]; mt != nil {
		access.RecordFrom(r.Context()).Tables = []string{name}
		return name, mt, nil
	}
	var found []string
	for key, mt := range m.Tables {
		if mt.Name == name {
			found = append(found, key)
		}
	}
	if len(found) == 1 {
		access.RecordFrom(r.Context()).Tables = found
		return found[0], m.Tables[found[0]], nil
	}
	names := make([]string, 0, len(m.Tables))
	for key := range m.Tables {
		names = append(names, key)
	}
	slices.Sort(names)
	if len(found) > 1 {
		slices.Sort(found)
		return "", nil, &apiError{P: problem{Status: http.StatusNotFound, Code: "ambiguous_table", Parameter: "table", Closest: found,
			Detail: "table " + strconv.Quote(trimmed(name)) + " is in several schemas; name it as schema.table: " + strings.Join(found, ", ")}}
	}
	return "", nil, &apiError{P: problem{Status: http.StatusNotFound, Code: "unknown_table", Parameter: "table", Closest: readpath.Closest(name, names),
		Detail: "no captured table " + strconv.Quote(trimmed(name)) + " (GET /v1/tables lists them)"}}
}

// view is the quoted name of a table's current state in the engine.
func (a *api) view(m *manifest.Manifest, key string) string {
	mt := m.Tables[key]
	schema, name := mt.Schema, mt.Name
	if n, ok := a.o.Reader.(changefeed.ViewNamer); ok {
		schema, name = n.ViewName(m, key)
	}
	return mergesql.Ident(schema) + "." + mergesql.Ident(name)
}

// tableColumns are a table's newest columns typed as the views type them.
func tableColumns(mt *manifest.Table) ([]readpath.Column, error) {
	sv := mt.CurrentSchema()
	if sv == nil {
		return nil, &apiError{P: problem{Status: http.StatusInternalServerError, Code: "internal", Detail: "table " + mt.Schema + "." + mt.Name + " has no current schema version"}}
	}
	out := make([]readpath.Column, len(sv.Columns))
	for i, c := range sv.Columns {
		t, err := mergesql.DuckType(c.ParquetType)
		if err != nil {
			t = "VARCHAR"
		}
		out[i] = readpath.Column{Name: c.Name, Type: t}
	}
	return out, nil
}
