//go:build !nodb

package query

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// rawHook installs rawForTest in this test binary, which is also the
// worker every test's engine runs in: a variable, so it is set before the
// package's init starts a worker.
var rawHook = func() bool {
	rawForTest = func(ctx context.Context, en *Engine, sql string) error {
		_, err := en.db.ExecContext(ctx, sql)
		return err
	}
	return true
}()

// raw runs sql in e's worker with no statement check (the test path).
func raw(t *testing.T, e *Engine, sql string) error {
	t.Helper()
	if e.remote == nil {
		t.Fatal("the engine runs in process")
	}
	_, err := e.remote.do(context.Background(), workerRequest{Kind: reqRaw, SQL: sql})
	return err
}

// TestWorkerIsConfined: the engine runs in another process, under
// Landlock, with its memory bounded.
func TestWorkerIsConfined(t *testing.T) {
	f := newFixture(t, Limits{MemoryBytes: 256 << 20},
		"CREATE VIEW orders AS SELECT * FROM read_parquet('$DATA/orders.parquet')")
	c := f.e.Confinement()
	if c.Isolation != IsolationLandlock || c.LandlockABI < 1 || c.PID == os.Getpid() || c.PID == 0 {
		t.Fatalf("confinement %+v", c)
	}
	if c.DataLimit != workerDataLimit(f.e.Limits()) {
		t.Errorf("data limit %d, want %d", c.DataLimit, workerDataLimit(f.e.Limits()))
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", c.PID))
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatUint(c.DataLimit, 10); !strings.Contains(string(status), want) {
		t.Errorf("/proc/%d/limits has no %s:\n%s", c.PID, want, status)
	}
	r, err := f.e.Query(context.Background(), "SELECT count(*) FROM orders")
	if err != nil || r.Rows[0][0] != int64(5) {
		t.Fatalf("an honest read: %v %+v", err, r)
	}
}

// TestKernelRefusesWrites proves the kernel layer on its own: statements
// run in the worker with no check at all (the test path), and the writes
// into the data dir that DuckDB's own sandbox allows are refused by
// Landlock, with nothing in the data dir changed or added.
func TestKernelRefusesWrites(t *testing.T) {
	f := newFixture(t, Limits{})
	before := dataFiles(t, f.data)
	target := filepath.Join(f.data, "orders.parquet")
	for _, sql := range []string{
		"COPY (SELECT 'junk') TO " + literal(target) + " (FORMAT csv, HEADER false)",
		"COPY (SELECT 1 AS a) TO " + literal(filepath.Join(f.data, "new.parquet")) + " (FORMAT parquet)",
		"COPY (SELECT 1 AS a, 2 AS b) TO " + literal(filepath.Join(f.data, "part")) + " (FORMAT parquet, PARTITION_BY (a), OVERWRITE)",
		"COPY (SELECT 1 AS a) TO " + literal(filepath.Join(f.outside, "x.csv")),
		"ATTACH " + literal(filepath.Join(f.data, "x.duckdb")),
	} {
		err := raw(t, f.e, sql)
		if err == nil {
			t.Errorf("%s: ran", sql)
			continue
		}
		// DuckDB's sandbox allows the data dir: what refuses there is the
		// kernel (EACCES, "Permission denied"). Outside it DuckDB refuses
		// first.
		if strings.Contains(sql, f.data) && !strings.Contains(err.Error(), "ermission denied") {
			t.Errorf("%s: %v, want the kernel's Permission denied", sql, err)
		}
	}
	// The canary of the test path itself: a statement that needs no
	// write runs, so the refusals above are the writes'.
	if err := raw(t, f.e, "SELECT 1"); err != nil {
		t.Fatalf("the raw path: %v", err)
	}
	unchanged(t, "the raw writes", before, dataFiles(t, f.data))
	mustServe(t, f.e)
}

// TestWorkerMemoryBound: a value far past the memory limit, which
// DuckDB's own limit does not hold (repeat builds it outside the buffer
// manager), fails with a memory LimitError; the worker's peak stays under
// its bound, and the engine answers the next request.
func TestWorkerMemoryBound(t *testing.T) {
	f := newFixture(t, Limits{MemoryBytes: 256 << 20})
	_, err := f.e.Query(context.Background(), "SELECT length(repeat('x', 1000000000))")
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitMemory {
		t.Fatalf("repeat('x', 1e9): %v, want a memory LimitError", err)
	}
	c := f.e.Confinement()
	hwm := vmHWM(t, c.PID)
	t.Logf("worker %d: VmHWM %d MiB, bound %d MiB, error %v", c.PID, hwm>>20, c.DataLimit>>20, err)
	if hwm > 768<<20 {
		t.Errorf("the worker's peak RSS %d MiB, past 768 MiB", hwm>>20)
	}
	mustServe(t, f.e)
}

// TestWorkerDies: a worker killed under a running query fails that query
// with a clear error, and the engine's next request starts another worker
// with the same views.
func TestWorkerDies(t *testing.T) {
	f := newFixture(t, Limits{Timeout: time.Minute},
		"CREATE VIEW orders AS SELECT * FROM read_parquet('$DATA/orders.parquet')")
	first := f.e.Confinement().PID
	done := make(chan error, 1)
	go func() {
		_, err := f.e.Query(context.Background(), "SELECT count(*) FROM range(1000000000) a, range(1000000000) b WHERE a.range + b.range = 7")
		done <- err
	}()
	// The query is in the worker's hands: sent, not answered.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		f.e.remote.mu.Lock()
		p := f.e.remote.proc
		f.e.remote.mu.Unlock()
		p.mu.Lock()
		inFlight := len(p.pending)
		p.mu.Unlock()
		if inFlight > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the query never reached the worker")
		}
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the query on a killed worker succeeded")
		}
		t.Logf("the query on the killed worker: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the query on a killed worker never returned")
	}
	r, err := f.e.Query(context.Background(), "SELECT count(*) FROM orders")
	if err != nil || r.Rows[0][0] != int64(5) {
		t.Fatalf("after the worker died: %v %+v", err, r)
	}
	if second := f.e.Confinement().PID; second == first || second == 0 {
		t.Errorf("worker pid %d, then %d", first, second)
	}
}

