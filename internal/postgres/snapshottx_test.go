package postgres

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestSnapshotTx reads a table under BeginSnapshot's snapshot while other
// transactions commit around it, and checks that Current says which of them
// the reads saw.
func TestSnapshotTx(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY, v text)`, `INSERT INTO t VALUES (1, 'one'), (2, 'two')`)
	tbl := e.table("public.t")
	before := e.xidOf(`UPDATE t SET v = 'uno' WHERE id = 1`)

	// A transaction in progress when the snapshot is taken, committed after.
	open, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close(context.Background())
	tx, err := open.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var inProgress cdc.XID
	if err := tx.QueryRow(ctx, `INSERT INTO t VALUES (3, 'three') RETURNING pg_current_xact_id()::text::bigint`).Scan(&inProgress); err != nil {
		t.Fatal(err)
	}

	s, err := e.db.BeginSnapshot(ctx, []cdc.TableID{tbl.ID}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	after := e.xidOf(`INSERT INTO t VALUES (4, 'four')`)
	// A TRUNCATE would empty the table for the snapshot (it is not
	// MVCC-safe): it waits for the snapshot's lock.
	if _, err := open.Exec(ctx, `SET lock_timeout = '200ms'; TRUNCATE t`); err == nil || !strings.Contains(err.Error(), "lock timeout") {
		t.Errorf("TRUNCATE beside the snapshot: %v; want a lock timeout", err)
	}

	snap := s.Current()
	for _, c := range []struct {
		name string
		xid  cdc.XID
		want bool
	}{
		{"committed before", before, true},
		{"in progress at the snapshot", inProgress, false},
		{"begun after", after, false},
	} {
		if got := snap.Visible(c.xid); got != c.want {
			t.Errorf("%s (xid %d): Visible = %v in %s, want %v", c.name, c.xid, got, snap, c.want)
		}
	}

	// Two reads see the same snapshot.
	for range 2 {
		var got []string
		n, err := s.CopyTable(ctx, tbl, func(vals []cdc.Datum) error {
			got = append(got, string(vals[0].Text)+"="+string(vals[1].Text))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got) // heap order: the update moved row 1
		if want := []string{"1=uno", "2=two"}; n != 2 || !reflect.DeepEqual(got, want) {
			t.Errorf("under the snapshot: %d rows %v, want %v", n, got, want)
		}
	}

	// The watermark is a committed transaction after everything above.
	lsn, err := e.db.EmitMessage(ctx, "pg-cdc.test", "watermark")
	if err != nil {
		t.Fatal(err)
	}
	current, err := cdc.ParseLSN(e.queryString(`SELECT pg_current_wal_lsn()::text`))
	if err != nil {
		t.Fatal(err)
	}
	if lsn == 0 || lsn > current {
		t.Errorf("EmitMessage returned %s; the WAL is at %s", lsn, current)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = s.CopyTable(ctx, tbl, func([]cdc.Datum) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("copy after Close: %v; want the snapshot to be gone", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// The lock went with the transaction.
	if _, err := open.Exec(ctx, `SET lock_timeout = '5s'; TRUNCATE t`); err != nil {
		t.Errorf("TRUNCATE after Close: %v", err)
	}
}

// TestSnapshotTxLockTimeout: a table that a pending TRUNCATE holds cannot
// be read under a snapshot; BeginSnapshot gives up after its lock timeout
// and names the tables.
func TestSnapshotTxLockTimeout(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE "Odd name" (id int PRIMARY KEY)`, `CREATE TABLE u (id int PRIMARY KEY)`)
	holder, err := pgx.Connect(ctx, e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `TRUNCATE "Odd name"`); err != nil {
		t.Fatal(err)
	}
	ids := []cdc.TableID{{Schema: "public", Name: "u"}, {Schema: "public", Name: "Odd name"}}
	start := time.Now()
	_, err = e.db.BeginSnapshot(ctx, ids, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "lock public.u, public.Odd name in ACCESS SHARE mode") || !strings.Contains(err.Error(), "lock timeout") {
		t.Errorf("BeginSnapshot beside a TRUNCATE: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("BeginSnapshot waited %s", d)
	}
}

// xidOf runs one statement in a transaction of its own and returns that
// transaction's 64-bit id.
func (e *env) xidOf(sql string) cdc.XID {
	e.t.Helper()
	ctx := testCtx(e.t)
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var text string
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sql); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&text)
	})
	if err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	x, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		e.t.Fatal(err)
	}
	return cdc.XID(x)
}
