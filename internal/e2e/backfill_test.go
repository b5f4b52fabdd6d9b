package e2e

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// TestBackfillNewTableUnderLoad: a table created after init is in the watched
// schema, so start adds it to the manifest and the publication and backfills
// it in chunks of 200 rows, while two writers hammer the keys around the copy
// cursor (the manifest's last_key): updates that leave a TOASTed column
// unchanged, deletes, re-inserts, key changes, in transactions of one to
// three statements. The merged state must equal the source (no deleted row
// resurrected, no update lost, no TOAST value missing), and the slot is
// never confirmed past the manifest.
func TestBackfillNewTableUnderLoad(t *testing.T) {
	e := newEnv(t, envOptions{extraYAML: "backfill:\n  chunk_rows: 200\n  discover_interval_sec: 1\n"})
	e.exec(`CREATE TABLE small (id int PRIMARY KEY, v int)`)
	e.exec(`INSERT INTO small SELECT g, g FROM generate_series(1, 10) g`)
	e.mustRun("init")

	const rows = 6000
	e.exec(`CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL, pad text)`)
	// Every 20th row holds a value large and random enough to be TOASTed
	// out of line: an UPDATE that leaves it alone does not send it.
	e.exec(`INSERT INTO big SELECT g, 0, CASE WHEN g % 20 = 0 THEN
		(SELECT string_agg(md5(g::text || '-' || i::text), '') FROM generate_series(1, 80) i) END
		FROM generate_series(1, $1::int) g`, rows)

	s := e.startSampler()
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg     sync.WaitGroup
		txns   atomic.Int64
		hamErr = make(chan error, 2) // one per writer
	)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hammer(ctx, e, uint64(w), rows, &txns); err != nil && !errors.Is(err, context.Canceled) {
				hamErr <- err
			}
		}()
	}
	complete := func(table string) bool {
		mt := currentTable(e, table)
		return mt != nil && mt.Snapshot.State == manifest.SnapshotComplete
	}
	e.waitFor("the backfill of public.big to complete", 80*time.Second, func() bool { return complete("public.big") || len(hamErr) > 0 })
	cancel()
	wg.Wait()
	close(hamErr)
	if err := <-hamErr; err != nil {
		t.Fatalf("workload: %v", err)
	}

	// A table created while start runs is found, published and backfilled
	// without a restart; rows written after it was published arrive
	// through the stream.
	e.exec(`CREATE TABLE late (id bigint PRIMARY KEY, note text)`)
	e.exec(`INSERT INTO late SELECT g, 'before ' || g FROM generate_series(1, 1500) g`)
	e.waitFor("public.late in the manifest", 30*time.Second, func() bool { return currentTable(e, "public.late") != nil })
	e.exec(`UPDATE late SET note = 'updated' WHERE id % 7 = 0`)
	e.exec(`DELETE FROM late WHERE id % 11 = 0`)
	e.exec(`INSERT INTO late SELECT g, 'after ' || g FROM generate_series(1501, 1600) g`)
	e.waitFor("the backfill of public.late to complete", 30*time.Second, func() bool { return complete("public.late") })
	e.exec(`UPDATE late SET note = 'last' WHERE id % 13 = 0`)
	e.waitCaughtUp(60 * time.Second)
	// verify: an independent reader compares the backfilled tables with the
	// source under one snapshot while start runs.
	if code, out := e.run("verify", "--table", "public.big", "--table", "public.late"); code != 0 {
		t.Errorf("verify after the backfills exited %d:\n%s", code, out)
	}
	d.stop()
	s.check()

	m := e.manifest()
	snap := m.Tables["public.big"].Snapshot
	t.Logf("backfill: %d chunks, %d rows copied (estimate %d), %d hammer transactions, %d epochs",
		snap.Chunks, snap.RowsCopied, snap.RowsEstimate, txns.Load(), m.Epoch)
	if snap.Chunks < rows/200 || snap.LSN == 0 || snap.CompletedAt == nil {
		t.Errorf("backfill progress: %+v", snap)
	}
	if txns.Load() < 50 {
		t.Errorf("only %d hammer transactions ran during the backfill: the test proves little", txns.Load())
	}
	placed, moved := 0, 0
	for _, line := range strings.Split(d.out.String(), "\n") {
		if !strings.Contains(line, `msg="backfill chunk placed"`) {
			continue
		}
		placed++
		if _, after, ok := strings.Cut(line, "before_invisible_changes="); ok {
			n, _ := strconv.Atoi(strings.Fields(after)[0])
			moved += n
		}
	}
	t.Logf("%d chunks placed in this run, %d rows placed before a change their snapshot did not see", placed, moved)
	if placed == 0 {
		t.Error("no chunk placement logged")
	}
	assertSinkEqualsSource(t, e, "public.big", "public.small", "public.late")
}

