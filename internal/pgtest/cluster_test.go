package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func query(t *testing.T, url, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func execSQL(t *testing.T, url, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestSharedSettings(t *testing.T) {
	c := Shared(t)
	if c2 := Shared(t); c2 != c {
		t.Fatal("Shared returned a second cluster")
	}
	for setting, want := range map[string]string{
		"wal_level":                 "logical",
		"logical_decoding_work_mem": "64kB",
		"synchronous_commit":        "on",
		"fsync":                     "off",
		"max_replication_slots":     "32",
		"listen_addresses":          "127.0.0.1",
	} {
		if got := query(t, c.URL("postgres"), "SHOW "+setting); got != want {
			t.Errorf("SHOW %s = %q, want %q", setting, got, want)
		}
	}
	if _, err := os.Stat(c.LogPath()); err != nil {
		t.Errorf("log file: %v", err)
	}
}

func TestCreateDatabaseDropsSlotsAndDatabase(t *testing.T) {
	c := Shared(t)
	var name string
	var repl *pgconn.PgConn
	t.Run("inner", func(t *testing.T) {
		url := c.CreateDatabase(t)
		name = query(t, url, "SELECT current_database()")
		query(t, url, "SELECT pg_create_logical_replication_slot('inactive_slot', 'pgoutput')::text")
		query(t, url, "SELECT pg_create_logical_replication_slot('active_slot', 'test_decoding')::text")

		// An active walsender on a slot must not keep the database alive.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		repl, err = pgconn.Connect(ctx, url+"&replication=database")
		if err != nil {
			t.Fatalf("replication connect: %v", err)
		}
		repl.Frontend().Send(&pgproto3.Query{String: "START_REPLICATION SLOT active_slot LOGICAL 0/0"})
		if err := repl.Frontend().Flush(); err != nil {
			t.Fatalf("start replication: %v", err)
		}
		waitFor(t, func() bool {
			return query(t, c.URL("postgres"), "SELECT count(*)::text FROM pg_replication_slots WHERE active") == "1"
		})
	})
	defer repl.Close(context.Background())
	if got := query(t, c.URL("postgres"), "SELECT count(*)::text FROM pg_database WHERE datname = '"+name+"'"); got != "0" {
		t.Errorf("database %s still exists", name)
	}
	if got := query(t, c.URL("postgres"), "SELECT count(*)::text FROM pg_replication_slots"); got != "0" {
		t.Errorf("%s replication slots left", got)
	}
}

func TestRestartAndKill(t *testing.T) {
	c := New(t)
	url := c.CreateDatabase(t)
	query(t, url, "SELECT 1::text")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if err := c.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	query(t, url, "SELECT 1::text")

	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	execSQL(t, url, "CREATE TABLE t AS SELECT 42 AS v")

	pid, err := c.postmasterPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if running(pid) {
		t.Fatalf("postmaster %d still runs after Kill", pid)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start after kill: %v", err)
	}
	// Committed before the crash, so recovered from the WAL.
	if got := query(t, url, "SELECT v::text FROM t"); got != "42" {
		t.Errorf("after crash recovery: v = %q, want 42", got)
	}
}

func TestNoPostgres(t *testing.T) {
	_, err := StartCluster(context.Background(), Options{BinDir: t.TempDir()})
	if !errors.Is(err, ErrNoPostgres) {
		t.Fatalf("err = %v, want ErrNoPostgres", err)
	}
}

func TestDatabaseName(t *testing.T) {
	c := &Cluster{}
	a := c.databaseName("TestX/sub-test with spaces and a very long name that goes on and on")
	b := c.databaseName("TestX/sub-test with spaces and a very long name that goes on and on")
	if a == b || len(a) > 63 {
		t.Fatalf("names %q, %q: want distinct and at most 63 bytes", a, b)
	}
	for _, r := range a {
		if !(r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')) {
			t.Fatalf("name %q has %q", a, r)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recordTB records Skipf and Fatalf instead of ending the goroutine.
type recordTB struct {
	testing.TB
	skipped, failed bool
}

func (r *recordTB) Helper()               {}
func (r *recordTB) Skipf(string, ...any)  { r.skipped = true }
func (r *recordTB) Fatalf(string, ...any) { r.failed = true }

func TestSkipOrFatal(t *testing.T) {
	noPG := fmt.Errorf("start: %w", ErrNoPostgres)
	for _, tt := range []struct {
		ci           string
		err          error
		skip, failed bool
	}{
		{"", noPG, true, false},
		{"false", noPG, true, false},
		{"true", noPG, false, true},
		{"1", noPG, false, true},
		{"", errors.New("initdb failed"), false, true},
	} {
		t.Setenv("CI", tt.ci)
		r := &recordTB{TB: t}
		skipOrFatal(r, tt.err)
		if r.skipped != tt.skip || r.failed != tt.failed {
			t.Errorf("CI=%q err=%v: skipped %t failed %t", tt.ci, tt.err, r.skipped, r.failed)
		}
	}
}
