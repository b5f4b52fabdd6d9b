package postgres

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

func (e *env) publicationTables(pub string) []string {
	e.t.Helper()
	ctx := testCtx(e.t)
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1`, pub)
	if err != nil {
		e.t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

func TestEnsurePublication(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(
		`CREATE SCHEMA "My Schema"`,
		`CREATE TABLE "My Schema"."Odd ""name""" (id int PRIMARY KEY)`,
		`CREATE TABLE public.a (id int PRIMARY KEY)`,
		`CREATE TABLE public.b (id int PRIMARY KEY)`,
		`CREATE TABLE public.parted (id int PRIMARY KEY) PARTITION BY RANGE (id)`,
		`CREATE TABLE public.parted_1 PARTITION OF public.parted FOR VALUES FROM (0) TO (100)`,
	)
	pub := "Pub " + t.Name()
	odd := cdc.TableID{Schema: "My Schema", Name: `Odd "name"`}
	a := cdc.TableID{Schema: "public", Name: "a"}
	b := cdc.TableID{Schema: "public", Name: "b"}
	parted := cdc.TableID{Schema: "public", Name: "parted"}

	if err := e.db.EnsurePublication(ctx, pub, []cdc.TableID{odd, a}); err != nil {
		t.Fatal(err)
	}
	want := []string{`My Schema.Odd "name"`, "public.a"}
	if got := e.publicationTables(pub); !reflect.DeepEqual(got, want) {
		t.Fatalf("tables = %q, want %q", got, want)
	}
	if err := e.db.EnsurePublication(ctx, pub, []cdc.TableID{odd, a}); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if err := e.db.EnsurePublication(ctx, pub, []cdc.TableID{a}); err != nil {
		t.Fatalf("subset: %v", err)
	}
	if got := e.publicationTables(pub); !reflect.DeepEqual(got, want) {
		t.Fatalf("after re-runs: tables = %q, want %q", got, want)
	}

	if err := e.db.EnsurePublication(ctx, pub, []cdc.TableID{a, b, parted}); err != nil {
		t.Fatal(err)
	}
	want = []string{`My Schema.Odd "name"`, "public.a", "public.b", "public.parted"}
	if got := e.publicationTables(pub); !reflect.DeepEqual(got, want) {
		t.Fatalf("after adding: tables = %q, want %q", got, want)
	}
	if got := e.queryString(`SELECT pubviaroot::text FROM pg_publication WHERE pubname = $1`, pub); got != "true" {
		t.Errorf("publish_via_partition_root = %s", got)
	}

	// A partitioned table added to an existing publication without
	// publish_via_partition_root turns it on.
	e.exec(`CREATE PUBLICATION plain FOR TABLE public.a`)
	if err := e.db.EnsurePublication(ctx, "plain", []cdc.TableID{parted}); err != nil {
		t.Fatal(err)
	}
	if got := e.publicationTables("plain"); !reflect.DeepEqual(got, []string{"public.a", "public.parted"}) {
		t.Errorf("plain: tables = %q", got)
	}

	e.exec(`CREATE PUBLICATION inserts_only FOR TABLE public.a WITH (publish = 'insert')`)
	err := e.db.EnsurePublication(ctx, "inserts_only", []cdc.TableID{a})
	if !errors.Is(err, ErrPreflight) || !strings.Contains(cdc.HintOf(err), `ALTER PUBLICATION "inserts_only" SET (publish = 'insert, update, delete, truncate')`) {
		t.Errorf("inserts_only: %v (hint %q)", err, cdc.HintOf(err))
	}

	e.exec(`CREATE PUBLICATION everything FOR ALL TABLES`)
	if err := e.db.EnsurePublication(ctx, "everything", []cdc.TableID{a, b}); err != nil {
		t.Errorf("all tables: %v", err)
	}

	if err := e.db.EnsurePublication(ctx, "p2", []cdc.TableID{{Schema: "public", Name: "missing"}}); err == nil {
		t.Error("missing table: no error")
	}

	for i := 0; i < 2; i++ {
		if err := e.db.DropPublication(ctx, pub); err != nil {
			t.Fatalf("drop %d: %v", i, err)
		}
	}
	if got := e.queryString(`SELECT count(*)::text FROM pg_publication WHERE pubname = $1`, pub); got != "0" {
		t.Error("publication not dropped")
	}
}

func TestSlotInfoAndDrop(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	if err := e.db.EnsurePublication(ctx, "pub", []cdc.TableID{{Schema: "public", Name: "t"}}); err != nil {
		t.Fatal(err)
	}

	info, err := e.db.Slot(ctx, "no_such_slot")
	if err != nil || info.Exists {
		t.Fatalf("missing slot: %+v, %v", info, err)
	}
	if err := e.db.DropSlot(ctx, "no_such_slot"); err != nil {
		t.Errorf("drop missing slot: %v", err)
	}

	r := e.replConn()
	cp, _, err := r.CreateSlot(ctx, "info_slot")
	if err != nil {
		t.Fatal(err)
	}
	info, err = e.db.Slot(ctx, "info_slot")
	if err != nil {
		t.Fatal(err)
	}
	dbName := e.queryString("SELECT current_database()")
	if !info.Exists || info.Plugin != "pgoutput" || info.Database != dbName || info.Active ||
		info.ConfirmedFlushLSN != cp || info.RestartLSN == 0 || info.RestartLSN > cp ||
		info.WALStatus != "reserved" || info.RetainedBytes < 0 || info.Lost() {
		t.Errorf("slot = %+v (consistent point %s)", info, cp)
	}

	if err := r.StartReplication(ctx, "info_slot", "pub", cp); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "slot active", func() bool {
		info, err = e.db.Slot(ctx, "info_slot")
		return err == nil && info.Active
	})
	if info.ActivePID == 0 {
		t.Errorf("active slot without pid: %+v", info)
	}
	err = e.db.DropSlot(ctx, "info_slot")
	if err == nil || !strings.Contains(err.Error(), "active for PID") {
		t.Fatalf("drop active slot: %v", err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "slot inactive", func() bool {
		info, err = e.db.Slot(ctx, "info_slot")
		return err == nil && !info.Active
	})
	if err := e.db.DropSlot(ctx, "info_slot"); err != nil {
		t.Fatalf("drop: %v", err)
	}
	if info, _ := e.db.Slot(ctx, "info_slot"); info.Exists {
		t.Error("slot still exists")
	}
}

func TestPreflightWalLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a dedicated cluster")
	}
	c := pgtest.New(t)
	ctx := testCtx(t)
	url := c.URL("postgres")
	e := &env{t: t, url: url}
	e.exec(`ALTER SYSTEM SET wal_level = 'replica'`)
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := Connect(ctx, StaticURL(url))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Preflight(ctx, PreflightTarget{Provider: ProviderAuto, Publication: "p", Slot: "s"})
	if !errors.Is(err, ErrPreflight) || !strings.Contains(err.Error(), "wal_level is replica") {
		t.Fatalf("err = %v", err)
	}
	if h := cdc.HintOf(err); !strings.Contains(h, "ALTER SYSTEM SET wal_level = logical") || !strings.Contains(h, "restart PostgreSQL") {
		t.Errorf("hint = %q", h)
	}
}