// hammer runs transactions against the keys near the backfill's copy
// cursor until ctx ends.
func hammer(ctx context.Context, e *env, seed uint64, rows int, txns *atomic.Int64) error {
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rng := rand.New(rand.NewPCG(seed, 42))
	cursor := 0
	for n := 0; ctx.Err() == nil; n++ {
		if n%20 == 0 {
			cursor = copyCursor(e)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		failed := false
		for range 1 + rng.IntN(3) {
			// Mostly the next chunk or two, some just behind the cursor.
			id := max(1, cursor-50+rng.IntN(500))
			var sql string
			switch r := rng.IntN(10); {
			case r < 5:
				sql = `UPDATE big SET v = v + 1 WHERE id = $1` // pad unchanged (TOAST)
			case r < 7:
				sql = `DELETE FROM big WHERE id = $1`
			case r < 9:
				sql = `INSERT INTO big VALUES ($1, 100, NULL) ON CONFLICT (id) DO UPDATE SET v = big.v + 100`
			default:
				// A key change far past the table's end: the old key is
				// deleted, the new one written, its TOAST value unchanged.
				sql = `UPDATE big SET id = id + ` + strconv.Itoa(rows*10) + ` WHERE id = $1 AND id <= ` + strconv.Itoa(rows)
			}
			if _, err := tx.Exec(ctx, sql, id); err != nil {
				_ = tx.Rollback(context.Background())
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if !deadlocked(err) {
					return err
				}
				failed = true // the two writers deadlocked: this one gave way
				break
			}
		}
		if failed {
			continue
		}
		if err := tx.Commit(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if deadlocked(err) {
				continue
			}
			return err
		}
		txns.Add(1)
	}
	return ctx.Err()
}

// copyCursor is the backfill's last copied key of public.big, from the
// manifest (0 before the first chunk).
func copyCursor(e *env) int {
	mt := currentTable(e, "public.big")
	if mt == nil || len(mt.Snapshot.LastKey) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(mt.Snapshot.LastKey[0])
	return n
}

// currentTable is the table as the sink's manifest has it now, or nil (no
// manifest, or no such table). Safe from any goroutine: it never fails the
// test.
func currentTable(e *env, table string) *manifest.Table {
	data, err := e.manifestBytes()
	if err != nil {
		return nil
	}
	m, err := manifest.Decode(data)
	if err != nil {
		return nil
	}
	return m.Tables[table]
}

// deadlocked: the two writers took row locks in opposite orders and
// PostgreSQL rolled this transaction back, or a key change met a key a
// re-insert took back (unique violation): the transaction is dropped.
func deadlocked(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001" || pgErr.Code == "23505")
}

// TestBackfillResumesAfterKill: a backfill killed (kill -9, by the
// flush/after-manifest failpoint, so the manifest holds some chunks and the
// slot was not yet confirmed) resumes after the manifest's last_key: the
// restart starts after it, no chunk is counted twice (rows_copied ends
// equal to the table's rows, which the writes only update), and the merged
// state equals the source.
func TestBackfillResumesAfterKill(t *testing.T) {
	e := newEnv(t, envOptions{maxRows: 1000, extraYAML: "backfill:\n  chunk_rows: 500\n  discover_interval_sec: 0\n"})
	e.exec(`CREATE TABLE small (id int PRIMARY KEY)`)
	e.exec(`INSERT INTO small VALUES (1)`)
	e.mustRun("init")
	const rows = 20000
	e.exec(`CREATE TABLE r (id int PRIMARY KEY, v int NOT NULL)`)
	e.exec(`INSERT INTO r SELECT g, 0 FROM generate_series(1, $1::int) g`, rows)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		wg       sync.WaitGroup
		writeErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := pgx.Connect(ctx, e.url)
		if err != nil {
			writeErr = err
			return
		}
		defer conn.Close(context.Background())
		rng := rand.New(rand.NewPCG(3, 3))
		for ctx.Err() == nil {
			if _, err := conn.Exec(ctx, `UPDATE r SET v = v + 1 WHERE id = $1`, 1+rng.IntN(rows)); err != nil && ctx.Err() == nil {
				writeErr = err
				return
			}
		}
	}()

	s := e.startSampler()
	d := e.start("PGCDC_FAILPOINTS=flush/after-manifest=kill@4")
	if code := d.wait(60 * time.Second); code != 137 {
		t.Fatalf("expected the failpoint to kill the daemon (exit 137), got %d:\n%s", code, lines(withoutDebug(d.out.String()), 20))
	}
	at := e.manifest().Tables["public.r"].Snapshot
	if at.State != manifest.SnapshotBackfilling || len(at.LastKey) != 1 || at.Chunks == 0 {
		t.Fatalf("after the kill: snapshot %+v, want a backfill under way", at)
	}
	d = e.start()
	e.waitFor("the backfill of public.r to complete", 60*time.Second, func() bool {
		mt := currentTable(e, "public.r")
		return mt != nil && mt.Snapshot.State == manifest.SnapshotComplete
	})
	cancel()
	wg.Wait()
	if writeErr != nil {
		t.Fatalf("writes: %v", writeErr)
	}
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	s.check()
	if !strings.Contains(d.out.String(), `msg="backfill started" table=public.r after=[`+at.LastKey[0]+`]`) {
		t.Errorf("the restart did not resume after last_key %s:\n%s", at.LastKey[0], lines(withoutDebug(d.out.String()), 20))
	}
	end := e.manifest().Tables["public.r"].Snapshot
	if end.RowsCopied != rows {
		t.Errorf("rows_copied = %d after the resumed backfill, want %d (killed at %d rows, %d chunks)", end.RowsCopied, rows, at.RowsCopied, at.Chunks)
	}
	t.Logf("killed after %d chunks (%d rows, last key %s); completed with %d chunks", at.Chunks, at.RowsCopied, at.LastKey[0], end.Chunks)
	assertSinkEqualsSource(t, e, "public.r", "public.small")
}

// TestBackfillRefusesKeylessTable: a table without a primary key in a
// watched schema cannot be backfilled (there is no key to place rows by):
// start stops with exit 16, naming the table and the fix, before streaming.
func TestBackfillRefusesKeylessTable(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.exec(`CREATE TABLE keyed (id int PRIMARY KEY)`)
	e.exec(`INSERT INTO keyed VALUES (1)`)
	e.mustRun("init")
	e.exec(`CREATE TABLE nokey (v int)`)
	e.exec(`ALTER TABLE nokey REPLICA IDENTITY FULL`)
	d := e.start()
	if code := d.wait(60 * time.Second); code != 16 {
		t.Fatalf("start exited %d, want 16:\n%s", code, lines(withoutDebug(d.out.String()), 20))
	}
	out := d.out.String()
	for _, want := range []string{"public.nokey has no primary key", "ADD PRIMARY KEY", "tables.exclude"} {
		if !strings.Contains(out, want) {
			t.Errorf("start output lacks %q:\n%s", want, lines(withoutDebug(out), 20))
		}
	}
	if currentTable(e, "public.nokey") != nil {
		t.Error("the refused table was recorded in the manifest")
	}
}
