//go:build !nodb

package query

import (
	"context"
	"database/sql"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // the fixture writer below, outside the sandbox
)

// fixture is an engine over one data dir holding orders.parquet, with a
// directory outside it holding a secret.
type fixture struct {
	e       *Engine
	data    string // the data dir, resolved
	outside string // a directory no request may read
	temp    string // Options.TempDir
}

const ordersSQL = `SELECT range::BIGINT AS id, 'name ' || range AS name,
	(range * 1.5)::DECIMAL(12,3) AS amount,
	TIMESTAMPTZ '2026-01-02 03:04:05+00' + to_seconds(range) AS ts,
	'00000000-0000-0000-0000-00000000000' || (range % 10) AS u
	FROM range(5)`

func newFixture(t *testing.T, limits Limits, setup ...string) *fixture {
	t.Helper()
	return newLocalFixture(t, "", limits, nil, setup...)
}

// writeParquet writes the rows of query to path with a DuckDB of its own,
// outside any sandbox: the sink's stand-in.
func writeParquet(t *testing.T, path, query string) {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The UUID column is cast here, so the fixture's text stays short.
	q := "COPY (SELECT * REPLACE (u::UUID AS u) FROM (" + query + ")) TO " + literal(path) + " (FORMAT parquet)"
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// mustServe is what every refusal test ends with: the engine answers the
// next request normally.
func mustServe(t *testing.T, e *Engine) {
	t.Helper()
	r, err := e.Query(context.Background(), "SELECT 40 + $1 AS n", 2)
	if err != nil {
		t.Fatalf("the next request failed: %v", err)
	}
	if len(r.Rows) != 1 || r.Rows[0][0] != int64(42) || r.Truncated {
		t.Fatalf("the next request: %+v", r)
	}
}

// TestSandboxReadsBack reads the settings in force with the engine's own
// connection (the allowlist refuses duckdb_settings() and current_setting
// to requests), in process: the worker opens the same engine.
func TestSandboxReadsBack(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ = filepath.EvalSymlinks(data)
	temp := filepath.Join(root, "tmp")
	e, err := Open(context.Background(), Options{DataDirs: []string{data}, TempDir: temp, Isolation: IsolationNone,
		Limits: Limits{MemoryBytes: 256 << 20, SpillBytes: 512 << 20, Threads: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	f := &fixture{e: e, data: data, temp: temp}
	r, err := trustedQuery(t, f.e, `SELECT name, value FROM duckdb_settings()
		WHERE name IN ('enable_external_access', 'lock_configuration', 'autoload_known_extensions',
		'autoinstall_known_extensions', 'memory_limit', 'threads', 'max_temp_directory_size', 'TimeZone')
		ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, row := range r.Rows {
		got[row[0].(string)] = row[1]
	}
	want := map[string]any{
		"enable_external_access": "false", "lock_configuration": "true",
		"autoload_known_extensions": "false", "autoinstall_known_extensions": "false",
		"memory_limit": "256.0 MiB", "threads": "2", "max_temp_directory_size": "512.0 MiB", "TimeZone": "UTC",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	r, err = trustedQuery(t, f.e, "SELECT unnest(current_setting('allowed_directories'))::VARCHAR AS d ORDER BY d")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 2 || r.Rows[0][0] != f.data+"/" || !strings.HasPrefix(r.Rows[1][0].(string), filepath.Join(f.temp, "engine-")) {
		t.Errorf("allowed_directories = %v, want the data dir and the engine's spill dir", r.Rows)
	}
}

// TestOpenRefusesUnverifiedSandbox leaves out one sandbox statement at a
// time: the read-back must catch each, name it, and serve nothing.
func TestOpenRefusesUnverifiedSandbox(t *testing.T) {
	for _, setting := range []string{"temp_directory", "allowed_directories", "max_temp_directory_size", "memory_limit", "threads", "TimeZone", "enable_external_access", "lock_configuration"} {
		t.Run(setting, func(t *testing.T) {
			data := t.TempDir()
			// Threads above the host's count, so that the default differs.
			limits := Limits{Threads: runtime.NumCPU() + 1, MemoryBytes: 300 << 20, SpillBytes: 700 << 20}
			e, err := open(context.Background(), Options{DataDirs: []string{data}, TempDir: filepath.Join(t.TempDir(), "tmp"), Limits: limits}, nil,
				func(s string) bool { return strings.Contains(s, " "+setting+" = ") })
			if err == nil {
				e.Close()
				t.Fatal("Open served without " + setting)
			}
			var se *SandboxError
			if !errors.As(err, &se) || se.Setting != setting {
				t.Fatalf("Open: %v, want a SandboxError naming %s", err, setting)
			}
		})
	}
}

func TestOpenOptions(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	open755 := filepath.Join(root, "open")
	for _, d := range []string{data, open755} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(root, "tmp")
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"no data dirs", Options{TempDir: tmp}, "no data directories"},
		{"no temp dir", Options{DataDirs: []string{data}}, "no temp directory"},
		{"root data dir", Options{DataDirs: []string{"/"}, TempDir: tmp}, "root directory"},
		{"missing data dir", Options{DataDirs: []string{filepath.Join(root, "nope")}, TempDir: tmp}, "no such file"},
		{"temp inside data", Options{DataDirs: []string{data}, TempDir: filepath.Join(data, "tmp")}, "overlap"},
		{"data inside temp", Options{DataDirs: []string{data}, TempDir: root}, "overlap"},
		{"temp not private", Options{DataDirs: []string{data}, TempDir: open755}, "private"},
		{"negative limit", Options{DataDirs: []string{data}, TempDir: tmp, Limits: Limits{MaxRows: -1}}, "negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, err := Open(context.Background(), c.o, nil)
			if err == nil {
				e.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want %q", err, c.want)
			}
		})
	}
}

// TestReadsInsideDataDirs: what the engine is for.
func TestReadsInsideDataDirs(t *testing.T) {
	f := newFixture(t, Limits{},
		"CREATE SCHEMA lake",
		"CREATE VIEW lake.orders AS SELECT * FROM read_parquet('$DATA/orders.parquet')",
		"CREATE MACRO lake.orders_from(n) AS TABLE SELECT * FROM lake.orders WHERE id >= n",
		// Globs and replacement scans, in views: requests may not name files
		// (the allowlist), setup may.
		"CREATE VIEW lake.by_glob AS SELECT * FROM '$DATA/*.parquet'",
		"CREATE VIEW lake.by_union AS SELECT * FROM read_parquet('$DATA/**/*.parquet', union_by_name = true)")
	ctx := context.Background()

	r, err := f.e.Query(ctx, "SELECT id, name, amount, ts, u FROM lake.orders ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	wantCols := []Column{{Name: "id", Type: "BIGINT"}, {Name: "name", Type: "VARCHAR"}, {Name: "amount", Type: "DECIMAL(12,3)"}, {Name: "ts", Type: "TIMESTAMPTZ"}, {Name: "u", Type: "UUID"}}
	if len(r.Columns) != len(wantCols) {
		t.Fatalf("columns %v", r.Columns)
	}
	for i, c := range wantCols {
		if r.Columns[i] != c {
			t.Errorf("column %d = %v, want %v", i, r.Columns[i], c)
		}
	}
	if len(r.Rows) != 5 || r.Truncated {
		t.Fatalf("rows %v truncated %v", r.Rows, r.Truncated)
	}
	row := r.Rows[3]
	ts := time.Date(2026, 1, 2, 3, 4, 8, 0, time.UTC)
	if row[0] != int64(3) || row[1] != "name 3" || row[2] != "4.500" || !row[3].(time.Time).Equal(ts) || row[4] != "00000000-0000-0000-0000-000000000003" {
		t.Errorf("row 3 = %#v", row)
	}
	if r.Bytes <= 0 || r.Elapsed <= 0 {
		t.Errorf("bytes %d elapsed %v", r.Bytes, r.Elapsed)
	}

	// The setup's views and macros, with parameters of each kind.
	for _, q := range []struct {
		sql  string
		args []any
		want int64
	}{
		{"SELECT count(*) FROM lake.orders", nil, 5},
		{"SELECT count(*) FROM lake.orders_from(?)", []any{3}, 2},
		{"SELECT count(*) FROM lake.orders WHERE name = $name", []any{sql.Named("name", "name 1")}, 1},
		{"FROM lake.orders SELECT count(*) WHERE amount > $1", []any{"1.0"}, 4},
		{"SELECT count(*) FROM lake.by_glob", nil, 5},
		{"SELECT count(*) FROM lake.by_union", nil, 5},
	} {
		r, err := f.e.Query(ctx, q.sql, q.args...)
		if err != nil {
			t.Errorf("%s: %v", q.sql, err)
			continue
		}
		if r.Rows[0][0] != q.want {
			t.Errorf("%s = %v, want %d", q.sql, r.Rows[0][0], q.want)
		}
	}
	// Read-only statements DuckDB types SELECT.
	for _, q := range []string{"DESCRIBE lake.orders", "SUMMARIZE lake.orders", "SHOW TABLES", "SELECT version()", "SELECT * FROM (DESCRIBE lake.orders)", "VALUES (1), (2)", "WITH a AS (SELECT 1) SELECT * FROM a", "SELECT 1;"} {
		if _, err := f.e.Query(ctx, q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	// Values of the other types come back as standard Go types.
	r, err = f.e.Query(ctx, `SELECT 170141183460469231731687303715884105727::HUGEINT AS h, INTERVAL '1 month 2 days 3 seconds' AS i,
		[1, 2] AS l, {'a': 1} AS s, MAP {'k': 'v'} AS m, '-0.05'::DECIMAL(5,2) AS d, 'x'::BLOB AS b, NULL AS n`)
	if err != nil {
		t.Fatal(err)
	}
	v := r.Rows[0]
	h, _ := new(big.Int).SetString("170141183460469231731687303715884105727", 10)
	if b, ok := v[0].(*big.Int); !ok || b.Cmp(h) != 0 {
		t.Errorf("hugeint %#v", v[0])
	}
	if v[1] != (Interval{Months: 1, Days: 2, Micros: 3_000_000}) {
		t.Errorf("interval %#v", v[1])
	}
	if l, ok := v[2].([]any); !ok || len(l) != 2 || l[0] != int32(1) {
		t.Errorf("list %#v", v[2])
	}
	if s, ok := v[3].(map[string]any); !ok || s["a"] != int32(1) {
		t.Errorf("struct %#v", v[3])
	}
	if m, ok := v[4].([]MapEntry); !ok || len(m) != 1 || m[0] != (MapEntry{Key: "k", Value: "v"}) {
		t.Errorf("map %#v", v[4])
	}
	if v[5] != "-0.05" || string(v[6].([]byte)) != "x" || v[7] != nil {
		t.Errorf("decimal, blob, null: %#v %#v %#v", v[5], v[6], v[7])
	}
}

func TestCaps(t *testing.T) {
	f := newFixture(t, Limits{MaxRows: 10, MaxBytes: 10_000})
	ctx := context.Background()
	for _, c := range []struct {
		sql       string
		rows      int
		truncated bool
	}{
		{"SELECT * FROM range(100)", 10, true},                     // past the row cap
		{"SELECT * FROM range(10)", 10, false},                     // exactly the cap
		{"SELECT * FROM range(3)", 3, false},                       // under it
		{"SELECT repeat('x', 1000) FROM range(100)", 10, true},     // 10 × 1000 bytes fit exactly; rows cap too
		{"SELECT repeat('x', 2000) FROM range(100)", 5, true},      // past the byte cap first
		{"SELECT repeat('x', 20000) FROM range(3)", 0, true},       // one value past the byte cap
		{"SELECT * FROM range(0)", 0, false},                       // nothing
		{"SELECT [repeat('x', 3000)] FROM range(100)", 3, true},    // nested values count by their parts
		{"SELECT {'a': repeat('x', 3000)} FROM range(9)", 3, true}, // so do structs
	} {
		r, err := f.e.Query(ctx, c.sql)
		if err != nil {
			t.Errorf("%s: %v", c.sql, err)
			continue
		}
		if len(r.Rows) != c.rows || r.Truncated != c.truncated {
			t.Errorf("%s: %d rows truncated=%v, want %d rows truncated=%v", c.sql, len(r.Rows), r.Truncated, c.rows, c.truncated)
		}
		if r.Bytes > 10_000 {
			t.Errorf("%s: %d bytes past the cap", c.sql, r.Bytes)
		}
	}
	mustServe(t, f.e)
}

func TestTimeoutInterrupts(t *testing.T) {
	const timeout = 300 * time.Millisecond
	f := newFixture(t, Limits{Timeout: timeout})
	start := time.Now()
	_, err := f.e.Query(context.Background(), "SELECT count(*) FROM range(1000000000) a, range(1000000000) b WHERE a.range + b.range = 7")
	took := time.Since(start)
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitTimeout || !errors.Is(err, ErrLimit) {
		t.Fatalf("a long cross join: %v, want a timeout LimitError", err)
	}
	if took < timeout || took > timeout+time.Second {
		t.Fatalf("interrupted after %v; the deadline was %v", took, timeout)
	}
	t.Logf("interrupted %v after the %v deadline: %v", took-timeout, timeout, err)
	mustServe(t, f.e)

	// The caller's own cancellation is the caller's error, not a limit.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	_, err = f.e.Query(ctx, "SELECT count(*) FROM range(1000000000) a, range(1000000000) b WHERE a.range + b.range = 7")
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrLimit) {
		t.Fatalf("a cancelled request: %v, want context.Canceled", err)
	}
	mustServe(t, f.e)
}

func TestMemoryLimit(t *testing.T) {
	f := newFixture(t, Limits{MemoryBytes: 64 << 20, SpillBytes: 1 << 20, Threads: 1})
	// A list of 50M integers is one value: it cannot spill.
	_, err := f.e.Query(context.Background(), "SELECT length(list(range)) FROM range(50000000)")
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitMemory {
		t.Fatalf("a query past the memory limit: %v, want a memory LimitError", err)
	}
	mustServe(t, f.e)
}

func TestClose(t *testing.T) {
	f := newFixture(t, Limits{})
	// The engine's directory, in its worker's.
	dirs, _ := filepath.Glob(filepath.Join(f.temp, "worker-*", "engine-*"))
	if len(dirs) != 1 {
		t.Fatalf("engine dirs %v", dirs)
	}
	dirs = append(dirs, filepath.Dir(dirs[0]))
	if err := f.e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.e.Query(context.Background(), "SELECT 1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("query after close: %v", err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("the engine's directory %s outlives it: %v", d, err)
		}
	}
}

// TestTiming logs what Open and a trivial query cost (go test -v).
func TestTiming(t *testing.T) {
	data := t.TempDir()
	tmp := filepath.Join(t.TempDir(), "tmp")
	ctx := context.Background()
	start := time.Now()
	e, err := Open(ctx, Options{DataDirs: []string{data}, TempDir: tmp}, []string{"CREATE VIEW v AS SELECT 1 AS x"})
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Since(start)
	defer e.Close()
	const n = 200
	start = time.Now()
	for range n {
		if _, err := e.Query(ctx, "SELECT x FROM v"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("Open %v; a trivial query %v (mean of %d)", opened.Round(time.Microsecond), (time.Since(start) / n).Round(time.Microsecond), n)
}

// TestDataDirThroughSymlink: a data dir named through a symlink is allowed
// as what it resolves to, and read under either name.
func TestDataDirThroughSymlink(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	writeParquet(t, filepath.Join(real, "orders.parquet"), ordersSQL)
	link := filepath.Join(root, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	resolved, _ := filepath.EvalSymlinks(real)
	// In process, to read the setting with the engine's own connection;
	// the reads go through views, as requests' do.
	e, err := Open(context.Background(), Options{DataDirs: []string{link}, TempDir: filepath.Join(root, "tmp"), Isolation: IsolationNone}, []string{
		"CREATE VIEW by_link AS SELECT * FROM read_parquet(" + literal(filepath.Join(link, "orders.parquet")) + ")",
		"CREATE VIEW by_real AS SELECT * FROM read_parquet(" + literal(filepath.Join(resolved, "orders.parquet")) + ")",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := trustedQuery(t, e, "SELECT unnest(current_setting('allowed_directories'))::VARCHAR AS d ORDER BY d")
	if err != nil {
		t.Fatal(err)
	}
	if r.Rows[0][0] != resolved+"/" {
		t.Errorf("allowed_directories %v, want %s/ first", r.Rows, resolved)
	}
	for _, view := range []string{"by_link", "by_real"} {
		if r, err := e.Query(context.Background(), "SELECT count(*) FROM "+view); err != nil || r.Rows[0][0] != int64(5) {
			t.Errorf("%s: %v %v", view, r, err)
		}
	}
}

// TestCanariesCatchAnOpenDatabase: on a DuckDB without the sandbox the
// canaries are read, and the check says so.
func TestCanariesCatchAnOpenDatabase(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	spill := filepath.Join(dir, "spill")
	if err := os.Mkdir(spill, 0o700); err != nil {
		t.Fatal(err)
	}
	err = checkCanaries(context.Background(), c, dir, spill)
	var se *SandboxError
	if !errors.As(err, &se) || !strings.Contains(se.Setting, "canary") {
		t.Fatalf("checkCanaries on an open database: %v, want a canary SandboxError", err)
	}
	if err := verifySandbox(context.Background(), c, spill, []string{dir}, DefaultLimits); err == nil {
		t.Fatal("verifySandbox passed an open database")
	}
}
