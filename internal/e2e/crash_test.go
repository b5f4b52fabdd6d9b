package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestKillAtEachFlushStep kills the daemon with SIGKILL at each step of the
// durability path, lets the workload go on while it is down, restarts it
// and checks that nothing committed was lost.
func TestKillAtEachFlushStep(t *testing.T) {
	for _, fp := range []string{
		"flush/after-deltas",   // delta files written, manifest not
		"flush/after-manifest", // manifest written, LSN not yet confirmed
		"txn/spill",            // a large streamed transaction half spilled
	} {
		t.Run(fp, func(t *testing.T) {
			e := newEnv(t, envOptions{memoryBudget: 256 << 10})
			seed(t, e, 50, 100)
			e.mustRun("init")
			s := e.startSampler()

			kill := fp + "=kill@3"
			if fp == "txn/spill" {
				kill = fp + "=kill@2"
			}
			d := e.start("PGCDC_FAILPOINTS=" + kill)
			w := runWorkloadFor(e.url, 3, 6*time.Second)
			// A transaction large enough to be streamed and spilled.
			bigTxn(t, e, 20000)
			if code := d.wait(90 * time.Second); code != 137 {
				t.Fatalf("expected the failpoint to kill the daemon (exit 137), got %d:\n%s", code, lines(d.out.String(), 30))
			}
			w.wait(t)
			touchAll(e)

			d = e.start()
			e.waitCaughtUp(120 * time.Second)
			d.stop()
			s.check()
			assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
		})
	}
}

// bigTxn inserts n items rows in one transaction.
func bigTxn(t *testing.T, e *env, n int) {
	t.Helper()
	e.exec(`INSERT INTO items SELECT 9000000 + g, 1, gen_random_uuid(), g, g * 0.5 FROM generate_series(1, $1) g
	        ON CONFLICT DO NOTHING`, n)
}

// TestKillAfterIdleInsertLosesNothing is the classic loss scenario: a 5,000
// row insert is received but not flushed (the interval is 60 s) when the
// daemon is killed 15 s later. Nothing may have been confirmed, and after a
// restart all rows land.
func TestKillAfterIdleInsertLosesNothing(t *testing.T) {
	e := newEnv(t, envOptions{flushInterval: 60})
	seed(t, e, 10, 10)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	e.waitSlotActive(60 * time.Second)
	e.exec(`INSERT INTO customers SELECT 100000 + g, 'bulk ' || g, g, now(), true FROM generate_series(1, 5000) g`)
	inserted := time.Now()
	// The walsender has sent the whole transaction: the daemon holds it
	// (received, not durable) when it is killed.
	var end string
	if err := e.conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text").Scan(&end); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the walsender to send the insert", 60*time.Second, func() bool {
		var sent bool
		err := e.conn.QueryRow(context.Background(), `SELECT r.sent_lsn >= $2::pg_lsn FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = $1`, e.slot, end).Scan(&sent)
		return err == nil && sent
	})
	// The scenario's wait: 15 s after the insert, well inside the interval.
	time.Sleep(time.Until(inserted.Add(15 * time.Second)))
	d.kill()
	if m := e.manifest(); m.Epoch != 0 {
		t.Fatalf("the 60 s interval had not passed, yet epoch %d was flushed", m.Epoch)
	}

	// The restart flushes sooner so the test need not wait out the 60 s.
	d = e.start("PGCDC_FLUSH_INTERVAL_SEC=1")
	e.waitFor("the 5,000 rows to be flushed", 120*time.Second, func() bool { return e.manifest().Epoch > 0 })
	d.stop()
	s.check()
	var n int
	rows := duck(t, "SELECT count(*) FROM read_parquet("+deltaFiles(e.sink, e.manifest(), "public.customers")+") WHERE __op = 'I'")
	n = int(asInt(t, rows[0][0]))
	if n != 5000 {
		t.Fatalf("%d of 5000 inserted rows landed", n)
	}
	assertSinkEqualsSource(t, e, "public.customers")
}

// TestSavepointRollback: a committed transaction with a rolled-back
// savepoint lands exactly its committed rows, streamed or not.
func TestSavepointRollback(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.exec(`CREATE TABLE sp (id int PRIMARY KEY, pad text)`)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()

	ctx := context.Background()
	for _, c := range []struct {
		base int
		pad  int // bytes per row: large rows make PostgreSQL stream the transaction
	}{{0, 200}, {10000, 0}} {
		err := pgx.BeginFunc(ctx, e.conn, func(tx pgx.Tx) error {
			stmts := []string{
				fmt.Sprintf(`INSERT INTO sp SELECT %d + g, repeat('a', %d) FROM generate_series(1, 500) g`, c.base, c.pad),
				`SAVEPOINT s1`,
				fmt.Sprintf(`INSERT INTO sp SELECT %d + g, repeat('b', %d) FROM generate_series(501, 1000) g`, c.base, c.pad),
				`SAVEPOINT s2`,
				fmt.Sprintf(`INSERT INTO sp VALUES (%d, 'nested')`, c.base+5000),
				`ROLLBACK TO SAVEPOINT s1`,
				fmt.Sprintf(`INSERT INTO sp SELECT %d + g, repeat('c', %d) FROM generate_series(1001, 1005) g`, c.base, c.pad),
			}
			for _, q := range stmts {
				if _, err := tx.Exec(ctx, q); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	s.check()

	rows := duck(t, "SELECT count(*), count(DISTINCT __xid) FROM read_parquet("+deltaFiles(e.sink, e.manifest(), "public.sp")+")")
	if got := asInt(t, rows[0][0]); got != 2*505 {
		t.Fatalf("%d change rows landed, want %d (505 per transaction)", got, 2*505)
	}
	if got := asInt(t, rows[0][1]); got != 2 {
		t.Fatalf("rows of %d transactions, want 2", got)
	}
	assertSinkEqualsSource(t, e, "public.sp")
}
