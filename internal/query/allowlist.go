//go:build !nodb

package query

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
	"maps"
	"slices"
	"strings"
)

// allowlist is what a request may name, checked on the whole parse tree
// of its one statement (json_serialize_sql's JSON) before anything is
// bound: the relations and macros the engine's setup made, the CTEs the
// statement defines where they are in scope, three table functions that
// only generate rows, and every built-in scalar, aggregate and window
// function but those of deniedFunction. Everything else a tree can hold
// that this check does not recognise is refused, so a DuckDB that adds a
// node (as v2.0 added COPY, INSERT, UPDATE and DELETE inside WITH) is
// refused until the check knows it.
//
// It is the first layer; DuckDB's own sandbox (allowed_directories and the
// locked configuration) is the second, and holds for what a view reads.
type allowlist struct {
	db        string             // the default database (current_database()), lower-cased
	relations map[[3]string]bool // (database, schema, name) of setup's views and tables, lower-cased
	macros    map[[3]string]bool // (database, schema, name) of setup's macros and table macros
	// system are the names of DuckDB's own views and tables (duckdb_views,
	// information_schema's, pg_catalog's), lower-cased: a request naming
	// one is refused, where a name of nothing is ErrInvalid.
	system map[string]bool
}

// readAllowlist computes, on a connection of the engine's database after
// setup ran, what requests may name: every view and table that is not
// DuckDB's own (duckdb_views() and duckdb_tables() with internal false),
// every macro setup made, and the default database's name. The queries
// are the engine's own; no request has run yet.
func readAllowlist(ctx context.Context, c *sql.Conn) (*allowlist, error) {
	a := &allowlist{relations: map[[3]string]bool{}, macros: map[[3]string]bool{}, system: map[string]bool{}}
	if err := c.QueryRowContext(ctx, "SELECT current_database()").Scan(&a.db); err != nil {
		return nil, fmt.Errorf("query allowlist: default database: %w", err)
	}
	a.db = fold(a.db)
	for _, q := range []struct {
		into  map[[3]string]bool
		query string
	}{
		{a.relations, `SELECT database_name, schema_name, view_name FROM duckdb_views() WHERE NOT internal
			UNION ALL SELECT database_name, schema_name, table_name FROM duckdb_tables() WHERE NOT internal`},
		{a.macros, `SELECT database_name, schema_name, function_name FROM duckdb_functions()
			WHERE NOT internal AND function_type IN ('macro', 'table_macro')`},
	} {
		rows, err := c.QueryContext(ctx, q.query)
		if err != nil {
			return nil, fmt.Errorf("query allowlist: %w", err)
		}
		for rows.Next() {
			var d, s, n string
			if err := rows.Scan(&d, &s, &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("query allowlist: %w", err)
			}
			q.into[[3]string{fold(d), fold(s), fold(n)}] = true
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("query allowlist: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("query allowlist: %w", err)
		}
	}
	rows, err := c.QueryContext(ctx, `SELECT view_name FROM duckdb_views() WHERE internal
		UNION SELECT table_name FROM duckdb_tables() WHERE internal`)
	if err != nil {
		return nil, fmt.Errorf("query allowlist: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("query allowlist: %w", err)
		}
		a.system[fold(n)] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query allowlist: %w", err)
	}
	return a, nil
}

// generators are the table functions a request may call: they make rows
// from their arguments and touch no file, setting or catalog.
var generators = []string{"range", "generate_series", "unnest"}

// deniedFunctions are built-in functions no request may call, anywhere in
// the tree, because they disclose the engine's settings, paths or catalog
// (view definitions hold the sink's absolute paths), change state that
// outlives the request, or run SQL given as a string (which this check
// cannot see). Table functions are refused unless they are generators or
// setup's macros; this list is what is refused among the rest.
var deniedFunctions = []string{
	"current_setting", "getenv", // settings (temp_directory, allowed_directories) and the environment
	"setseed", "write_log", // state of the connection or the database
	"json_serialize_plan", "json_execute_serialized_sql", "json_deserialize_sql", // SQL in a string
	"query", "query_table", // SQL or a table name in a string
	"glob", "sniff_csv", "which_secret", "checkpoint", "force_checkpoint", "summary",
	"get_block_size", // a macro over pragma_database_size()
	// pg_catalog's macros over the catalog: pg_get_viewdef returns a
	// view's SQL, paths included.
	"pg_get_viewdef", "pg_get_expr", "pg_get_constraintdef", "col_description", "obj_description", "shobj_description",
}

// deniedPrefixes are families refused by name, so that a function added
// to one later is refused too: file readers and their metadata, DuckDB's
// catalog, settings and log functions, pragmas, other databases' scanners.
var deniedPrefixes = []string{
	"read_", "parquet_", "iceberg_", "delta_", "ducklake_", "sqlite_", "postgres_", "mysql_",
	"duckdb_", "pragma_", "json_execute", "enable_", "disable_", "truncate_",
}

// deniedFunction reports whether name (lower-cased) may not be called.
func deniedFunction(name string) bool {
	if slices.Contains(deniedFunctions, name) {
		return true
	}
	for _, p := range deniedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// expressionClasses are the expression nodes a request may hold; a
// FUNCTION or WINDOW names a function and is checked as one.
var expressionClasses = []string{
	"BETWEEN", "CASE", "CAST", "COLLATE", "COLUMN_REF", "COMPARISON", "CONJUNCTION", "CONSTANT",
	"DEFAULT", "FUNCTION", "LAMBDA", "LAMBDA_REF", "OPERATOR", "PARAMETER", "POSITIONAL_REFERENCE",
	"STAR", "SUBQUERY", "TYPE", "WINDOW",
}

// plainNodes are the other nodes (a "type" and no "class") a request may
// hold as they are: queries that only read, table references that name
// nothing themselves, result modifiers and sort orders. BASE_TABLE,
// TABLE_FUNCTION and SHOW_REF are checked apart; type information
// (*_TYPE_INFO) passes.
var plainNodes = []string{
	"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE",
	"SUBQUERY", "JOIN", "EXPRESSION_LIST", "EMPTY", "PIVOT",
	"ORDER_MODIFIER", "LIMIT_MODIFIER", "LIMIT_PERCENT_MODIFIER", "DISTINCT_MODIFIER",
	"ORDER_DEFAULT", "ASCENDING", "DESCENDING",
}

// check walks the tree of one statement (an element of
// json_serialize_sql's "statements") and refuses the first thing it holds
// that the allowlist does not, naming it.
func (a *allowlist) check(stmt json.RawMessage) error {
	d := json.NewDecoder(bytes.NewReader(stmt))
	d.UseNumber()
	var tree any
	if err := d.Decode(&tree); err != nil {
		return fmt.Errorf("query parse check: %w", err)
	}
	return a.walk(tree, nil)
}

// walk checks v and everything under it. scope holds the CTE names
// (lower-cased) visible at v.
func (a *allowlist) walk(v any, scope []string) error {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			if err := a.walk(e, scope); err != nil {
				return err
			}
		}
	case map[string]any:
		return a.object(v, scope)
	}
	return nil
}

