package mergesql_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
)

// BenchmarkReadView times the state view of a sink's public.bench table (the
// read path benchmark's table, bench/cmd/pgcdc-bench/read.go) against a
// pre-merged Parquet copy of the same state, with pg-cdc query's engine
// settings (2 threads, 1 GiB): go test -run ^$ -bench ReadView, with PGCDC_READBENCH_SINK set
// to a filesystem sink (say one kept by make bench BENCH_FLAGS="--only read
// --keep --dir …"); PGCDC_READBENCH_EXPLAIN=1 prints EXPLAIN ANALYZE,
// PGCDC_READBENCH_ASOF=1 reads as of the middle delta's newest LSN,
// PGCDC_READBENCH_ONLY=count|filter runs one query (for its peak RSS).
func BenchmarkReadView(t *testing.B) {
	root := os.Getenv("PGCDC_READBENCH_SINK")
	if root == "" {
		t.Skip("PGCDC_READBENCH_SINK is not set")
	}
	b, err := os.ReadFile(filepath.Join(root, manifest.Key))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	mt := m.Tables["public.bench"]
	var bound mergesql.Bound
	if os.Getenv("PGCDC_READBENCH_ASOF") != "" {
		bound.LSN = mt.Deltas[len(mt.Deltas)/2-1].MaxLSN
	}
	q, err := mergesql.State(mergesql.Input{Table: mt, Bound: bound,
		Path: func(key string) (string, error) { return filepath.Join(root, filepath.FromSlash(key)), nil }})
	if err != nil {
		t.Fatal(err)
	}
	if f := os.Getenv("PGCDC_READBENCH_VIEW"); f != "" {
		// A hand-written view to try, instead of State's.
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		q = string(b)
	}
	open := func() *sql.DB {
		db, err := sql.Open("duckdb", "")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		for _, s := range []string{"SET threads = 2", "SET memory_limit = '1GiB'", "CREATE SCHEMA public"} {
			if _, err := db.Exec(s); err != nil {
				t.Fatal(err)
			}
		}
		return db
	}
	db := open()
	defer db.Close()
	if _, err := db.Exec("CREATE VIEW public.bench AS " + q); err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	if os.Getenv("PGCDC_READBENCH_SQL") != "" {
		t.Log(q)
	}
	merged := filepath.Join(os.TempDir(), fmt.Sprintf("pgcdc-readbench-merged-%x.parquet", cdc.LSN(m.Version)^bound.LSN))
	ref := open()
	defer ref.Close()
	only := os.Getenv("PGCDC_READBENCH_ONLY")
	if only == "" {
		if _, err := os.Stat(merged); err != nil {
			if _, err := db.Exec(fmt.Sprintf("COPY (SELECT * FROM public.bench ORDER BY id) TO %s (FORMAT parquet, COMPRESSION zstd)", mergesql.Literal(merged))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ref.Exec("CREATE VIEW public.bench AS SELECT * FROM read_parquet(" + mergesql.Literal(merged) + ")"); err != nil {
			t.Fatal(err)
		}
	}
	queries := []struct{ key, sql string }{
		{"count", "SELECT count(*) AS n FROM public.bench"},
		{"filter", "SELECT count(*) AS n, sum(d) AS sum_d, max(b) AS max_b FROM public.bench WHERE a BETWEEN 1000 AND 3999"},
		{"point", "SELECT * FROM public.bench WHERE id = 123457"},
	}
	answer := func(db *sql.DB, q string) (string, time.Duration) {
		began := time.Now()
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var out []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(vals...))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(out, "\n"), time.Since(began)
	}
	// median is the median wall time of 7 runs; cpu their mean CPU time
	// (user + system, all threads): on a shared machine the steadier one.
	var cpu time.Duration
	median := func(db *sql.DB, q string) (string, time.Duration) {
		var ds []time.Duration
		var got string
		before := cpuTime()
		for range 7 {
			var d time.Duration
			got, d = answer(db, q)
			ds = append(ds, d)
		}
		cpu = (cpuTime() - before) / 7
		slices.Sort(ds)
		return got, ds[len(ds)/2]
	}
	for _, qq := range queries {
		if only != "" && only != qq.key {
			continue
		}
		if os.Getenv("PGCDC_READBENCH_EXPLAIN") != "" {
			plan, _ := answer(db, "EXPLAIN (ANALYZE, FORMAT json) "+qq.sql)
			if f := os.Getenv("PGCDC_READBENCH_EXPLAIN"); f != "1" {
				// A file to write the JSON profile to.
				_ = os.WriteFile(f+"."+qq.key+".json", []byte(strings.TrimPrefix(plan, "analyzed_plan")), 0o644)
			} else {
				t.Logf("%s plan:\n%s", qq.key, plan)
			}
		}
		got, d := median(db, qq.sql)
		cv := cpu
		if only != "" {
			t.Logf("%-7s view %8.2f ms  VmHWM %d MiB", qq.key, float64(d.Microseconds())/1000, hwm()>>20)
			continue
		}
		want, dr := median(ref, qq.sql)
		cr := cpu
		if got != want {
			t.Errorf("%s: the view answers %q, the pre-merged copy %q", qq.key, got, want)
		}
		t.Logf("%-7s wall: view %8.2f ms  pre-merged %7.2f ms  %6.2f× | cpu: view %8.2f ms  pre-merged %7.2f ms  %6.2f×", qq.key,
			ms(d), ms(dr), float64(d)/float64(dr), ms(cv), ms(cr), float64(cv)/float64(cr))
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuTime is this process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hwm is this process's VmHWM in bytes.
func hwm() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib)
			return kib << 10
		}
	}
	return 0
}
