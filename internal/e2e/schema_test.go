package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// evolvingLoad runs small transactions on evolving(id, a, …) until ctx
// ends: inserts, updates and deletes that name only id and a, the columns
// no step drops.
func evolvingLoad(ctx context.Context, url string, seedN int64) *background {
	b := &background{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			b.err = err
			return
		}
		defer pool.Close()
		rng := rand.New(rand.NewPCG(uint64(seedN), 11))
		next := 100_000 * seedN
		for ctx.Err() == nil {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				for range 1 + rng.IntN(4) {
					var err error
					switch p := rng.IntN(10); {
					case p < 5:
						next++
						_, err = tx.Exec(ctx, `INSERT INTO evolving (id, a) VALUES ($1, $2)`, next, rng.IntN(1000))
					case p < 8:
						_, err = tx.Exec(ctx, `UPDATE evolving SET a = a + 1 WHERE id = (SELECT id FROM evolving ORDER BY id OFFSET $1 LIMIT 1)`, rng.IntN(300))
					default:
						_, err = tx.Exec(ctx, `DELETE FROM evolving WHERE id = (SELECT id FROM evolving ORDER BY id OFFSET $1 LIMIT 1)`, rng.IntN(300))
					}
					if err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil && ctx.Err() == nil {
				b.err = err
				return
			}
			if err == nil {
				b.committed++
			}
		}
	}()
	return b
}