// object checks one JSON object of the tree, then what it holds. A query
// node's WITH clause (cte_map) is walked first, each CTE seeing the ones
// before it (and itself when recursive); the rest of the node sees them
// all. A CTE is in scope in the node that defines it and below, nowhere
// else: a name that resolves to a CTE in one subquery may resolve to a
// catalog object in another.
func (a *allowlist) object(o map[string]any, scope []string) error {
	if cm, ok := o["cte_map"]; ok && cm != nil {
		var err error
		if scope, err = a.ctes(cm, scope); err != nil {
			return err
		}
	}
	if err := a.node(o, scope); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(o)) {
		if k == "cte_map" {
			continue
		}
		if err := a.walk(o[k], scope); err != nil {
			return err
		}
	}
	return nil
}

// ctes walks the CTE bodies of a cte_map in order and returns scope with
// their names added.
func (a *allowlist) ctes(cm any, scope []string) ([]string, error) {
	unreadable := &RefusedError{Rule: RuleNotAllowed, Detail: "a WITH clause this check cannot read"}
	m, ok := cm.(map[string]any)
	if !ok {
		return nil, unreadable
	}
	entries, ok := m["map"].([]any)
	if !ok {
		return nil, unreadable
	}
	scope = slices.Clip(scope)
	for _, e := range entries {
		entry, ok := e.(map[string]any)
		if !ok {
			return nil, unreadable
		}
		name, ok := entry["key"].(string)
		if !ok {
			return nil, unreadable
		}
		name = fold(name)
		body := entry["value"]
		inner := scope
		if recursive(body) {
			inner = append(slices.Clip(scope), name)
		}
		if err := a.walk(body, inner); err != nil {
			return nil, err
		}
		scope = append(slices.Clip(scope), name)
	}
	return scope, nil
}

