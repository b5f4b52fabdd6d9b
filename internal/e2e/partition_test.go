package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPartitionsWhileStreaming: a table partitioned by month, captured
// through its root, while a workload writes to it. Next month's partition
// is created (as pg_partman or a cron job does), a staging table holding
// rows is attached, a partition is detached, another dropped; after each
// step the root's state in the sink equals the source, start never exits,
// and no partition shows up as a table of its own (a detached one is an
// ordinary table then, captured as such).
func TestPartitionsWhileStreaming(t *testing.T) {
	waitBound(t)
	e := newEnv(t, envOptions{extraYAML: "backfill:\n  discover_interval_sec: 1\n"})
	e.exec(`CREATE TABLE m (id bigint, d date NOT NULL, v text, PRIMARY KEY (id, d)) PARTITION BY RANGE (d)`)
	e.exec(`CREATE TABLE m_2026_01 PARTITION OF m FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')`)
	e.exec(`CREATE TABLE m_old PARTITION OF m FOR VALUES FROM ('2025-01-01') TO ('2026-01-01')`)
	e.exec(`CREATE TABLE m_default PARTITION OF m DEFAULT`)
	e.exec(`INSERT INTO m SELECT g, DATE '2026-01-01' + (g % 31), 'jan ' || g FROM generate_series(1, 1000) g`)
	e.exec(`INSERT INTO m SELECT g, DATE '2025-06-01' + (g % 100), 'old ' || g FROM generate_series(1001, 1200) g`)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()

	// The load: inserts and updates in January all along, paused while a
	// step's result is compared.
	var next atomic.Int64
	next.Store(100_000)
	stopLoad := startPartitionLoad(t, e, &next)
	defer func() { stopLoad() }()

	step := func(name string) {
		t.Helper()
		e.waitCaughtUp(90 * time.Second)
		select {
		case <-d.done:
			t.Fatalf("after %s: pg-cdc start exited %d:\n%s", name, d.exitCode(), lines(withoutDebug(d.out.String()), 20))
		default:
		}
	}
	detached := false
	var loaded int64 // the root's rows when the load last resumed
	waitEqual := func(name string) {
		t.Helper()
		// Converged: the sink equals the source with the load paused.
		stopLoad()
		step(name)
		e.waitFor("the sink to equal the source after "+name, 90*time.Second, func() bool {
			return sinkRowCount(t, e, "public.m") == sourceCount(t, e, "m")
		})
		assertSinkEqualsSource(t, e, "public.m")
		// No partition is captured as a table of its own; a detached one
		// is an ordinary table of the captured schema, which discovery
		// captures like any new table.
		for key := range e.manifest().Tables {
			switch {
			case key == "public.m":
			case key == "public.m_old" && detached:
				e.waitFor("the detached partition's own table to be complete", 90*time.Second, func() bool {
					return e.manifest().Tables[key].Snapshot.Complete()
				})
				assertSinkEqualsSource(t, e, key)
			default:
				t.Errorf("after %s: the manifest captures %s beside the root", name, key)
			}
		}
		loaded = sourceCount(t, e, "m")
		stopLoad = startPartitionLoad(t, e, &next)
	}

	// 1. Next month's partition, created ahead, then written to.
	e.exec(`CREATE TABLE m_2026_02 PARTITION OF m FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')`)
	e.exec(`INSERT INTO m SELECT g, DATE '2026-02-01' + (g % 28), 'feb ' || g FROM generate_series(2001, 2100) g`)
	waitEqual("a new partition")

	// 2. A table loaded outside the capture, attached with its rows.
	e.exec(`CREATE SCHEMA staging`)
	e.exec(`CREATE TABLE staging.m_2026_03 (LIKE m INCLUDING ALL)`)
	e.exec(`INSERT INTO staging.m_2026_03 SELECT g, DATE '2026-03-01' + (g % 31), 'mar ' || g FROM generate_series(3001, 3050) g`)
	e.exec(`ALTER TABLE m ATTACH PARTITION staging.m_2026_03 FOR VALUES FROM ('2026-03-01') TO ('2026-04-01')`)
	waitEqual("an attached partition with rows")

	// 3. A partition detached (its rows leave the root), then 4. one dropped.
	e.exec(`ALTER TABLE m DETACH PARTITION m_old`)
	detached = true
	waitEqual("a detached partition")
	e.exec(`DROP TABLE m_2026_02`)
	waitEqual("a dropped partition")

	// The load goes on over the changed partitions, then the end state.
	e.waitFor("the load to write after the last step", 30*time.Second, func() bool { return sourceCount(t, e, "m") > loaded })
	stopLoad()
	e.waitCaughtUp(90 * time.Second)
	assertSinkEqualsSource(t, e, "public.m")
	d.stop()
	s.check()
}

