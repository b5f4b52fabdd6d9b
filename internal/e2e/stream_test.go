package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/sinktest"
)

// assertSinkEqualsSource compares each table's state in the sink with the
// table in PostgreSQL (read with pgx), twice: merged by the test's own
// reader (sinktest.MergedRows, DuckDB over the files the manifest lists),
// and as pg-cdc query answers it — the read path's merge SQL, over the
// object store through its local cache for an S3 or GCS sink.
func assertSinkEqualsSource(t *testing.T, e *env, tables ...string) {
	t.Helper()
	e.mirror()
	m := e.manifest()
	views := e.queryViews()
	for _, table := range tables {
		mt := m.Tables[table]
		if mt == nil {
			t.Fatalf("table %s is not in the manifest", table)
		}
		cols, got := sinktest.MergedRows(t, e.sink, table)
		order := mt.PrimaryKey
		if len(order) == 0 {
			order = cols
		}
		want := sinktest.SourceRows(t, e.url, table, cols, order)
		if len(want) == 0 {
			t.Errorf("table %s: the source is empty; the comparison would prove nothing", table)
		}
		if !sinktest.AssertSameRows(t, want, got, cols) {
			t.Errorf("table %s: the merged files differ from the source (above)", table)
		}
		qcols, qrows := e.queryState(views[table], cols)
		if !slices.Equal(qcols, cols) {
			t.Fatalf("table %s: pg-cdc query returned the columns %v, want %v", table, qcols, cols)
		}
		if !sinktest.AssertSameRows(t, want, qrows, cols) {
			t.Errorf("table %s: pg-cdc query's current state differs from the source (above)", table)
		}
	}
}