// recursive reports whether a CTE's body is a recursive query (the only
// kind that can name itself).
func recursive(body any) bool {
	b, _ := body.(map[string]any)
	q, _ := b["query_node"].(map[string]any)
	t, _ := q["type"].(string)
	return t == "RECURSIVE_CTE_NODE"
}

// node checks o itself: a function call by its name, an expression by its
// class, any other node by its type.
func (a *allowlist) node(o map[string]any, scope []string) error {
	if _, ok := o["function_name"]; ok {
		if err := a.function(o); err != nil {
			return err
		}
	}
	if class, ok := o["class"].(string); ok {
		if !slices.Contains(expressionClasses, class) {
			return &RefusedError{Rule: RuleNotAllowed, Detail: "an expression DuckDB calls " + class}
		}
		return nil
	}
	t, ok := o["type"].(string)
	if !ok {
		return nil // a value, a name, a list of options: checked through what it holds
	}
	switch {
	case t == "BASE_TABLE":
		return a.table(o, scope)
	case t == "TABLE_FUNCTION":
		return a.tableFunction(o)
	case t == "SHOW_REF":
		return show(o)
	case slices.Contains(plainNodes, t), strings.HasSuffix(t, "_TYPE_INFO"):
		return nil
	case strings.HasSuffix(t, "_QUERY_NODE"):
		// COPY, INSERT, UPDATE, DELETE, MERGE inside the statement.
		return &RefusedError{Rule: RuleNotAllowed, Detail: strings.ReplaceAll(strings.TrimSuffix(t, "_QUERY_NODE"), "_", " ")}
	}
	return &RefusedError{Rule: RuleNotAllowed, Detail: "a part of the statement DuckDB calls " + t}
}

// table checks a table reference (BASE_TABLE): it must name a CTE in
// scope or a relation setup made. Anything else stops the request before
// DuckDB binds it: a file read as a table (FROM 'x.parquet', FROM
// 'dir/*.csv': DuckDB's replacement scans, which the parser gives as a
// table of that name) and DuckDB's own views (duckdb_views,
// information_schema.tables, pg_catalog.pg_views, sqlite_master) are
// refused; a name of nothing DuckDB has is ErrInvalid, as DuckDB would
// have answered it (public.nope, or a name two schemas share).
func (a *allowlist) table(o map[string]any, scope []string) error {
	catalog, schema, name, ok := qualified(o, "catalog_name", "schema_name", "table_name")
	if !ok {
		return &RefusedError{Rule: RuleNotAllowed, Detail: "a table reference this check cannot read"}
	}
	if catalog == "" && schema == "" && slices.Contains(scope, fold(name)) && !fileLike(name) {
		return nil
	}
	if a.resolves(a.relations, catalog, schema, name) {
		return nil
	}
	switch c, s := fold(catalog), fold(schema); {
	case fileLike(name):
		return &RefusedError{Rule: RuleNotAllowed, Detail: fmt.Sprintf("the file %q read as a table", name)}
	case a.system[fold(name)], c == "system", c == "temp", s == "information_schema", s == "pg_catalog":
		return &RefusedError{Rule: RuleNotAllowed, Detail: "the table " + dotted(catalog, schema, name) + " (only the captured tables' views and the WITH clause's names)"}
	}
	return fmt.Errorf("%w: no table or view named %s%s", ErrInvalid, dotted(catalog, schema, name), a.nearest(schema, name))
}

// nearest is the hint for a table reference setup made nothing of: "; did
// you mean a or b?" with the views nearest to it (readpath.Closest), as
// DuckDB's binder would have said had the reference reached it.
func (a *allowlist) nearest(schema, name string) string {
	var names []string
	for r := range a.relations {
		names = append(names, r[1]+"."+r[2])
	}
	slices.Sort(names)
	want := fold(name)
	if schema != "" {
		want = fold(schema) + "." + want
	}
	return readpath.DidYouMean(readpath.Closest(want, names))
}