// TestSubPartitions: a root partitioned by range, its partitions by list;
// new sub-partitions stream under the root.
func TestSubPartitions(t *testing.T) {
	waitBound(t)
	e := newEnv(t, envOptions{extraYAML: "backfill:\n  discover_interval_sec: 1\n"})
	e.exec(`CREATE TABLE ev (id bigint, d date NOT NULL, region text NOT NULL, v int, PRIMARY KEY (id, d, region)) PARTITION BY RANGE (d)`)
	e.exec(`CREATE TABLE ev_2026 PARTITION OF ev FOR VALUES FROM ('2026-01-01') TO ('2027-01-01') PARTITION BY LIST (region)`)
	e.exec(`CREATE TABLE ev_2026_eu PARTITION OF ev_2026 FOR VALUES IN ('eu')`)
	e.exec(`INSERT INTO ev SELECT g, DATE '2026-03-01', 'eu', g FROM generate_series(1, 300) g`)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	e.exec(`CREATE TABLE ev_2026_us PARTITION OF ev_2026 FOR VALUES IN ('us')`)
	e.exec(`INSERT INTO ev SELECT g, DATE '2026-04-01', 'us', g FROM generate_series(301, 400) g`)
	e.exec(`CREATE TABLE ev_2027 PARTITION OF ev FOR VALUES FROM ('2027-01-01') TO ('2028-01-01') PARTITION BY LIST (region)`)
	e.exec(`CREATE TABLE ev_2027_eu PARTITION OF ev_2027 FOR VALUES IN ('eu')`)
	e.exec(`INSERT INTO ev SELECT g, DATE '2027-02-01', 'eu', g FROM generate_series(401, 450) g`)
	e.exec(`UPDATE ev SET v = v + 1000 WHERE id % 10 = 0`)
	e.waitCaughtUp(90 * time.Second)
	select {
	case <-d.done:
		t.Fatalf("pg-cdc start exited %d:\n%s", d.exitCode(), lines(withoutDebug(d.out.String()), 20))
	default:
	}
	assertSinkEqualsSource(t, e, "public.ev")
	if n := len(e.manifest().Tables); n != 1 {
		t.Errorf("the manifest holds %d tables, want the root alone", n)
	}
	d.stop()
	s.check()
}

// startPartitionLoad inserts rows into m's January partition and updates
// seeded ones, about every 5 ms, until the function it returns is called;
// it returns once the load has written, so a step always runs under it,
// and the stop function fails t if the load failed.
func startPartitionLoad(t *testing.T, e *env, next *atomic.Int64) (stop func()) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), e.url)
	if err != nil {
		t.Fatalf("the load: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var written atomic.Int64
	var failed atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			id := next.Add(1)
			for _, q := range []struct {
				sql string
				arg int64
			}{
				{`INSERT INTO m VALUES ($1, DATE '2026-01-15', 'load')`, id},
				{`UPDATE m SET v = v || '+' WHERE id = $1 AND d = DATE '2026-01-01' + ($1 % 31)::int`, id%1000 + 1},
			} {
				if _, err := conn.Exec(ctx, q.sql, q.arg); err != nil {
					if ctx.Err() == nil {
						failed.Store(err)
					}
					return
				}
			}
			written.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	e.waitFor("the load to write", 30*time.Second, func() bool { return written.Load() >= 10 || failed.Load() != nil })
	return func() {
		cancel()
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			t.Errorf("the load: %v", err)
		}
	}
}

// sinkRowCount is the number of rows pg-cdc query counts in table's
// current state.
func sinkRowCount(t *testing.T, e *env, table string) int64 {
	t.Helper()
	schema, name, _ := strings.Cut(table, ".")
	code, out := e.run("query", "--format", "csv", fmt.Sprintf(`SELECT count(*) FROM "%s"."%s"`, schema, name))
	if code != 0 {
		return -1
	}
	var n int64
	fields := strings.Fields(out)
	if len(fields) > 0 {
		fmt.Sscanf(fields[len(fields)-1], "%d", &n)
	}
	return n
}

func sourceCount(t *testing.T, e *env, table string) int64 {
	t.Helper()
	var n int64
	if err := e.conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