// TestWorkerEnvironment: a worker inherits none of the parent's
// environment (credentials stay out of a query's reach).
func TestWorkerEnvironment(t *testing.T) {
	t.Setenv("PGPASSWORD", "hunter2")
	f := newFixture(t, Limits{})
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", f.e.Confinement().PID))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(env), "hunter2") || string(env) != workerEnv+"=1\x00" {
		t.Fatalf("the worker's environment: %q", env)
	}
}

func vmHWM(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestWorkerErrorsNameNoHostPath: an error that names a file of the data
// dir (a view's file gone) reaches the caller with the directory replaced:
// where the sink lies is not a reader's to know.
func TestWorkerErrorsNameNoHostPath(t *testing.T) {
	f := newFixture(t, Limits{}, "CREATE VIEW gone AS SELECT * FROM read_parquet('$DATA/orders.parquet')")
	if err := os.Remove(filepath.Join(f.data, "orders.parquet")); err != nil {
		t.Fatal(err)
	}
	_, err := f.e.Query(context.Background(), "SELECT count(*) FROM gone")
	if err == nil {
		t.Fatal("a view over a removed file answered")
	}
	if strings.Contains(err.Error(), f.data) || strings.Contains(err.Error(), f.temp) || !strings.Contains(err.Error(), "<data>/orders.parquet") {
		t.Fatalf("the error names the host's paths, or not the placeholder: %v", err)
	}
}

// TestNoLandlockRefusesAtStart: on a kernel without Landlock the read
// path refuses to open, as a configuration error naming the setting that
// accepts the risk, unless that setting is given.
func TestNoLandlockRefusesAtStart(t *testing.T) {
	saved := landlockABI
	landlockABI = func() (int, error) { return -1, syscall.EOPNOTSUPP }
	defer func() { landlockABI = saved }()
	sink := memory.New()
	_, err := NewReader(ReaderOptions{Sink: sink, TempDir: t.TempDir()})
	var se *SandboxError
	if !errors.As(err, &se) || !errors.Is(err, cdc.ErrUsage) || !strings.Contains(err.Error(), "query.isolation: process") {
		t.Fatalf("NewReader without Landlock: %v, want a usage error naming query.isolation", err)
	}
	r, err := NewReader(ReaderOptions{Sink: sink, TempDir: t.TempDir(), CacheDir: filepath.Join(t.TempDir(), "cache"), CacheBytes: 1 << 20, Isolation: IsolationProcess})
	if err != nil {
		t.Fatalf("NewReader with isolation process: %v", err)
	}
	r.Close()
}
