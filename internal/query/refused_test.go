//go:build !nodb

package query

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"golang.org/x/sync/errgroup"
)

// refusal is one hostile request and the rule that must refuse it.
type refusal struct {
	name   string
	sql    string
	rule   string
	detail string // in the RefusedError's Detail
}

// expectRefused runs c and requires the named rule to refuse it, then that
// the engine serves the next request normally.
func expectRefused(t *testing.T, e *Engine, c refusal) {
	t.Helper()
	r, err := e.Query(context.Background(), c.sql)
	if err == nil {
		t.Fatalf("%s ran: %v", c.sql, r.Rows)
	}
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, ErrRefused) {
		t.Fatalf("%s: %v (%T), want a RefusedError", c.sql, err, err)
	}
	if re.Rule != c.rule || !strings.Contains(re.Detail, c.detail) {
		t.Fatalf("%s: refused by %q (%s), want %q (%s)", c.sql, re.Rule, re.Detail, c.rule, c.detail)
	}
	mustServe(t, e)
}

// outsideReads are reads outside the data dirs, each through a function
// or a file name that the allowlist refuses before anything is bound;
// TestSandboxAlone runs them past it, where DuckDB's own sandbox refuses
// each too. $SECRET is a file outside, $OUTSIDE its directory, $DATA/links
// holds links out of the data dir.
var outsideReads = []struct{ name, sql, named string }{
	{"read_text outside", "SELECT content FROM read_text('$SECRET')", "read_text"},
	{"read_text /etc/passwd", "SELECT content FROM read_text('/etc/passwd')", "read_text"},
	{"read_csv outside", "SELECT * FROM read_csv('$SECRET')", "read_csv"},
	{"read_csv /etc/passwd", "SELECT * FROM read_csv('/etc/passwd', sep = ':')", "read_csv"},
	{"read_blob outside", "SELECT content FROM read_blob('$SECRET')", "read_blob"},
	{"glob outside", "SELECT * FROM glob('$OUTSIDE/*')", "glob"},
	{"glob root", "SELECT * FROM glob('/*')", "glob"},
	{"replacement scan outside", "SELECT * FROM '$OUTSIDE/secret.csv'", "read as a table"},
	{"home directory", "SELECT content FROM read_text('~/.ssh/id_rsa')", "read_text"},
	{"dot-dot out of a data dir", "SELECT content FROM read_text('$DATA/../outside/secret.txt')", "read_text"},
	{"sibling sharing the prefix", "SELECT content FROM read_text('$DATA-evil/x')", "read_text"},
	{"sniff_csv", "SELECT * FROM sniff_csv('/etc/passwd')", "sniff_csv"},
	{"quoted function name", `SELECT * FROM "read_text"('/etc/passwd')`, "read_text"},
	{"quoted and qualified", `SELECT * FROM system.main."read_text"('$SECRET')`, "system.main.read_text"},
	{"read_parquet outside", "SELECT * FROM read_parquet('$OUTSIDE/*.parquet')", "read_parquet"},
	{"http", "SELECT * FROM read_parquet('http://example.com/x.parquet')", "read_parquet"},
	{"https csv", "SELECT * FROM read_csv('https://example.com/x.csv')", "read_csv"},
	{"s3", "SELECT * FROM read_parquet('s3://bucket/x.parquet')", "read_parquet"},
	{"s3 replacement scan", "SELECT * FROM 's3://bucket/x.parquet'", "read as a table"},
	// Symlinks inside a data dir that lead out of it.
	{"symlink to a file outside", "SELECT content FROM read_text('$DATA/links/secret.txt')", "read_text"},
	{"symlink to a directory outside", "SELECT content FROM read_text('$DATA/links/outside/secret.txt')", "read_text"},
	{"glob over a symlink outside", "SELECT content FROM read_text('$DATA/links/*.txt')", "read_text"},
	{"csv through a symlink", "SELECT * FROM read_csv('$DATA/links/secret.txt')", "read_csv"},
}

