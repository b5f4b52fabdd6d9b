package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/sinktest"
)

// assertSinkEqualsSource compares each table's merged state in the sink,
// read by DuckDB, with the table in PostgreSQL.
func assertSinkEqualsSource(t *testing.T, e *env, tables ...string) {
	t.Helper()
	e.mirror()
	m := e.manifest()
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
		sinktest.AssertSameRows(t, want, got, cols)
	}
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
