package capture

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/pgtest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// sqlString runs sql on url and returns the first column of the first row.
func sqlString(t *testing.T, ctx context.Context, url, sql string, args ...any) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var s string
	if err := conn.QueryRow(ctx, sql, args...).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// TestInitEmptyDatabase: init on a database with no table yet creates the
// publication (no table), the slot and a manifest with no table, which
// preflight, status and init run again accept. Tables created afterwards,
// a parent and its inheritance child, are then found by discovery and
// published one at a time, as the stream's discovery does, and again at
// every restart, without "relation is already member of publication".
func TestInitEmptyDatabase(t *testing.T) {
	url := pgtest.Shared(t).CreateDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sink := memory.New()
	c := &Capture{
		Source: postgres.StaticURL(url), Provider: postgres.ProviderAuto,
		Slot: "slot_init_empty", Publication: "pub_init_empty",
		Tables: Selection{Schemas: []string{"public"}},
		Sink:   sink, SinkName: "memory", StateDir: t.TempDir(), Workers: 1,
		Log: slog.New(slog.DiscardHandler),
	}
	preflight := func() PreflightReport {
		t.Helper()
		rep, err := c.Preflight(ctx, PreflightSink{Open: func(context.Context) (Sink, error) { return sink, nil }})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Failed > 0 {
			t.Errorf("preflight failed: %+v", rep.Checks)
		}
		return rep
	}
	checkStatus := func(name, want string) {
		t.Helper()
		seen := false
		for _, ch := range preflight().Checks {
			if ch.Name != name {
				continue
			}
			seen = true
			if ch.Status != want {
				t.Errorf("preflight %s = %+v, want %s", name, ch, want)
			}
		}
		if !seen {
			t.Errorf("preflight has no %s check, want one with status %s", name, want)
		}
	}

	// An explicit tables.include that matches nothing can never capture:
	// preflight fails and init is a usage error (exit 2), changing nothing.
	listed := *c
	listed.Tables.Include = []cdc.TableID{{Schema: "public", Name: "orders"}}
	rep, err := listed.Preflight(ctx, PreflightSink{Open: func(context.Context) (Sink, error) { return sink, nil }})
	if err != nil {
		t.Fatal(err)
	}
	tablesFailed := false
	for _, ch := range rep.Checks {
		tablesFailed = tablesFailed || ch.Name == "tables" && ch.Status == "fail"
	}
	if rep.Failed == 0 || !tablesFailed {
		t.Errorf("preflight with tables.include naming no table: %+v, want a failed tables check", rep.Checks)
	}
	if _, err := listed.Init(ctx); !errors.Is(err, cdc.ErrUsage) {
		t.Errorf("init with tables.include naming no table: %v, want a usage error", err)
	}
	if got := sqlString(t, ctx, url, `SELECT count(*)::text FROM pg_replication_slots WHERE slot_name = $1`, c.Slot); got != "0" {
		t.Errorf("slots after the refused init = %s, want 0", got)
	}

	checkStatus("tables", "warn")

	res, err := c.Init(ctx)
	if err != nil {
		t.Fatalf("init on an empty database: %v", err)
	}
	if res.Snapshot == nil || res.Snapshot.Tables != 0 || res.Snapshot.LSN == 0 {
		t.Fatalf("init = %+v", res)
	}
	var out bytes.Buffer
	res.WriteText(&out, c.Slot, c.SinkName)
	if !strings.Contains(out.String(), "no tables yet") {
		t.Errorf("init says %q", out.String())
	}
	m, _, err := manifest.Load(ctx, sink)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tables) != 0 || m.EndLSN != res.Snapshot.LSN || m.Source.Slot != c.Slot || m.Source.Publication != c.Publication {
		t.Errorf("manifest: %d tables, end LSN %s, source %+v", len(m.Tables), m.EndLSN, m.Source)
	}
	if got := sqlString(t, ctx, url, `SELECT plugin::text FROM pg_replication_slots WHERE slot_name = $1`, c.Slot); got != "pgoutput" {
		t.Errorf("slot plugin = %q", got)
	}
	if got := sqlString(t, ctx, url, `SELECT (SELECT count(*) FROM pg_publication WHERE pubname = $1 AND NOT puballtables AND pubviaroot)::text || ' ' ||
		(SELECT count(*) FROM pg_publication_tables WHERE pubname = $1)::text`, c.Publication); got != "1 0" {
		t.Errorf("publications, tables published = %s, want 1 0", got)
	}
	checkStatus("tables", "ok")
	st, err := c.Status(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	st.WriteText(&out, time.Now())
	if !strings.Contains(out.String(), "tables:    none yet") || strings.Contains(out.String(), "TABLE") {
		t.Errorf("status:\n%s", out.String())
	}

	// Init again: already initialized, nothing pending.
	res, err = c.Init(ctx)
	if err != nil || res.Already == nil || len(res.Pending) != 0 {
		t.Fatalf("init again = %+v, %v", res, err)
	}

	// The application creates its tables: a parent and its child.
	db, err := postgres.Connect(ctx, c.Source)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		`CREATE TABLE person (id int PRIMARY KEY, name text)`,
		`CREATE TABLE emp (salary int, PRIMARY KEY (id)) INHERITS (person)`,
		`INSERT INTO person VALUES (1, 'p')`, `INSERT INTO emp VALUES (2, 'e', 10)`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	res, err = c.Init(ctx)
	person, emp := cdc.TableID{Schema: "public", Name: "person"}, cdc.TableID{Schema: "public", Name: "emp"}
	if err != nil || res.Already == nil || !reflect.DeepEqual(res.Pending, []cdc.TableID{emp, person}) {
		t.Fatalf("init after the tables = %+v, %v", res, err)
	}

	// Discovery: both found, recorded, then published one at a time.
	f := c.Finder(db)
	found, err := f.NewTables(ctx, func(id cdc.TableID) bool { return m.Tables[id.String()] != nil })
	if err != nil || len(found) != 2 {
		t.Fatalf("new tables = %v, %v", found, err)
	}
	mc, err := manifest.Open(ctx, sink, manifest.Breaker{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Commit(ctx, func(m *manifest.Manifest) error {
		for _, mt := range found {
			m.Tables[mt.ID().String()] = mt
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, mt := range found {
		if err := f.Publish(ctx, []cdc.TableID{mt.ID()}); err != nil {
			t.Fatalf("publish %s: %v", mt.ID(), err)
		}
	}
	// Two restarts: the session publishes every backfilling table again.
	for i := 0; i < 2; i++ {
		if err := f.EnsurePublication(ctx, []cdc.TableID{person, emp}); err != nil {
			t.Fatalf("restart %d: %v", i+1, err)
		}
	}
	if got := sqlString(t, ctx, url, `SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_publication_rel r
		JOIN pg_publication p ON p.oid = r.prpubid JOIN pg_class c ON c.oid = r.prrelid WHERE p.pubname = $1`, c.Publication); got != "emp,person" {
		t.Errorf("publication members = %q", got)
	}
	checkStatus("publication", "ok")
}
