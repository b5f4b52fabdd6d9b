package api

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// filter is one filter= parameter, "column:op:value" (docs/api.md):
//
//	eq ne lt le gt ge   column compared with the value, cast to the column's type
//	in                  the value is a list separated by |
//	like                the column's text matches a SQL LIKE pattern (% and _)
//	is_null not_null    no value ("status:is_null")
//
// The value is everything after the second colon, so it may hold colons.
// Identifiers are quoted and values are query parameters: nothing of the
// value reaches the SQL text.
type filter struct {
	Column string
	Op     string
	Values []string
}

var compare = map[string]string{"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

var ops = []string{"eq", "ne", "lt", "le", "gt", "ge", "in", "like", "is_null", "not_null"}

func parseFilter(s string, cols []readpath.Column) (filter, readpath.Column, error) {
	col, rest, ok := strings.Cut(s, ":")
	if !ok {
		return filter{}, readpath.Column{}, bad("bad_filter", "filter", "filter %q: want column:op:value (ops %s)", trimmed(s), strings.Join(ops, ", "))
	}
	op, value, hasValue := strings.Cut(rest, ":")
	i := slices.IndexFunc(cols, func(c readpath.Column) bool { return c.Name == col })
	if i < 0 {
		names := make([]string, len(cols))
		for j, c := range cols {
			names[j] = c.Name
		}
		return filter{}, readpath.Column{}, &apiError{P: problem{Status: 400, Code: "unknown_column", Parameter: "filter", Closest: readpath.Closest(col, names),
			Detail: fmt.Sprintf("filter %q: the table has no column %q", trimmed(s), trimmed(col))}}
	}
	f := filter{Column: col, Op: op}
	switch {
	case op == "is_null" || op == "not_null":
		if value != "" {
			return filter{}, readpath.Column{}, bad("bad_filter", "filter", "filter %q: %s takes no value", trimmed(s), op)
		}
	case !slices.Contains(ops, op):
		return filter{}, readpath.Column{}, bad("bad_filter", "filter", "filter %q: unknown op %q; want one of %s", trimmed(s), trimmed(op), strings.Join(ops, ", "))
	case !hasValue:
		return filter{}, readpath.Column{}, bad("bad_filter", "filter", "filter %q: %s needs a value (column:%s:value)", trimmed(s), op, op)
	case op == "in":
		f.Values = strings.Split(value, "|")
		if len(f.Values) > MaxInValues {
			return filter{}, readpath.Column{}, bad("bad_filter", "filter", "filter on %q: %d values, at most %d", col, len(f.Values), MaxInValues)
		}
	default:
		f.Values = []string{value}
	}
	return f, cols[i], nil
}

// where compiles filters on cols to a SQL condition over quoted
// identifiers and ? parameters, and the parameters.
func where(fs []filter, cols []readpath.Column) (string, []any) {
	var conds []string
	var args []any
	for _, f := range fs {
		i := slices.IndexFunc(cols, func(c readpath.Column) bool { return c.Name == f.Column })
		id, typ := mergesql.Ident(f.Column), cols[i].Type
		param := "CAST(? AS " + typ + ")" // the type is the manifest's, never the caller's
		switch f.Op {
		case "is_null":
			conds = append(conds, id+" IS NULL")
		case "not_null":
			conds = append(conds, id+" IS NOT NULL")
		case "like":
			conds = append(conds, "CAST("+id+" AS VARCHAR) LIKE ?")
			args = append(args, f.Values[0])
		case "in":
			ps := make([]string, len(f.Values))
			for j, v := range f.Values {
				ps[j] = param
				args = append(args, v)
			}
			conds = append(conds, id+" IN ("+strings.Join(ps, ", ")+")")
		default:
			conds = append(conds, id+" "+compare[f.Op]+" "+param)
			args = append(args, f.Values[0])
		}
	}
	return strings.Join(conds, " AND "), args
}
