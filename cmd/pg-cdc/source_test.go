package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/pgtest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// TestSourceURLResolvedPerConnection: the password in source.postgres.url is
// ${TEST_SOURCE_PW} (not PGCDC_…: that prefix is the overrides', and an
// unknown one is an error); after it changes (on the server and in the environment)
// the next physical connections, of a DB and for replication, sign in with
// the new value without the configuration being loaded again, and the old
// value is refused (so a URL expanded once would fail this test).
func TestSourceURLResolvedPerConnection(t *testing.T) {
	const role = "pgcdc_pw"
	c := pgtest.NewWith(t, pgtest.Options{
		// Before pgtest's trust lines: this role must give its password.
		HBA: []string{"host all " + role + " 127.0.0.1/32 scram-sha-256"},
	})
	adminURL := c.CreateDatabase(t)
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alter := func(sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	alter("CREATE ROLE " + role + " LOGIN REPLICATION PASSWORD 'password-A'")

	t.Setenv("TEST_SOURCE_PW", "password-A")
	file := fmt.Sprintf("source:\n  postgres:\n    url: postgres://%s:${TEST_SOURCE_PW}@127.0.0.1:%d%s?sslmode=disable\n", role, c.Port, u.Path)
	cfg, err := config.Parse([]byte(file), "pg-cdc.yml", os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	spec, err := sourceConn(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Connect(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	repl, err := postgres.ConnectReplication(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := repl.Close(ctx); err != nil {
		t.Fatal(err)
	}

	alter("ALTER ROLE " + role + " PASSWORD 'password-B'")
	t.Setenv("TEST_SOURCE_PW", "password-B")

	// The same DB: its idle connection is busy in a transaction, so the
	// next call opens a new one.
	snap, err := db.BeginSnapshot(ctx, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CurrentXID(ctx); err != nil {
		t.Fatalf("new connection of the same DB after the change: %v", err)
	}
	snap.Close()
	db2, err := postgres.Connect(ctx, spec)
	if err != nil {
		t.Fatalf("new DB after the change: %v", err)
	}
	db2.Close()
	repl, err = postgres.ConnectReplication(ctx, spec)
	if err != nil {
		t.Fatalf("new replication connection after the change: %v", err)
	}
	if err := repl.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The old value is refused now, without showing it.
	t.Setenv("TEST_SOURCE_PW", "password-A")
	if db3, err := postgres.Connect(ctx, spec); err == nil {
		db3.Close()
		t.Fatal("the old password still signs in")
	} else if strings.Contains(err.Error(), "password-A") {
		t.Fatalf("error shows the password: %v", err)
	}
	if r, err := postgres.ConnectReplication(ctx, spec); err == nil {
		_ = r.Close(ctx)
		t.Fatal("replication: the old password still signs in")
	}

	// A variable unset since load fails the connection, naming it.
	os.Unsetenv("TEST_SOURCE_PW") // t.Setenv restores it after the test
	if _, err := postgres.Connect(ctx, spec); err == nil || !strings.Contains(err.Error(), "environment variable TEST_SOURCE_PW is not set") {
		t.Fatalf("unset variable: %v", err)
	}
}

// TestSourceConnIAM: iam_auth gives every connection a password source; no
// region anywhere is a configuration error (exit 2). No AWS call is made:
// tokens are minted only when a connection is opened.
func TestSourceConnIAM(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	file := "source:\n  postgres:\n    url: postgres://pgcdc@db.example.com/app?sslmode=verify-full\n    iam_auth: true\n"
	cfg, err := config.Parse([]byte(file), "pg-cdc.yml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = sourceConn(ctx, cfg)
	if err == nil || exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "source.postgres.region") {
		t.Fatalf("no region: %v (exit %d), want a configuration error", err, exitCode(err))
	}
	cfg.Source.Postgres.Region = "eu-west-1"
	spec, err := sourceConn(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Password == nil {
		t.Fatal("iam_auth: no password source")
	}
	cfg.Source.Postgres.IAMAuth, cfg.Source.Postgres.Region = false, ""
	if spec, err = sourceConn(ctx, cfg); err != nil || spec.Password != nil {
		t.Fatalf("without iam_auth: %v, password source %t", err, spec.Password != nil)
	}
}