// TestSchemaEvolutionUnderLoad changes tables while workloads write them and
// the daemon streams, without a restart: ADD COLUMN with a DEFAULT (rows
// that existed before read it, although PostgreSQL wrote no WAL for them),
// ADD COLUMN without one, ADD COLUMN inside a transaction that writes rows
// before and after it, DROP COLUMN, an add + drop in one transaction, a
// dropped name added again, a label added to an enum a column uses, int →
// bigint, int → text, a rename, and an ADD COLUMN inside a streamed
// transaction between its rows.
// After each step the merged state equals the source.
func TestSchemaEvolutionUnderLoad(t *testing.T) {
	e := newEnv(t, envOptions{})
	seed(t, e, 100, 200)
	e.exec(`CREATE TYPE mood AS ENUM ('sad', 'ok')`)
	e.exec(`CREATE TABLE evolving (id bigint PRIMARY KEY, a int, b text DEFAULT 'bee', m mood DEFAULT 'ok', n int)`)
	e.exec(`INSERT INTO evolving SELECT g, g, 'seed ' || g, CASE WHEN g % 2 = 0 THEN 'sad'::mood END, g * 3 FROM generate_series(1, 300) g`)
	e.mustRun("init")
	d := e.start()
	defer d.stop()

	tables := []string{"public.evolving", "public.orders", "public.customers"}
	steps := []struct {
		name string
		sql  string
		then string // run after sql, in its own transaction
	}{
		{"add column with a default", `ALTER TABLE evolving ADD COLUMN c int NOT NULL DEFAULT 42`, ""},
		{"add column with a default to a table with TOASTed values", `ALTER TABLE orders ADD COLUMN priority text DEFAULT 'normal'`, ""},
		{"add column without a default", `ALTER TABLE customers ADD COLUMN tier smallint`, ""},
		{"add column between rows of one transaction", `BEGIN;
			INSERT INTO evolving (id, a) VALUES (-1, -1);
			ALTER TABLE evolving ADD COLUMN e timestamptz DEFAULT '2026-01-02 03:04:05+00';
			INSERT INTO evolving (id, a, e) VALUES (-2, -2, '2027-01-01 00:00:00+00');
			UPDATE evolving SET a = a * 10 WHERE id = 1;
			COMMIT`, ""},
		{"drop column", `ALTER TABLE evolving DROP COLUMN b`, ""},
		{"add and drop in one transaction", `BEGIN;
			ALTER TABLE evolving ADD COLUMN f text DEFAULT 'eff';
			ALTER TABLE evolving DROP COLUMN c;
			INSERT INTO evolving (id, a) VALUES (-3, -3);
			COMMIT`, ""},
		{"add a dropped name again", `ALTER TABLE evolving ADD COLUMN b text DEFAULT 'new bee'`, ""},
		{"enum add value", `ALTER TYPE mood ADD VALUE 'great' BEFORE 'ok'`,
			`UPDATE evolving SET m = 'great' WHERE id IN (SELECT id FROM evolving ORDER BY id LIMIT 5); INSERT INTO evolving (id, a, m) VALUES (-5, -5, 'great')`},
		{"int to bigint", `ALTER TABLE evolving ALTER COLUMN a TYPE bigint`, `UPDATE evolving SET a = 5000000000 WHERE id = 2`},
		{"int to text", `ALTER TABLE evolving ALTER COLUMN n TYPE text`,
			`UPDATE evolving SET n = 'n' || id WHERE id IN (SELECT id FROM evolving ORDER BY id DESC LIMIT 3)`},
		{"rename", `ALTER TABLE evolving RENAME COLUMN m TO feeling`,
			`UPDATE evolving SET feeling = 'sad' WHERE id IN (SELECT id FROM evolving ORDER BY id DESC LIMIT 3)`},
		// Streamed (logical_decoding_work_mem is 64kB) and spilled: the
		// Relation arrives inside a stream block, between buffered rows.
		{"add column inside a large streamed transaction", `BEGIN;
			INSERT INTO evolving (id, a) SELECT -1000000 - g, g FROM generate_series(1, 20000) g;
			ALTER TABLE evolving ADD COLUMN h int DEFAULT 8;
			INSERT INTO evolving (id, a, h) SELECT -2000000 - g, g, g FROM generate_series(1, 20000) g;
			UPDATE evolving SET h = 9 WHERE id = -1000001;
			COMMIT`, ""},
	}
	for i, st := range steps {
		ctx, cancel := context.WithCancel(context.Background())
		load := evolvingLoad(ctx, e.url, int64(i+1))
		orders := runWorkloadFor(e.url, int64(i+1), 1500*time.Millisecond)
		time.Sleep(500 * time.Millisecond)
		e.exec(st.sql)
		if st.then != "" {
			e.exec(st.then)
		}
		time.Sleep(500 * time.Millisecond)
		cancel()
		<-load.done
		if load.err != nil {
			t.Fatalf("step %q: evolving workload: %v", st.name, load.err)
		}
		orders.wait(t)
		touchAll(e)
		e.exec(`DELETE FROM customers WHERE id = -1; DELETE FROM orders WHERE id = -1; DELETE FROM items WHERE order_id = -1`)
		e.waitCaughtUp(60 * time.Second)
		select {
		case <-d.done:
			t.Fatalf("step %q: the daemon exited %d:\n%s", st.name, d.exitCode(), lines(withoutDebug(d.out.String()), 20))
		default:
		}
		t.Logf("step %q: %d evolving transactions", st.name, load.committed)
		assertSinkEqualsSource(t, e, tables...)
		if t.Failed() {
			t.Fatalf("after step %q the merged state differs from the source", st.name)
		}
	}

	m := e.manifest()
	mt := m.Tables["public.evolving"]
	var got []string
	for _, sv := range mt.Schemas {
		var cols []string
		for _, c := range sv.Columns {
			s := fmt.Sprintf("%s#%d", c.Name, c.FieldID)
			if (c.Name == "a" || c.Name == "n") && c.PGType != "integer" {
				s += ":" + c.PGType
			}
			if c.MissingValue != nil {
				s += "=" + *c.MissingValue
			}
			cols = append(cols, s)
		}
		got = append(got, strings.Join(cols, " "))
	}
	want := []string{
		"id#1 a#2 b#3 m#4 n#5",
		"id#1 a#2 b#3 m#4 n#5 c#6=42",
		"id#1 a#2 b#3 m#4 n#5 c#6=42 e#7=2026-01-02 03:04:05+00",
		"id#1 a#2 m#4 n#5 c#6=42 e#7=2026-01-02 03:04:05+00",
		"id#1 a#2 m#4 n#5 e#7=2026-01-02 03:04:05+00 f#8=eff",
		"id#1 a#2 m#4 n#5 e#7=2026-01-02 03:04:05+00 f#8=eff b#9=new bee",
		"id#1 a#2:bigint m#4 n#5 e#7=2026-01-02 03:04:05+00 f#8=eff b#9=new bee",
		"id#1 a#2:bigint m#4 n#5:text e#7=2026-01-02 03:04:05+00 f#8=eff b#9=new bee",
		"id#1 a#2:bigint feeling#4 n#5:text e#7=2026-01-02 03:04:05+00 f#8=eff b#9=new bee",
		"id#1 a#2:bigint feeling#4 n#5:text e#7=2026-01-02 03:04:05+00 f#8=eff b#9=new bee h#10=8",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("schema versions of public.evolving:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The label added to the enum is in the manifest: refreshed in place in
	// the version it was first written under, and carried into later ones.
	for _, sv := range mt.Schemas[len(mt.Schemas)-5:] {
		for _, c := range sv.Columns {
			if c.FieldID == 4 && strings.Join(c.EnumLabels, ",") != "sad,great,ok" {
				t.Errorf("schema version %d column %s: enum labels %v, want [sad great ok]", sv.Version, c.Name, c.EnumLabels)
			}
		}
	}

	// Readers that merge with package merge see the same: dump prints the
	// newest version's columns, with the default on rows from before it.
	out := e.mustRun("dump", "--table", "public.evolving", "--format", "csv")
	if !strings.Contains(out, "eff") || strings.Contains(out, "seed ") {
		t.Errorf("dump after the changes:\n%s", lines(out, 5))
	}
	// Compaction folds files of every version into a base of the newest;
	// the merged state stays equal to the source, and a column added after
	// the base reads its default on the base's rows.
	e.mustRun("compact")
	assertSinkEqualsSource(t, e, tables...)
	e.exec(`ALTER TABLE evolving ADD COLUMN g int DEFAULT -7`)
	e.exec(`INSERT INTO evolving (id, a) VALUES (-4, -4)`)
	e.waitCaughtUp(60 * time.Second)
	assertSinkEqualsSource(t, e, tables...)
	// verify compares the source with the merged state of every table.
	if code, out := e.run("verify"); code != 0 {
		t.Errorf("verify after the changes: exit %d:\n%s", code, lines(withoutDebug(out), 20))
	}
	if !strings.Contains(d.out.String(), "schema version committed") {
		t.Errorf("no schema change was logged:\n%s", lines(withoutDebug(d.out.String()), 10))
	}
}

// TestSchemaChangeStopsWithoutLoss: a change this version does not follow
// (a type change readers cannot cast: text → int with USING) must stop the
// daemon with its exit code and a message naming the table, after
// everything before the change is durable and nothing after it was
// confirmed.
func TestSchemaChangeStopsWithoutLoss(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.exec(`CREATE TABLE evolving (id int PRIMARY KEY, v text)`)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	e.exec(`INSERT INTO evolving SELECT g, 'before' FROM generate_series(1, 100) g`)
	e.waitCaughtUp(60 * time.Second)
	e.exec(`ALTER TABLE evolving ALTER COLUMN v TYPE int USING length(v)`)
	e.exec(`INSERT INTO evolving VALUES (101, 7)`)
	code := d.wait(60 * time.Second)
	if code != 16 {
		t.Fatalf("exit %d after an unsupported type change, want 16:\n%s", code, lines(withoutDebug(d.out.String()), 10))
	}
	if out := d.out.String(); !strings.Contains(out, "public.evolving") || !strings.Contains(out, "changed type") {
		t.Errorf("the error does not name the table and the change:\n%s", lines(withoutDebug(out), 10))
	}
	s.check()
	m := e.manifest()
	var rows int64
	for _, dl := range m.Tables["public.evolving"].Deltas {
		rows += dl.Rows
	}
	if rows != 100 {
		t.Errorf("the manifest holds %d change rows, want the 100 from before the change", rows)
	}
	// A restart replays the same change and stops the same way: terminal.
	if code, out := e.run("start"); code != 16 {
		t.Errorf("restart after a schema change: exit %d, want 16:\n%s", code, lines(withoutDebug(out), 10))
	}
}

// TestKillAfterSchemaChangeCommitted kills the daemon after the manifest
// holding new schema versions is written and before its position is
// confirmed: the restart replays transactions from before and after the
// changes, each Relation describing the table as it was, and binds them to
// the versions the manifest already holds instead of making new ones.
func TestKillAfterSchemaChangeCommitted(t *testing.T) {
	e := newEnv(t, envOptions{flushInterval: 2})
	e.exec(`CREATE TABLE evolving (id bigint PRIMARY KEY, a int, b text)`)
	e.exec(`INSERT INTO evolving SELECT g, g, 'seed' FROM generate_series(1, 50) g`)
	e.mustRun("init")
	d := e.start("PGCDC_FAILPOINTS=flush/after-manifest=kill@2")
	e.exec(`INSERT INTO evolving VALUES (101, 1, 'first epoch')`)
	e.waitCaughtUp(60 * time.Second)
	// One epoch: a row under the first version, ADD COLUMN with a row,
	// DROP COLUMN with a row.
	e.exec(`INSERT INTO evolving VALUES (102, 2, 'old shape')`)
	e.exec(`ALTER TABLE evolving ADD COLUMN c int DEFAULT 5`)
	e.exec(`INSERT INTO evolving VALUES (103, 3, 'added', 33)`)
	e.exec(`ALTER TABLE evolving DROP COLUMN b`)
	e.exec(`INSERT INTO evolving VALUES (104, 4, 44)`)
	if code := d.wait(60 * time.Second); code != 137 {
		t.Fatalf("expected the failpoint to kill the daemon (exit 137), got %d:\n%s", code, lines(withoutDebug(d.out.String()), 20))
	}
	before := len(e.manifest().Tables["public.evolving"].Schemas)
	if before != 3 {
		t.Fatalf("the killed flush committed %d schema versions, want 3", before)
	}
	d = e.start()
	defer d.stop()
	e.exec(`INSERT INTO evolving VALUES (105, 5, 55)`)
	e.waitCaughtUp(60 * time.Second)
	if n := len(e.manifest().Tables["public.evolving"].Schemas); n != 3 {
		t.Errorf("after the replay the table has %d schema versions, want still 3", n)
	}
	assertSinkEqualsSource(t, e, "public.evolving")
}

// TestReconcile: an ADD COLUMN … DEFAULT on a table nobody writes is
// recorded by the background reconciler before any row changes, so a
// VACUUM FULL that then rewrites the table (and clears the catalog's
// record of the default, pg_attribute.attmissingval) loses nothing: the
// rows from before the column read its default in the merged state, as
// PostgreSQL shows them. `pg-cdc reconcile` does the same on request,
// while start is stopped too (the request waits in the slot), and
// reports the result.
func TestReconcile(t *testing.T) {
	e := newEnv(t, envOptions{flushInterval: 1})
	e.exec(`CREATE TABLE quiet (id bigint PRIMARY KEY, v text)`)
	e.exec(`INSERT INTO quiet SELECT g, 'seed' FROM generate_series(1, 20) g`)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start("PGCDC_SCHEMA_RECONCILE_INTERVAL_SEC=1")
	defer d.stop()

	e.exec(`ALTER TABLE quiet ADD COLUMN w int DEFAULT 7`)
	e.waitFor("the background reconciler to record the added column", 30*time.Second, func() bool {
		return e.manifest().Tables["public.quiet"].SchemaVersion == 2
	})
	// Without the recorded version, the Relation that the next change
	// brings would describe w with no default left in the catalog.
	e.exec(`VACUUM FULL quiet`)
	e.exec(`INSERT INTO quiet VALUES (21, 'after', 8)`)
	e.waitCaughtUp(60 * time.Second)
	if n := e.manifest().Tables["public.quiet"].SchemaVersion; n != 2 {
		t.Errorf("schema version %d after the row change, want still 2", n)
	}
	assertSinkEqualsSource(t, e, "public.quiet")
	d.stop()

	// On request, with start stopped: the request is written, start
	// records it when it reads it.
	e.exec(`ALTER TABLE quiet RENAME COLUMN v TO label`)
	code, out := e.run("reconcile", "--table", "public.quiet", "--wait", "0")
	if code != 0 || !strings.Contains(out, "public.quiet: columns") || !strings.Contains(out, "requested at LSN") {
		t.Fatalf("reconcile with start stopped: exit %d:\n%s", code, out)
	}
	code, out = e.run("reconcile", "--wait", "2s")
	if code == 0 || !strings.Contains(out, "is 'pg-cdc start' running?") {
		t.Errorf("reconcile --wait with no stream: exit %d, want a failure that says why:\n%s", code, out)
	}
	d = e.start("PGCDC_SCHEMA_RECONCILE_INTERVAL_SEC=0")
	defer d.stop()
	code, out = e.run("reconcile")
	if code != 0 || !strings.Contains(out, "public.quiet: recorded (schema version 3)") {
		t.Fatalf("reconcile with start running: exit %d:\n%s", code, out)
	}
	mt := e.manifest().Tables["public.quiet"]
	if got := mt.CurrentSchema(); got.Columns[1].Name != "label" || got.Columns[1].FieldID != 2 {
		t.Errorf("after the rename: column 2 %q field id %d, want label, 2 (a rename keeps the field)", got.Columns[1].Name, got.Columns[1].FieldID)
	}
	code, out = e.run("reconcile")
	if code != 0 || !strings.Contains(out, "nothing to reconcile") {
		t.Errorf("reconcile with nothing changed: exit %d:\n%s", code, out)
	}
	e.exec(`UPDATE quiet SET label = 'renamed' WHERE id <= 5`)
	e.waitCaughtUp(60 * time.Second)
	assertSinkEqualsSource(t, e, "public.quiet")
	d.stop()

	// A change the stream does not follow is requested once, refused with
	// a log line, and not requested again every round.
	d = e.start("PGCDC_SCHEMA_RECONCILE_INTERVAL_SEC=1", "PGCDC_LOG_LEVEL=debug")
	defer d.stop()
	e.exec(`ALTER TABLE quiet ALTER COLUMN label TYPE int USING length(label)`)
	e.waitFor("the refusal to be logged", 30*time.Second, func() bool {
		return strings.Contains(d.out.String(), "reconcile: a schema change this version does not follow")
	})
	rounds := func() int { return strings.Count(d.out.String(), "reconcile: nothing to request") }
	after := rounds()
	e.waitFor("three more reconcile rounds", 30*time.Second, func() bool { return rounds() >= after+3 })
	if n := strings.Count(d.out.String(), "msg=\"reconcile: requested\""); n != 1 {
		t.Errorf("the unsupported change was requested %d times, want once:\n%s", n, lines(withoutDebug(d.out.String()), 20))
	}
	if e.manifest().Tables["public.quiet"].SchemaVersion != 3 {
		t.Errorf("an unsupported change was recorded")
	}
	s.check()
}
