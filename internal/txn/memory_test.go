package txn

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/failpoint"
)

// TestMemoryBounded: a 1,000,000-row transaction with a 1 MiB budget keeps
// the heap small while it is added and while it is replayed.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 80 MB of spill file")
	}
	const (
		rows   = 1_000_000
		budget = 1 << 20
		limit  = 50 << 20
	)
	a := NewAssembler(t.TempDir(), budget)
	var peak uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	for i := range rows {
		c := &cdc.Change{Table: orders, Op: cdc.OpInsert, Values: []cdc.Datum{
			text(strconv.Itoa(i)), text("a note of some length, as rows have"), null, unchanged, text("12345.678"),
		}}
		sub := uint32(1)
		if i%10 == 0 {
			sub = 2 // a savepoint, aborted below
		}
		mustAdd(t, a, 1, sub, c)
		if a.MemoryBytes() > budget {
			t.Fatalf("MemoryBytes() = %d, budget %d", a.MemoryBytes(), budget)
		}
		if i%50_000 == 0 {
			sample()
		}
	}
	must(t, a.Abort(1, 2))
	addPeak := peak
	spilled := a.SpilledBytes()
	peak = 0
	n, last := 0, int64(-1)
	must(t, a.Commit(1, func(seq int64, c *cdc.Change) error {
		if seq <= last || seq%10 == 0 {
			return fmt.Errorf("seq %d after %d", seq, last)
		}
		last = seq
		if n++; n%50_000 == 0 {
			sample()
		}
		return nil
	}))
	if n != rows-rows/10 {
		t.Fatalf("replayed %d changes, want %d", n, rows-rows/10)
	}
	t.Logf("%d rows, budget %d KiB: spilled %.1f MB; peak HeapInuse %.1f MB during Add, %.1f MB during Commit",
		rows, budget>>10, float64(spilled)/1e6, float64(addPeak)/1e6, float64(peak)/1e6)
	if addPeak > limit || peak > limit {
		t.Fatalf("peak HeapInuse %d (Add) / %d (Commit) bytes exceeds %d", addPeak, peak, limit)
	}
}

// TestSpillFailpoint runs a child process with the "txn/spill" failpoint
// armed: it must die by SIGKILL at the first spill, leaving a spill file
// that a new assembler's Reset removes.
func TestSpillFailpoint(t *testing.T) {
	if dir := os.Getenv("PGCDC_TEST_SPILL_DIR"); dir != "" {
		a := NewAssembler(dir, 1)
		for i := range 10 {
			_ = a.Add(3, 3, row(i))
		}
		os.Exit(0) // not reached when the failpoint fires
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpillFailpoint$")
	cmd.Env = append(os.Environ(), "PGCDC_TEST_SPILL_DIR="+dir, failpoint.EnvVar+"=txn/spill=kill")
	out, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL at the failpoint: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "txn-*.spill"))
	if len(files) != 1 {
		t.Fatalf("spill files after the crash: %v", files)
	}
	must(t, NewAssembler(dir, 1).Reset())
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		t.Fatalf("Reset left %v", files)
	}
}

func benchmarkAddCommit(b *testing.B, budget int64) {
	const perTxn = 10_000
	a := NewAssembler(b.TempDir(), budget)
	proto := []cdc.Datum{text("123456"), text("a note of some length, as rows have"), null, unchanged, text("12345.678")}
	var bytes int64
	for _, v := range proto {
		bytes += int64(len(v.Text))
	}
	b.SetBytes(bytes)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += perTxn {
		top := uint32(i/perTxn + 1)
		n := min(perTxn, b.N-i)
		for range n {
			vals := make([]cdc.Datum, len(proto))
			copy(vals, proto)
			if err := a.Add(top, top, &cdc.Change{Table: orders, Op: cdc.OpInsert, Values: vals}); err != nil {
				b.Fatal(err)
			}
		}
		if err := a.Commit(top, func(int64, *cdc.Change) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddCommit measures one change through Add and Commit; SetBytes
// counts the value bytes of a 5-column row.
func BenchmarkAddCommit(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchmarkAddCommit(b, 1<<30) })
	b.Run("spill-1MiB", func(b *testing.B) { benchmarkAddCommit(b, 1<<20) })
}