// withLinks adds to f's data dir, before Open, a directory of links: to a
// file outside, to the directory outside, and to a file inside (which is
// allowed); and a CSV outside.
func withLinks(t *testing.T) func(f *fixture) {
	return func(f *fixture) {
		secret := filepath.Join(f.outside, "secret.txt")
		if err := os.WriteFile(filepath.Join(f.outside, "secret.csv"), []byte("s\nsecret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		links := filepath.Join(f.data, "links")
		if err := os.Mkdir(links, 0o755); err != nil {
			t.Fatal(err)
		}
		for link, target := range map[string]string{
			"secret.txt":     secret,
			"outside":        f.outside,
			"orders.parquet": filepath.Join(f.data, "orders.parquet"),
		} {
			if err := os.Symlink(target, filepath.Join(links, link)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRefused runs in process: it looks into the engine's database
// afterwards, to see that nothing was created.
func TestRefused(t *testing.T) {
	f := newLocalFixture(t, IsolationNone, Limits{}, withLinks(t),
		"CREATE SCHEMA lake",
		"CREATE VIEW lake.orders AS SELECT * FROM read_parquet('$DATA/orders.parquet')",
		"CREATE VIEW lake.linked AS SELECT * FROM read_parquet('$DATA/links/orders.parquet')")
	secret := filepath.Join(f.outside, "secret.txt")
	q := func(s string) string {
		return strings.NewReplacer("$DATA", f.data, "$SECRET", secret, "$OUTSIDE", f.outside).Replace(s)
	}
	var cases []refusal
	for _, r := range outsideReads {
		cases = append(cases, refusal{r.name, r.sql, RuleNotAllowed, r.named})
	}
	cases = append(cases, []refusal{
		// Not queries: refused before they run.
		{"COPY TO outside", "COPY (SELECT 1) TO '$OUTSIDE/x.csv'", RuleOnlyQueries, "this is a COPY"},
		{"COPY TO a data dir", "COPY (SELECT * FROM lake.orders) TO '$DATA/copy.csv'", RuleOnlyQueries, "this is a COPY"},
		{"COPY FROM", "COPY lake.orders FROM '$SECRET'", RuleOnlyQueries, "this is a COPY"},
		{"ATTACH outside", "ATTACH '$OUTSIDE/x.db' AS x", RuleOnlyQueries, "this is an ATTACH"},
		{"ATTACH in a data dir", "ATTACH '$DATA/x.db' AS x", RuleOnlyQueries, "this is an ATTACH"},
		{"ATTACH memory", "ATTACH ':memory:' AS m", RuleOnlyQueries, "this is an ATTACH"},
		{"DETACH", "DETACH lake", RuleOnlyQueries, "this is a DETACH"},
		{"EXPORT DATABASE", "EXPORT DATABASE '$DATA/export'", RuleOnlyQueries, "this is an EXPORT"},
		{"INSTALL", "INSTALL httpfs", RuleOnlyQueries, "this is an INSTALL"},
		{"INSTALL FROM", "INSTALL httpfs FROM 'http://example.com'", RuleOnlyQueries, "this is an INSTALL"},
		{"LOAD", "LOAD httpfs", RuleOnlyQueries, "this is a LOAD"},
		{"LOAD a file", "LOAD '$DATA/x.duckdb_extension'", RuleOnlyQueries, "this is a LOAD"},
		{"SET external access", "SET enable_external_access = true", RuleOnlyQueries, "this is a SET"},
		{"SET GLOBAL", "SET GLOBAL memory_limit = '100GB'", RuleOnlyQueries, "this is a SET"},
		{"SET lock", "SET lock_configuration = false", RuleOnlyQueries, "this is a SET"},
		{"SET allowed_directories", "SET allowed_directories = ['/']", RuleOnlyQueries, "this is a SET"},
		{"SET search_path", "SET search_path = 'lake'", RuleOnlyQueries, "this is a SET"},
		{"RESET", "RESET allowed_directories", RuleOnlyQueries, "this is a RESET"},
		{"PRAGMA threads", "PRAGMA threads = 64", RuleOnlyQueries, "this is a PRAGMA"},
		{"PRAGMA memory_limit", "PRAGMA memory_limit = '100GB'", RuleOnlyQueries, "this is a PRAGMA"},
		{"PRAGMA enable_profiling", "PRAGMA enable_profiling", RuleOnlyQueries, "this is a PRAGMA"},
		{"USE", "USE lake", RuleOnlyQueries, "this is a USE"},
		{"SET VARIABLE", "SET VARIABLE x = 1", RuleOnlyQueries, "this is a SET"},
		{"CREATE SECRET", "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')", RuleOnlyQueries, "this is a CREATE"},
		{"CREATE PERSISTENT SECRET", "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')", RuleOnlyQueries, "this is a CREATE"},
		{"CREATE TABLE", "CREATE TABLE t AS SELECT 1 AS x", RuleOnlyQueries, "this is a CREATE"},
		{"CREATE TEMP TABLE", "CREATE TEMP TABLE t AS SELECT 1 AS x", RuleOnlyQueries, "this is a CREATE"},
		{"CREATE VIEW", "CREATE VIEW v AS SELECT 1 AS x", RuleOnlyQueries, "this is a CREATE"},
		{"CREATE OR REPLACE a setup view", "CREATE OR REPLACE VIEW lake.orders AS SELECT 1 AS x", RuleOnlyQueries, "this is a CREATE"},
		{"CREATE MACRO", "CREATE MACRO m(x) AS x + 1", RuleOnlyQueries, "this is a CREATE"},
		{"CREATE TABLE MACRO", "CREATE MACRO tm() AS TABLE SELECT 1", RuleOnlyQueries, "this is a CREATE"},
		{"CREATE SCHEMA", "CREATE SCHEMA s", RuleOnlyQueries, "this is a CREATE"},
		{"CREATE SEQUENCE", "CREATE SEQUENCE seq", RuleOnlyQueries, "this is a CREATE"},
		{"CREATE TYPE", "CREATE TYPE e AS ENUM ('a')", RuleOnlyQueries, "this is a CREATE"},
		{"DROP a setup view", "DROP VIEW lake.orders", RuleOnlyQueries, "this is a DROP"},
		{"ALTER a setup view", "ALTER VIEW lake.orders RENAME TO o", RuleOnlyQueries, "this is an ALTER"},
		{"EXPLAIN", "EXPLAIN SELECT 1", RuleOnlyQueries, "this is an EXPLAIN"},
		{"EXPLAIN ANALYZE COPY", "EXPLAIN ANALYZE COPY (SELECT 1) TO '$DATA/explained.csv'", RuleOnlyQueries, "this is an EXPLAIN"},
		{"CALL", "CALL pragma_version()", RuleOnlyQueries, "this is a CALL"},
		{"CHECKPOINT", "CHECKPOINT", RuleOnlyQueries, "this is a CHECKPOINT"},
		{"BEGIN", "BEGIN TRANSACTION", RuleOnlyQueries, "this is a BEGIN"},
		{"PREPARE", "PREPARE p AS SELECT 1", RuleOnlyQueries, "this is a PREPARE"},
		{"PIVOT", "PIVOT lake.orders ON name USING count(*)", RuleOnlyQueries, "this is a PIVOT"},
		{"VACUUM", "VACUUM", RuleOnlyQueries, "this is a VACUUM"},

		// Several statements, or none: refused before any of them runs.
		{"query then INSTALL", "SELECT 1; INSTALL httpfs", RuleOneStatement, "several"},
		{"INSTALL then query", "INSTALL httpfs; SELECT 1", RuleOneStatement, "several"},
		{"CREATE then query", "CREATE TABLE smuggled AS SELECT 1; SELECT 1", RuleOneStatement, "several"},
		{"SET then query", "SET lock_configuration = false; SELECT 1", RuleOneStatement, "several"},
		{"COPY then query", "COPY (SELECT 1) TO '$DATA/smuggled.csv'; SELECT 1", RuleOneStatement, "several"},
		{"two queries", "SELECT 1; SELECT 2", RuleOneStatement, "several"},
		{"empty", "", RuleOneStatement, "none"},
		{"a comment", "-- SELECT 1", RuleOneStatement, "none"},
		{"semicolons", " ; ; ", RuleOneStatement, "none"},
	}...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.sql = q(c.sql)
			expectRefused(t, f.e, c)
		})
	}

	t.Run("nothing was written or created", func(t *testing.T) {
		for _, name := range []string{"copy.csv", "x.db", "export", "explained.csv", "smuggled.csv"} {
			if _, err := os.Stat(filepath.Join(f.data, name)); !os.IsNotExist(err) {
				t.Errorf("%s exists in the data dir: %v", name, err)
			}
		}
		if _, err := os.Stat(filepath.Join(f.outside, "x.csv")); !os.IsNotExist(err) {
			t.Errorf("x.csv exists outside: %v", err)
		}
		// Asked on the engine's database directly: a request may not read
		// the catalog.
		r, err := trustedQuery(t, f.e, `SELECT
			(SELECT count(*) FROM duckdb_tables()),
			(SELECT count(*) FROM duckdb_views() WHERE NOT internal),
			(SELECT count(*) FROM duckdb_functions() WHERE function_name IN ('m', 'tm')),
			(SELECT count(*) FROM duckdb_schemas() WHERE schema_name = 's'),
			(SELECT count(*) FROM duckdb_sequences()),
			(SELECT count(*) FROM duckdb_types() WHERE type_name = 'e'),
			(SELECT count(*) FROM duckdb_secrets()),
			(SELECT count(*) FROM duckdb_databases() WHERE NOT internal)`)
		if err != nil {
			t.Fatal(err)
		}
		// What setup made: two views (lake.orders unaltered, lake.linked) and the memory database.
		want := []any{int64(0), int64(2), int64(0), int64(0), int64(0), int64(0), int64(0), int64(1)}
		for i, v := range r.Rows[0] {
			if v != want[i] {
				t.Errorf("catalog count %d = %v, want %v (all %v)", i, v, want[i], r.Rows[0])
			}
		}
		r, err = f.e.Query(context.Background(), "SELECT count(*) FROM lake.orders")
		if err != nil || r.Rows[0][0] != int64(5) {
			t.Errorf("the setup view after the requests: %v %v", r, err)
		}
	})

	t.Run("the sandbox still holds", func(t *testing.T) {
		r, err := trustedQuery(t, f.e, `SELECT current_setting('enable_external_access')::VARCHAR,
			current_setting('lock_configuration')::VARCHAR, current_setting('threads')::VARCHAR,
			current_setting('memory_limit')::VARCHAR, current_setting('search_path')::VARCHAR,
			current_setting('allowed_directories')::VARCHAR`)
		if err != nil {
			t.Fatal(err)
		}
		got := r.Rows[0]
		want := []any{"false", "true", strconv.Itoa(f.e.Limits().Threads), "1.0 GiB"}
		for i, w := range want {
			if got[i] != w {
				t.Errorf("setting %d = %v, want %v", i, got[i], w)
			}
		}
		if strings.Contains(got[4].(string), "lake") || !strings.HasPrefix(got[5].(string), "["+f.data+"/") {
			t.Errorf("search_path %v, allowed_directories %v", got[4], got[5])
		}
	})

	t.Run("a symlink to a file inside is read", func(t *testing.T) {
		r, err := f.e.Query(context.Background(), "SELECT count(*) FROM lake.linked")
		if err != nil || r.Rows[0][0] != int64(5) {
			t.Fatalf("%v %v", r, err)
		}
	})
}

// trustedQuery runs sql on e's database with no statement check: the
// test's own questions about the engine, which a request may not ask.
func trustedQuery(t *testing.T, e *Engine, sql string) (*Result, error) {
	t.Helper()
	if e.db == nil {
		t.Fatal("the engine does not run in this process")
	}
	rows, err := e.db.QueryContext(context.Background(), sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	res := &Result{}
	for rows.Next() {
		row := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, row)
	}
	return res, rows.Err()
}

// TestInvalid: SQL that DuckDB rejects is ErrInvalid, not a refusal, and
// harmless.
func TestInvalid(t *testing.T) {
	f := newFixture(t, Limits{}, "CREATE SCHEMA a", "CREATE SCHEMA b",
		"CREATE VIEW a.t AS SELECT 1 AS x", "CREATE VIEW b.t AS SELECT 2 AS x")
	for _, s := range []string{
		"SELEC 1",
		"SELECT * FROM no_such_table",    // names nothing: stopped before binding, as DuckDB would
		"SELECT * FROM a.no_such_table",  // the same in a schema
		"SELECT * FROM t",                // two schemas have it, and main none
		"SELECT * FROM no_such_schema.t", // the same
		"SELECT nope FROM a.t",           // DuckDB's binder
		"SELECT no_such_function(1)",     // DuckDB's binder: a built-in name is allowed unless denied
		"SELECT 1/0::INT > 'x'",
		"SELECT $1",    // a parameter without its value
		"SELECT 1 + ?", // the same, positional
		"RESET ALL",
	} {
		_, err := f.e.Query(context.Background(), s)
		if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrRefused) || errors.Is(err, ErrLimit) {
			t.Errorf("%s: %v, want ErrInvalid only", s, err)
		}
		mustServe(t, f.e)
	}
	if _, err := f.e.Query(context.Background(), "SELECT 1", 2); !errors.Is(err, ErrInvalid) {
		t.Errorf("a value for no parameter: %v", err)
	}
	// An unknown table gets the closest names, as DuckDB's binder gives.
	if _, err := f.e.Query(context.Background(), "SELECT * FROM a.tt"); err == nil || !strings.Contains(err.Error(), "did you mean a.t") {
		t.Errorf("an unknown table: %v, want the closest name", err)
	}
}

// TestSandboxAlone runs hostile statements past the statement check, on a
// connection of the engine's database, to show the second layer: DuckDB's
// own settings refuse them too — except the writes inside a data dir and
// the catalog changes, which only the statement rule stops.
func TestSandboxAlone(t *testing.T) {
	f := newLocalFixture(t, IsolationNone, Limits{}, withLinks(t))
	ctx := context.Background()
	secret := filepath.Join(f.outside, "secret.txt")
	q := func(s string) string {
		return strings.NewReplacer("$DATA", f.data, "$SECRET", secret, "$OUTSIDE", f.outside).Replace(s)
	}
	// The reads the allowlist refuses, run past it: DuckDB refuses each.
	for _, r := range outsideReads {
		var de *duckdb.Error
		rows, err := f.e.db.QueryContext(ctx, q(r.sql))
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			rows.Close()
		}
		if !errors.As(err, &de) || de.Type != duckdb.ErrorTypePermission {
			t.Errorf("%s: %v, want DuckDB's Permission Error", r.name, err)
		}
	}
	for _, s := range []string{
		"COPY (SELECT 1) TO '$OUTSIDE/x.csv'",
		"ATTACH '$OUTSIDE/x.db' AS x",
		"EXPORT DATABASE '$OUTSIDE/export'",
		"INSTALL httpfs",
		"LOAD httpfs",
		"SET enable_external_access = true",
		"SET lock_configuration = false",
		"SET allowed_directories = ['/']",
		"SET temp_directory = '$OUTSIDE'",
		"SET GLOBAL memory_limit = '100GB'",
		"RESET allowed_directories",
		"PRAGMA threads = 64",
		"CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')",
	} {
		if _, err := f.e.db.ExecContext(ctx, q(s)); err == nil {
			t.Errorf("DuckDB ran %s", q(s))
		} else {
			t.Logf("%s: %v", s, firstLine(err.Error()))
		}
	}
	// What only the statement rule stops: a file written in a data dir.
	if _, err := f.e.db.ExecContext(ctx, q("COPY (SELECT 1) TO '$DATA/inside.csv'")); err != nil {
		t.Fatalf("COPY into a data dir (DuckDB allows it; the statement rule must stop it): %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.data, "inside.csv")); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrent: requests at once, good and hostile, each answered as if
// alone (go test -race).
func TestConcurrent(t *testing.T) {
	f := newFixture(t, Limits{MaxRows: 50},
		"CREATE VIEW orders AS SELECT * FROM read_parquet('$DATA/orders.parquet')")
	secret := filepath.Join(f.outside, "secret.txt")
	var g errgroup.Group
	var mu sync.Mutex
	counts := map[string]int{}
	for w := range 16 {
		g.Go(func() error {
			for i := range 20 {
				var err error
				var kind string
				switch (w + i) % 4 {
				case 0:
					kind = "view"
					var r *Result
					if r, err = f.e.Query(context.Background(), "SELECT count(*) FROM orders WHERE id >= $1", i%5); err == nil && r.Rows[0][0] != int64(5-i%5) {
						err = errors.New("wrong count")
					}
				case 1:
					kind = "truncated"
					var r *Result
					if r, err = f.e.Query(context.Background(), "SELECT * FROM range(1000)"); err == nil && (!r.Truncated || len(r.Rows) != 50) {
						err = errors.New("not truncated")
					}
				case 2:
					kind = "outside"
					if _, err = f.e.Query(context.Background(), "SELECT * FROM read_text($1)", secret); errors.Is(err, ErrRefused) {
						err = nil
					}
				case 3:
					kind = "multi"
					if _, err = f.e.Query(context.Background(), "SELECT 1; CREATE TABLE t AS SELECT 1"); errors.Is(err, ErrRefused) {
						err = nil
					}
				}
				if err != nil {
					return err
				}
				mu.Lock()
				counts[kind]++
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("answered %v", counts)
}

// TestEachCheckAlone holds each layer of prepareQuery to the rules by
// itself, so that neither hides a fault of the other: the parser check
// with no prepare after it, and the prepare and type check with no parser
// check before it (on statements whose preparing has no effect).
func TestEachCheckAlone(t *testing.T) {
	f := newLocalFixture(t, IsolationNone, Limits{}, nil)
	ctx := context.Background()
	cases := []struct {
		sql, rule string
	}{
		{"SELECT 1", ""},
		{"SELECT 1; SELECT 2", RuleOneStatement},
		{"SELECT 1; INSTALL httpfs", RuleOneStatement},
		{"", RuleOneStatement},
		{"INSTALL httpfs", RuleOnlyQueries},
		{"LOAD httpfs", RuleOnlyQueries},
		{"SET threads = 1", RuleOnlyQueries},
		{"PRAGMA threads = 1", RuleOnlyQueries},
		{"CREATE TABLE t AS SELECT 1", RuleOnlyQueries},
		{"CREATE MACRO m(x) AS x", RuleOnlyQueries},
		{"ATTACH ':memory:' AS m", RuleOnlyQueries},
		{"EXPLAIN SELECT 1", RuleOnlyQueries},
		{"CALL pragma_version()", RuleOnlyQueries},
		{"BEGIN", RuleOnlyQueries},
		{"WITH x AS (COPY (SELECT 1) TO 'x.csv') SELECT 1", RuleNotAllowed},
	}
	conn, err := f.e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	check := func(t *testing.T, layer, sql, want string, err error) {
		t.Helper()
		var re *RefusedError
		switch {
		case want == "" && err != nil:
			t.Errorf("%s refused %q: %v", layer, sql, err)
		case want != "" && (!errors.As(err, &re) || re.Rule != want):
			t.Errorf("%s on %q: %v, want the rule %q", layer, sql, err, want)
		}
	}
	err = conn.Raw(func(dc any) error {
		c := dc.(*duckdb.Conn)
		for _, k := range cases {
			check(t, "the parse check", k.sql, k.rule, parseCheck(ctx, c, k.sql, f.e.names))
			if k.rule == RuleNotAllowed {
				continue // typed SELECT: only the parse check refuses it, and preparing binds it
			}
			st, err := prepareChecked(c, k.sql)
			if st != nil {
				st.Close()
			}
			check(t, "the prepare check", k.sql, k.rule, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing the prepare check saw ran.
	mustServe(t, f.e)
	r, err := trustedQuery(t, f.e, "SELECT (SELECT count(*) FROM duckdb_tables()), (SELECT count(*) FROM duckdb_functions() WHERE function_name = 'm'), (SELECT count(*) FROM duckdb_databases() WHERE database_name = 'm'), current_setting('threads')::VARCHAR")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Rows[0]; got[0] != int64(0) || got[1] != int64(0) || got[2] != int64(0) || got[3] != strconv.Itoa(f.e.Limits().Threads) {
		t.Errorf("after the checks: %v", got)
	}
}
