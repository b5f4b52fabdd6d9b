//go:build !nodb

package query

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// newLocalFixture is newFixture with a choice of isolation, and with
// before run on the directories (the data dir holding orders.parquet)
// before Open, so setup can name what it makes there.
func newLocalFixture(t *testing.T, isolation string, limits Limits, before func(f *fixture), setup ...string) *fixture {
	t.Helper()
	root := t.TempDir()
	f := &fixture{data: filepath.Join(root, "data"), outside: filepath.Join(root, "outside"), temp: filepath.Join(root, "tmp")}
	for _, d := range []string{f.data, f.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if f.data, err = filepath.EvalSymlinks(f.data); err != nil {
		t.Fatal(err)
	}
	if f.outside, err = filepath.EvalSymlinks(f.outside); err != nil {
		t.Fatal(err)
	}
	writeParquet(t, filepath.Join(f.data, "orders.parquet"), ordersSQL)
	if err := os.WriteFile(filepath.Join(f.outside, "secret.txt"), []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(f)
	}
	for i, s := range setup {
		setup[i] = strings.ReplaceAll(s, "$DATA", f.data)
	}
	e, err := Open(context.Background(), Options{DataDirs: []string{f.data}, TempDir: f.temp, Limits: limits, Isolation: isolation}, setup)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	f.e = e
	return f
}

// sinkSetup makes f's data dir look like a sink: a manifest, a table's
// change file.
func sinkSetup(t *testing.T, f *fixture) {
	for _, d := range []string{"_pgcdc", "public/orders"} {
		if err := os.MkdirAll(filepath.Join(f.data, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.data, "_pgcdc", "manifest.json"), []byte(`{"version": 7}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeParquet(t, filepath.Join(f.data, "public", "orders", "part-0.parquet"), ordersSQL)
}

// sinkViews are the views a Reader would make over sinkSetup's files: a
// table's state in its schema and in main, its change rows under the
// changes catalog; and a table macro and a scalar macro.
var sinkViews = []string{
	"ATTACH ':memory:' AS changes",
	"CREATE SCHEMA public",
	"CREATE SCHEMA changes.public",
	"CREATE VIEW public.orders AS SELECT * FROM read_parquet('$DATA/orders.parquet')",
	"CREATE VIEW changes.public.orders AS SELECT *, 'I' AS __op, id * 10 AS __lsn FROM read_parquet('$DATA/public/orders/*.parquet')",
	"CREATE VIEW main.orders AS SELECT * FROM public.orders",
	"CREATE MACRO public.orders_from(n) AS TABLE SELECT * FROM public.orders WHERE id >= n",
	"CREATE MACRO public.twice(x) AS x * 2",
}

func newSinkFixture(t *testing.T, isolation string) *fixture {
	t.Helper()
	return newLocalFixture(t, isolation, Limits{}, func(f *fixture) { sinkSetup(t, f) }, slices.Clone(sinkViews)...)
}

// dataFiles is every file and directory under dir, a file with its
// content's hash: what a request must leave as it found it.
func dataFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[p] = "directory"
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// unchanged fails t unless after is before: no file changed, removed or
// added.
func unchanged(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, h := range before {
		switch a, ok := after[p]; {
		case !ok:
			t.Errorf("%s: %s was removed", what, p)
		case a != h:
			t.Errorf("%s: %s changed", what, p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s: %s was added", what, p)
		}
	}
}

// isolations are the engines the hostile suite runs on: in process, and
// Open's default (a confined worker).
var isolations = []struct{ name, isolation string }{
	{"in process", IsolationNone},
	{"default", ""},
}

// TestAllowlistRefuses is the hostile suite of the allowlist: statements
// DuckDB types SELECT (or that are not) which write into the sink, read
// its files around the views, disclose paths and settings, or load code.
// Each must be refused naming what it named, and leave the data dir, and
// the directory beside it, byte for byte as they were.
func TestAllowlistRefuses(t *testing.T) {
	const copyTo = "COPY (SELECT 'junk') TO '$MANIFEST' (FORMAT csv, HEADER false)"
	cases := []refusal{
		// Writes: COPY (and the other writes DuckDB v2.0 parses in WITH)
		// in every position a SELECT can hold a statement.
		{"COPY, top level", copyTo, RuleOnlyQueries, "this is a COPY"},
		{"COPY in a CTE", "WITH x AS (" + copyTo + ") SELECT 1", RuleNotAllowed, "COPY"},
		{"COPY in a nested CTE", "WITH a AS (WITH b AS (" + copyTo + ") SELECT 1) SELECT * FROM a", RuleNotAllowed, "COPY"},
		{"COPY in a second CTE", "WITH a AS (SELECT 1), b AS (" + copyTo + ") SELECT * FROM a", RuleNotAllowed, "COPY"},
		{"COPY in a subquery in FROM", "SELECT * FROM (WITH x AS (" + copyTo + ") SELECT 1) t", RuleNotAllowed, "COPY"},
		{"COPY in a scalar subquery", "SELECT (WITH x AS (" + copyTo + ") SELECT 1)", RuleNotAllowed, "COPY"},
		{"COPY in an IN subquery", "SELECT 1 WHERE 1 IN (WITH x AS (" + copyTo + ") SELECT 1)", RuleNotAllowed, "COPY"},
		{"COPY in EXISTS", "SELECT * FROM public.orders WHERE EXISTS (WITH x AS (" + copyTo + ") SELECT 1)", RuleNotAllowed, "COPY"},
		{"COPY in a UNION branch", "SELECT 1 UNION ALL (WITH x AS (" + copyTo + ") SELECT 2)", RuleNotAllowed, "COPY"},
		{"COPY in LATERAL", "SELECT * FROM public.orders o, LATERAL (WITH x AS (" + copyTo + ") SELECT o.id) l", RuleNotAllowed, "COPY"},
		{"COPY in a table macro's argument", "SELECT * FROM public.orders_from((WITH x AS (" + copyTo + ") SELECT 1))", RuleNotAllowed, "COPY"},
		{"COPY in a scalar macro's argument", "SELECT public.twice((WITH x AS (" + copyTo + ") SELECT 1))", RuleNotAllowed, "COPY"},
		{"COPY in a window", "SELECT count(*) OVER (PARTITION BY (WITH x AS (" + copyTo + ") SELECT 1)) FROM public.orders", RuleNotAllowed, "COPY"},
		{"COPY in ORDER BY", "SELECT id FROM public.orders ORDER BY (WITH x AS (" + copyTo + ") SELECT 1)", RuleNotAllowed, "COPY"},
		{"COPY in VALUES", "VALUES ((WITH x AS (" + copyTo + ") SELECT 1))", RuleNotAllowed, "COPY"},
		{"COPY under a recursive CTE", "WITH RECURSIVE r AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM r WHERE n < (WITH x AS (COPY (SELECT 1) TO '$DATA/r.csv') SELECT 2)) SELECT * FROM r", RuleNotAllowed, "COPY"},
		{"COPY in DESCRIBE", "DESCRIBE WITH x AS (" + copyTo + ") SELECT 1", RuleNotAllowed, "COPY"},
		{"COPY in the MCP paging wrapper", "SELECT * FROM (\nWITH x AS (" + copyTo + ") SELECT 1\n) AS q\nLIMIT 11 OFFSET 0", RuleNotAllowed, "COPY"},
		{"COPY over a table's files", "WITH x AS (COPY (SELECT 1 AS id) TO '$DATA/public/orders' (FORMAT parquet, PARTITION_BY (id), OVERWRITE)) SELECT 1", RuleNotAllowed, "COPY"},
		{"COPY a forged base file", "WITH x AS (COPY (SELECT 99 AS id) TO '$DATA/public/orders/part-0.parquet' (FORMAT parquet)) SELECT * FROM changes.public.orders", RuleNotAllowed, "COPY"},
		{"INSERT in a CTE", "WITH x AS (INSERT INTO public.orders VALUES (1)) SELECT 1", RuleNotAllowed, "INSERT"},
		{"DELETE in a CTE", "WITH x AS (DELETE FROM public.orders) SELECT 1", RuleNotAllowed, "DELETE"},
		{"UPDATE in a CTE", "WITH x AS (UPDATE public.orders SET id = 1) SELECT 1", RuleNotAllowed, "UPDATE"},

		// Raw files around the views.
		{"read_parquet", "SELECT * FROM read_parquet('$DATA/public/orders/part-0.parquet')", RuleNotAllowed, "table function read_parquet"},
		{"read_parquet in a subquery", "SELECT * FROM public.orders WHERE id IN (SELECT id FROM read_parquet('$DATA/orders.parquet'))", RuleNotAllowed, "read_parquet"},
		{"read_parquet upper case", "SELECT * FROM READ_PARQUET('$DATA/orders.parquet')", RuleNotAllowed, "read_parquet"},
		{"read_text qualified and quoted", `SELECT * FROM system.main."read_text"('$MANIFEST')`, RuleNotAllowed, "system.main.read_text"},
		{"read_csv", "SELECT * FROM read_csv('$MANIFEST')", RuleNotAllowed, "read_csv"},
		{"read_json", "SELECT * FROM read_json_auto('$MANIFEST')", RuleNotAllowed, "read_json_auto"},
		{"read_text", "SELECT content FROM read_text('$MANIFEST')", RuleNotAllowed, "read_text"},
		{"read_blob", "SELECT content FROM read_blob('$DATA/**')", RuleNotAllowed, "read_blob"},
		{"glob", "SELECT * FROM glob('$DATA/**')", RuleNotAllowed, "glob"},
		{"parquet_metadata", "SELECT * FROM parquet_metadata('$DATA/orders.parquet')", RuleNotAllowed, "parquet_metadata"},
		{"parquet_schema", "SELECT * FROM parquet_schema('$DATA/orders.parquet')", RuleNotAllowed, "parquet_schema"},
		{"sniff_csv", "SELECT * FROM sniff_csv('$MANIFEST')", RuleNotAllowed, "sniff_csv"},
		{"a file as a table", "SELECT * FROM '$DATA/orders.parquet'", RuleNotAllowed, "read as a table"},
		{"a glob as a table", "FROM '$DATA/public/orders/*.parquet'", RuleNotAllowed, "read as a table"},
		{"a file as a quoted name", `SELECT * FROM "$DATA/orders.parquet"`, RuleNotAllowed, "read as a table"},
		{"a file as a table in a join", "SELECT * FROM public.orders JOIN '$DATA/orders.parquet' f USING (id)", RuleNotAllowed, "read as a table"},
		{"a CTE named like a file", `WITH "x.parquet" AS (SELECT 1) SELECT * FROM "x.parquet"`, RuleNotAllowed, "read as a table"},
		{"query_table", "SELECT * FROM query_table('public.orders')", RuleNotAllowed, "query_table"},
		{"query", "SELECT * FROM query('SELECT * FROM read_text(''$MANIFEST'')')", RuleNotAllowed, "query"},
		{"serialized SQL", "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))", RuleNotAllowed, "json_execute_serialized_sql"},
		{"a reader under SUMMARIZE", "SUMMARIZE SELECT * FROM read_parquet('$DATA/orders.parquet')", RuleNotAllowed, "read_parquet"},

		// Disclosure: settings, the catalog (view definitions hold paths).
		{"duckdb_settings()", "SELECT * FROM duckdb_settings()", RuleNotAllowed, "duckdb_settings"},
		{"duckdb_views()", "SELECT sql FROM duckdb_views()", RuleNotAllowed, "duckdb_views"},
		{"duckdb_views as a view", "SELECT sql FROM duckdb_views", RuleNotAllowed, "the table duckdb_views"},
		{"duckdb_views qualified", "SELECT sql FROM system.main.duckdb_views", RuleNotAllowed, "system.main.duckdb_views"},
		{"duckdb_views in main", "SELECT sql FROM main.duckdb_views", RuleNotAllowed, "main.duckdb_views"},
		{"duckdb_extensions()", "SELECT * FROM duckdb_extensions()", RuleNotAllowed, "duckdb_extensions"},
		{"duckdb_databases()", "SELECT path FROM duckdb_databases()", RuleNotAllowed, "duckdb_databases"},
		{"duckdb_secrets()", "SELECT * FROM duckdb_secrets()", RuleNotAllowed, "duckdb_secrets"},
		{"current_setting", "SELECT current_setting('temp_directory')", RuleNotAllowed, "function current_setting"},
		{"current_setting in a view's filter", "SELECT * FROM public.orders WHERE name <> current_setting('allowed_directories')::VARCHAR", RuleNotAllowed, "current_setting"},
		{"getenv", "SELECT getenv('HOME')", RuleNotAllowed, "function getenv"},
		{"information_schema", "SELECT view_definition FROM information_schema.views", RuleNotAllowed, "information_schema.views"},
		{"pg_catalog", "SELECT definition FROM pg_catalog.pg_views", RuleNotAllowed, "pg_catalog.pg_views"},
		{"pg_get_viewdef", "SELECT pg_get_viewdef(1)", RuleNotAllowed, "pg_get_viewdef"},
		{"sqlite_master", "SELECT sql FROM sqlite_master", RuleNotAllowed, "sqlite_master"},
		{"SHOW a setting", "SHOW temp_directory", RuleNotAllowed, "SHOW temp_directory"},
		{"SHOW DATABASES", "SHOW DATABASES", RuleNotAllowed, "SHOW databases"},
		{"pragma_ table function", "SELECT * FROM pragma_database_size()", RuleNotAllowed, "pragma_database_size"},
		{"json_serialize_plan", "SELECT json_serialize_plan('SELECT * FROM public.orders')", RuleNotAllowed, "json_serialize_plan"},
		// A CTE hides a catalog name only where it is in scope.
		{"a CTE's name outside its subquery", "SELECT * FROM (WITH duckdb_views AS (SELECT 1) SELECT * FROM duckdb_views) a, duckdb_views", RuleNotAllowed, "the table duckdb_views"},
		{"a CTE naming itself", "WITH duckdb_views AS (SELECT * FROM duckdb_views) SELECT * FROM duckdb_views", RuleNotAllowed, "the table duckdb_views"},
		{"a CTE naming a later one", "WITH a AS (SELECT sql FROM duckdb_views), duckdb_views AS (SELECT 1) SELECT * FROM a", RuleNotAllowed, "the table duckdb_views"},
		{"a qualified CTE name", "WITH duckdb_views AS (SELECT 1) SELECT * FROM main.duckdb_views", RuleNotAllowed, "main.duckdb_views"},

		// Extensions and settings.
		{"INSTALL", "INSTALL httpfs", RuleOnlyQueries, "this is an INSTALL"},
		{"LOAD", "LOAD httpfs", RuleOnlyQueries, "this is a LOAD"},
		{"LOAD a file in the sink", "LOAD '$DATA/x.duckdb_extension'", RuleOnlyQueries, "this is a LOAD"},
		{"SET", "SET enable_external_access = true", RuleOnlyQueries, "this is a SET"},
		{"RESET", "RESET allowed_directories", RuleOnlyQueries, "this is a RESET"},
		{"PRAGMA", "PRAGMA enable_profiling", RuleOnlyQueries, "this is a PRAGMA"},
		{"ATTACH in the sink", "ATTACH '$DATA/x.db' AS x", RuleOnlyQueries, "this is an ATTACH"},
		{"logging on", "SELECT * FROM enable_logging()", RuleNotAllowed, "enable_logging"},
		{"setseed", "SELECT setseed(0.5)", RuleNotAllowed, "setseed"},

		// Several statements.
		{"a query then COPY", "SELECT 1; " + copyTo, RuleOneStatement, "several"},
		{"a hostile CTE then a query", "WITH x AS (" + copyTo + ") SELECT 1; SELECT 2", RuleOneStatement, "several"},
		{"a query then INSTALL", "SELECT * FROM public.orders; INSTALL httpfs", RuleOneStatement, "several"},
	}
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			f := newSinkFixture(t, iso.isolation)
			q := strings.NewReplacer("$DATA", f.data, "$MANIFEST", filepath.Join(f.data, "_pgcdc", "manifest.json"))
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					data, outside := dataFiles(t, f.data), dataFiles(t, f.outside)
					defer func() { // also after a failed expectRefused
						unchanged(t, "data dir", data, dataFiles(t, f.data))
						unchanged(t, "outside", outside, dataFiles(t, f.outside))
					}()
					c.sql = q.Replace(c.sql)
					expectRefused(t, f.e, c)
				})
			}
			// The views still read what they read.
			r, err := f.e.Query(context.Background(), "SELECT count(*), sum(id) FROM changes.public.orders")
			if err != nil || r.Rows[0][0] != int64(5) || fmt.Sprint(r.Rows[0][1]) != "10" {
				t.Fatalf("the change rows after the suite: %v %v", r, err)
			}
		})
	}
}

// TestAllowlistAnswers: honest queries over the views still run, and
// answer what they should.
func TestAllowlistAnswers(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			f := newSinkFixture(t, iso.isolation)
			for _, c := range []struct {
				sql  string
				args []any
				want string // fmt.Sprint of the rows
			}{
				{"SELECT count(*) FROM public.orders", nil, "[[5]]"},
				{"SELECT count(*) FROM orders", nil, "[[5]]"},
				{`SELECT count(*) FROM "PUBLIC"."Orders"`, nil, "[[5]]"},
				{"SELECT count(*) FROM memory.public.orders", nil, "[[5]]"},
				{"SELECT count(*) FILTER (WHERE __op = 'I'), max(__lsn) FROM changes.public.orders", nil, "[[5 40]]"},
				{"SELECT id FROM public.orders WHERE id >= $1 ORDER BY id", []any{3}, "[[3] [4]]"},
				{"SELECT id FROM public.orders WHERE name = ? ORDER BY id", []any{"name 2"}, "[[2]]"},
				{"SELECT a.id, b.__op FROM public.orders a JOIN changes.public.orders b USING (id) WHERE a.id = 1", nil, "[[1 I]]"},
				{"WITH big AS (SELECT * FROM public.orders WHERE id > 2), n AS (SELECT count(*) AS c FROM big) SELECT c FROM n", nil, "[[2]]"},
				{"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 4) SELECT sum(n) FROM r", nil, "[[10]]"},
				{"WITH orders AS (SELECT 42 AS id) SELECT id FROM orders", nil, "[[42]]"},
				{"WITH duckdb_settings AS (SELECT 'mine' AS x) SELECT x FROM duckdb_settings", nil, "[[mine]]"},
				{"SELECT id, sum(id) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM public.orders QUALIFY row_number() OVER (ORDER BY id DESC) <= 2 ORDER BY id", nil, "[[3 5] [4 7]]"},
				{"SELECT id % 2 AS k, count(*), list(id ORDER BY id) FROM public.orders GROUP BY ALL ORDER BY k", nil, "[[0 3 [0 2 4]] [1 2 [1 3]]]"},
				{"SELECT id FROM public.orders WHERE id IN (SELECT id FROM changes.public.orders WHERE id < 2) ORDER BY id", nil, "[[0] [1]]"},
				{"SELECT (SELECT max(id) FROM public.orders), EXISTS (SELECT 1 FROM orders)", nil, "[[4 true]]"},
				{"SELECT o.id, l.d FROM public.orders o, LATERAL (SELECT o.id * 2 AS d) l WHERE o.id = 3", nil, "[[3 6]]"},
				{"SELECT id FROM public.orders WHERE id < 2 UNION ALL SELECT id FROM changes.public.orders WHERE id = 4 ORDER BY 1", nil, "[[0] [1] [4]]"},
				{"SELECT count(*) FROM public.orders_from(3)", nil, "[[2]]"},
				{"SELECT public.twice(21)", nil, "[[42]]"},
				{"SELECT sum(range) FROM range(5)", nil, "[[10]]"},
				{"SELECT count(*) FROM generate_series(1, 3)", nil, "[[3]]"},
				{"SELECT x FROM unnest([3, 4]) t(x) ORDER BY x", nil, "[[3] [4]]"},
				{"SELECT unnest([1, 2]) AS x", nil, "[[1] [2]]"},
				{"FROM public.orders SELECT max(id)", nil, "[[4]]"},
				{"VALUES (1, 'a')", nil, "[[1 a]]"},
				{"SELECT upper(name), length(name), date_trunc('day', ts)::DATE::VARCHAR, amount::DOUBLE, version() <> '' FROM public.orders WHERE id = 1", nil, "[[NAME 1 6 2026-01-02 1.5 true]]"},
				{"SELECT list_transform([1, 2], lambda x: x + 1), [x * 2 FOR x IN [1, 2]], {'a': 1}.a", nil, "[[[2 3] [2 4] 1]]"},
				{"SELECT * FROM (SELECT id, name FROM public.orders WHERE id < 2) PIVOT (count(*) FOR name IN ('name 0', 'name 1')) ORDER BY id", nil, "[[0 1 0] [1 0 1]]"},
				{"SELECT count(*) FROM (UNPIVOT (SELECT id, id + 1 AS nxt FROM public.orders) ON id, nxt)", nil, "[[10]]"},
				{"SELECT * FROM (\nSELECT id FROM public.orders WHERE id = 2\n) AS q\nLIMIT 11 OFFSET 0", nil, "[[2]]"},
				{"SELECT column_name FROM (DESCRIBE public.orders) WHERE column_name = 'id'", nil, "[[id]]"},
				{"SELECT count(*) FROM (SUMMARIZE public.orders)", nil, "[[5]]"},
				{"SELECT count(*) > 0 FROM (SHOW TABLES)", nil, "[[true]]"},
				{"SELECT count(*) FROM (SHOW ALL TABLES) WHERE database = 'changes'", nil, "[[1]]"},
			} {
				r, err := f.e.Query(context.Background(), c.sql, c.args...)
				if err != nil {
					t.Errorf("%s: %v", c.sql, err)
					continue
				}
				if got := fmt.Sprint(r.Rows); got != c.want {
					t.Errorf("%s = %s, want %s", c.sql, got, c.want)
				}
			}
			for _, s := range []string{"DESCRIBE public.orders", "SUMMARIZE changes.public.orders", "SHOW TABLES", "SHOW ALL TABLES", "SHOW TABLES FROM public", "SHOW public.orders", "DESCRIBE SELECT 1 AS x", "TABLE public.orders"} {
				if _, err := f.e.Query(context.Background(), s); err != nil {
					t.Errorf("%s: %v", s, err)
				}
			}
		})
	}
}

// TestAllowlistUnknownNodes: the check refuses what it does not recognise
// (a node type or an expression class a later DuckDB might add), and a
// tree whose names disagree with themselves.
func TestAllowlistUnknownNodes(t *testing.T) {
	a := &allowlist{db: "memory", relations: map[[3]string]bool{{"memory", "main", "t"}: true}}
	for _, c := range []struct{ json, detail string }{
		{`{"node": {"type": "SELECT_NODE", "from_table": {"type": "NEW_TABLE_REF"}}}`, "DuckDB calls NEW_TABLE_REF"},
		{`{"node": {"type": "MERGE_INTO_QUERY_NODE"}}`, "MERGE INTO"},
		{`{"node": {"type": "SELECT_NODE", "select_list": [{"class": "NEW_EXPRESSION", "type": "X"}]}}`, "DuckDB calls NEW_EXPRESSION"},
		{`{"node": {"type": "SELECT_NODE", "cte_map": {"entries": []}}}`, "WITH clause this check cannot read"},
		{`{"node": {"type": "SELECT_NODE", "from_table": {"type": "BASE_TABLE", "catalog_name": "", "schema_name": "", "table_name": "t", "qualified_name": {"path": ["duckdb_views"]}}}}`, "cannot read"},
		{`{"node": {"type": "SELECT_NODE", "from_table": {"type": "BASE_TABLE", "schema_name": "", "table_name": "t"}}}`, "cannot read"},
		{`{"node": {"type": "SELECT_NODE", "from_table": {"type": "TABLE_FUNCTION", "function": {"class": "FUNCTION", "type": "FUNCTION", "function_name": "range", "schema": "", "catalog": "system"}}}}`, "system.range"},
	} {
		err := a.check(json.RawMessage(c.json))
		var re *RefusedError
		if !errors.As(err, &re) || re.Rule != RuleNotAllowed || !strings.Contains(re.Detail, c.detail) {
			t.Errorf("%s: %v, want a refusal naming %q", c.json, err, c.detail)
		}
	}
	if err := a.check(json.RawMessage(`{"node": {"type": "SELECT_NODE", "from_table": {"type": "BASE_TABLE", "catalog_name": "", "schema_name": "", "table_name": "T", "qualified_name": {"path": ["T"]}}}}`)); err != nil {
		t.Errorf("a setup table: %v", err)
	}
}