// tableFunction checks a table function call (TABLE_FUNCTION): a
// generator, unqualified, or a table macro setup made. Its arguments are
// walked as any expression.
func (a *allowlist) tableFunction(o map[string]any) error {
	f, _ := o["function"].(map[string]any)
	catalog, schema, name, ok := qualified(f, "catalog", "schema", "function_name")
	if !ok {
		return &RefusedError{Rule: RuleNotAllowed, Detail: "a table function this check cannot read"}
	}
	if catalog == "" && schema == "" && slices.Contains(generators, fold(name)) {
		return nil
	}
	if a.resolves(a.macros, catalog, schema, name) && !deniedFunction(fold(name)) {
		return nil
	}
	return &RefusedError{Rule: RuleNotAllowed, Detail: "the table function " + dotted(catalog, schema, name) +
		" (only " + strings.Join(generators, ", ") + " and the views)"}
}

// function checks a function call (FUNCTION, WINDOW): unqualified, a
// built-in not denied; qualified, a macro setup made.
func (a *allowlist) function(o map[string]any) error {
	catalog, schema, name, ok := qualified(o, "catalog", "schema", "function_name")
	if !ok {
		return &RefusedError{Rule: RuleNotAllowed, Detail: "a function call this check cannot read"}
	}
	switch {
	case deniedFunction(fold(name)):
		return &RefusedError{Rule: RuleNotAllowed, Detail: "the function " + dotted(catalog, schema, name)}
	case catalog == "" && schema == "":
		return nil
	case a.resolves(a.macros, catalog, schema, name):
		return nil
	}
	return &RefusedError{Rule: RuleNotAllowed, Detail: "the function " + dotted(catalog, schema, name) + " (a qualified name must be a view's macro)"}
}

// show checks a SHOW, DESCRIBE or SUMMARIZE: over a query (walked as any
// query) or listing the tables; SHOW <setting> and the other listings are
// refused.
func show(o map[string]any) error {
	if q, _ := o["query"].(map[string]any); q != nil {
		return nil
	}
	name, _ := o["table_name"].(string)
	switch st, _ := o["show_type"].(string); {
	case st == "SHOW_SPECIAL" && (name == `"tables"` || name == "__show_tables_expanded"):
		return nil // SHOW TABLES, SHOW ALL TABLES: names and column types
	case st == "SHOW_FROM" && name == "":
		return nil // SHOW TABLES FROM schema
	}
	return &RefusedError{Rule: RuleNotAllowed, Detail: "SHOW " + strings.Trim(name, `"`) + " (only DESCRIBE, SUMMARIZE, SHOW TABLES)"}
}

// resolves reports whether catalog.schema.name, as DuckDB resolves a name
// with the configuration locked (the search path is the default: temp,
// the default database, system), is one of set. An unqualified name must
// be in the default database's main schema, a two-part one in the default
// database: the names DuckDB finds there before any system object of the
// same name. A two-part name DuckDB would read as catalog.name is refused
// (write catalog.main.name).
func (a *allowlist) resolves(set map[[3]string]bool, catalog, schema, name string) bool {
	switch {
	case catalog != "":
		return schema != "" && set[[3]string{fold(catalog), fold(schema), fold(name)}]
	case schema != "":
		return set[[3]string{a.db, fold(schema), fold(name)}]
	}
	return set[[3]string{a.db, "main", fold(name)}]
}

// qualified reads a name's three parts from o and, where the parser also
// gives it, checks them against qualified_name's path (so that the two
// cannot say different things).
func qualified(o map[string]any, catalogKey, schemaKey, nameKey string) (catalog, schema, name string, ok bool) {
	if o == nil {
		return "", "", "", false
	}
	var okC, okS, okN bool
	catalog, okC = o[catalogKey].(string)
	schema, okS = o[schemaKey].(string)
	name, okN = o[nameKey].(string)
	if !okC || !okS || !okN {
		return "", "", "", false
	}
	if q, has := o["qualified_name"].(map[string]any); has {
		path, _ := q["path"].([]any)
		var got []string
		for _, p := range path {
			s, isString := p.(string)
			if !isString {
				return "", "", "", false
			}
			got = append(got, s)
		}
		var want []string
		for _, p := range []string{catalog, schema, name} {
			if p != "" || len(want) > 0 {
				want = append(want, p)
			}
		}
		if !slices.Equal(got, want) {
			return "", "", "", false
		}
	}
	return catalog, schema, name, true
}

// fileLike reports whether a table name reads as a path or a URL: DuckDB
// scans such a name as a file when it names no table.
func fileLike(name string) bool {
	return strings.ContainsAny(name, "./\\*?[]{}:~")
}

func dotted(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ".")
}

// fold lower-cases ASCII letters only, as DuckDB compares names: a name
// folded further than DuckDB folds it could match a view here and name
// something else there.
func fold(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