// queryViews lists, by pg-cdc query --tables, the name each table is read
// by: "schema"."table", or the alias it shows for a table whose name
// differs from another's only in case.
func (e *env) queryViews() map[string]string {
	e.t.Helper()
	var list struct {
		Tables []struct {
			Name string `json:"name"`
			View string `json:"view"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(e.queryOut("--tables", "--format", "json"), &list); err != nil {
		e.t.Fatalf("pg-cdc query --tables --format json: %v", err)
	}
	m := e.manifest()
	ident := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	views := map[string]string{}
	for _, t := range list.Tables {
		views[t.Name] = t.View
		if mt := m.Tables[t.Name]; t.View == "" && mt != nil {
			views[t.Name] = ident(mt.Schema) + "." + ident(mt.Name)
		}
	}
	return views
}

// queryState reads a table's current state through pg-cdc query (JSON),
// from view, the name queryViews gave it.
func (e *env) queryState(view string, cols []string) ([]string, [][]any) {
	e.t.Helper()
	if view == "" {
		e.t.Fatal("pg-cdc query --tables does not list the table")
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = `"` + strings.ReplaceAll(c, `"`, `""`) + `"`
	}
	sql := fmt.Sprintf("SELECT %s FROM %s", strings.Join(quoted, ", "), view)
	out := e.queryOut("--format", "json", sql)
	qcols, rows, err := sinktest.QueryJSON(out)
	if err != nil {
		e.t.Fatalf("pg-cdc query %s: %v", sql, err)
	}
	return qcols, rows
}

// queryOut runs pg-cdc query with args and returns its standard output;
// a non-zero exit fails the test with both streams.
func (e *env) queryOut(args ...string) []byte {
	e.t.Helper()
	// Bounded, so that a hung read fails here with its output instead of
	// at the package timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"-c", e.config, "query"}, args...)...)
	// The comparisons read whole tables: no cap may cut them.
	cmd.Env = append(append(os.Environ(), quietMetrics, "PGCDC_QUERY_MAX_ROWS=1000000000", "PGCDC_QUERY_MAX_BYTES=17179869184"), e.procEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		e.t.Fatalf("pg-cdc query %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

func TestSnapshotAndStreamWorkload(t *testing.T) {
	e := newEnv(t, envOptions{})
	seed(t, e, 100, 200)
	out := e.mustRun("init")
	if !strings.Contains(out, "initialized: 3 tables") {
		t.Fatalf("init output:\n%s", out)
	}
	before, err := os.ReadFile(filepath.Join(e.sink, manifest.Key))
	if err != nil {
		t.Fatal(err)
	}
	out = e.mustRun("init")
	if !strings.Contains(out, "already initialized") {
		t.Fatalf("second init output:\n%s", out)
	}
	after, _ := os.ReadFile(filepath.Join(e.sink, manifest.Key))
	if !bytes.Equal(before, after) {
		t.Fatal("a second init changed the manifest")
	}
	// A table created since is named as start's to backfill, not init's.
	e.exec(`CREATE TABLE "Late Table" (id int PRIMARY KEY)`)
	out = e.mustRun("init")
	if !strings.Contains(out, "nothing changed") || !strings.Contains(out, `not captured yet: public."Late Table"; pg-cdc start adds each`) {
		t.Fatalf("init after a table was created:\n%s", out)
	}
	e.exec(`DROP TABLE "Late Table"`)
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")

	s := e.startSampler()
	d := e.start()
	w := runWorkloadFor(e.url, 1, 8*time.Second)
	n := w.wait(t)
	touchAll(e)
	e.waitCaughtUp(90 * time.Second)
	d.stop()
	s.check()
	t.Logf("workload committed %d transactions; %d manifest epochs", n, e.manifest().Epoch)
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")

	m := e.manifest()
	for _, table := range []string{"public.customers", "public.orders", "public.items"} {
		if len(m.Tables[table].Deltas) == 0 {
			t.Errorf("table %s has no delta: the workload did not reach it", table)
		}
	}
	// The workload exercised each kind of change.
	ops := duck(t, "SELECT __op, count(*) FROM read_parquet("+deltaFiles(e.sink, m, "public.items")+") GROUP BY 1 ORDER BY 1")
	seen := map[string]bool{}
	for _, r := range ops {
		seen[r[0].(string)] = true
	}
	for _, op := range []string{"I", "U", "D"} {
		if !seen[op] {
			t.Errorf("public.items deltas have no %q rows: %v", op, ops)
		}
	}
	unchanged := duck(t, "SELECT count(*) FROM read_parquet("+deltaFiles(e.sink, m, "public.orders")+") WHERE list_contains(__unchanged, 'note')")
	if asInt(t, unchanged[0][0]) == 0 {
		t.Error("no orders update carried the TOASTed note as unchanged; the workload did not exercise TOAST")
	}

	status := e.mustRun("status")
	// The shared cluster sets no max_slot_wal_keep_size: the forecast says so.
	for _, want := range []string{"public.orders", "epoch", e.slot, "WAL rate", "never invalidated"} {
		if !strings.Contains(status, want) {
			t.Errorf("status output lacks %q:\n%s", want, status)
		}
	}
}

// TestSigtermThenRestartWritesNoRowTwice stops the daemon cleanly in the
// middle of a workload, restarts it, and checks that no change row appears
// twice in the sink and that the state still matches.
func TestSigtermThenRestartWritesNoRowTwice(t *testing.T) {
	e := newEnv(t, envOptions{})
	seed(t, e, 50, 50)
	e.mustRun("init")
	s := e.startSampler()

	d := e.start()
	w := runWorkloadFor(e.url, 2, 6*time.Second)
	e.waitProgress(e.manifest().EndLSN, 30*time.Second)
	select {
	case <-w.done:
		t.Fatal("the workload ended before the first flush; the stop would not be in its middle")
	default:
	}
	d.stop() // in the middle of the workload
	endAtStop := e.manifest().EndLSN
	d = e.start()
	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(90 * time.Second)
	d.stop()
	s.check()

	m := e.manifest()
	if m.EndLSN <= endAtStop {
		t.Fatalf("the second run made no progress (end LSN %s)", m.EndLSN)
	}
	for _, table := range []string{"public.customers", "public.orders", "public.items"} {
		files := deltaFiles(e.sink, m, table)
		if files == "" {
			continue
		}
		dups := duck(t, "SELECT __lsn, __seq, count(*) FROM read_parquet("+files+") GROUP BY 1, 2 HAVING count(*) > 1 LIMIT 5")
		if len(dups) > 0 {
			t.Errorf("table %s: change rows written twice (lsn, seq, count): %v", table, dups)
		}
	}
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
}

// TestSlotDroppedBetweenRuns: a lost slot is terminal, named, and leaves the
// manifest untouched; rebuild recovers (rebuildAndStream).
func TestSlotDroppedBetweenRuns(t *testing.T) {
	e := newEnv(t, envOptions{})
	seed(t, e, 10, 10)
	e.mustRun("init")
	d := e.start()
	e.exec("INSERT INTO customers VALUES (5000, 'late', 1, now(), true)")
	e.waitCaughtUp(60 * time.Second)
	d.stop()

	before, err := os.ReadFile(filepath.Join(e.sink, manifest.Key))
	if err != nil {
		t.Fatal(err)
	}
	dropSlot(e)
	d = e.start()
	code := d.wait(60 * time.Second)
	if code != 10 {
		t.Fatalf("start on a dropped slot exited %d, want 10 (slot lost):\n%s", code, d.out.String())
	}
	if !strings.Contains(d.out.String(), e.slot) {
		t.Errorf("the error does not name the slot %q:\n%s", e.slot, d.out.String())
	}
	after, _ := os.ReadFile(filepath.Join(e.sink, manifest.Key))
	if !bytes.Equal(before, after) {
		t.Error("start on a dropped slot changed the manifest")
	}
	if !strings.Contains(d.out.String(), "pg-cdc rebuild") {
		t.Errorf("the hint does not name pg-cdc rebuild:\n%s", d.out.String())
	}
	rebuildAndStream(t, e, "missing")
}
