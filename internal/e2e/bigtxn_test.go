package e2e

import (
	"testing"
	"time"
)

// TestMillionRowTransaction streams one transaction of 1,000,000 inserted
// rows with bounded memory and makes it visible in a single epoch.
func TestMillionRowTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("long: one million rows")
	}
	e := newEnv(t, envOptions{memoryBudget: 16 << 20})
	e.exec(`CREATE TABLE big (id bigint PRIMARY KEY, payload text, amount numeric(12,2), at timestamptz)`)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	e.exec(`INSERT INTO big SELECT g, md5(g::text), g / 100.0, now() FROM generate_series(1, 1000000) g`)
	e.waitCaughtUp(5 * time.Minute)
	d.stop()
	s.check()

	rssMiB := float64(d.maxRSSKiB()) / 1024
	t.Logf("peak RSS of pg-cdc streaming a 1,000,000-row transaction: %.1f MiB", rssMiB)
	if rssMiB >= 256 {
		t.Errorf("peak RSS %.1f MiB, want < 256 MiB", rssMiB)
	}
	m := e.manifest()
	deltas := m.Tables["public.big"].Deltas
	if len(deltas) != 1 || deltas[0].Rows != 1_000_000 {
		t.Fatalf("want the transaction in one epoch of 1,000,000 rows, got %+v", deltas)
	}
	rows := duck(t, "SELECT count(*), count(DISTINCT id), min(__seq), max(__seq) FROM read_parquet("+deltaFiles(e.sink, m, "public.big")+")")
	if asInt(t, rows[0][0]) != 1_000_000 || asInt(t, rows[0][1]) != 1_000_000 {
		t.Fatalf("DuckDB reads %v", rows[0])
	}
}
