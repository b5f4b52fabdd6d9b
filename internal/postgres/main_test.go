package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines leaked: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is one test's database on the shared cluster.
type env struct {
	t   *testing.T
	url string
	db  *DB
}

func newEnv(t *testing.T) *env {
	t.Helper()
	url := pgtest.Shared(t).CreateDatabase(t)
	db, err := Connect(testCtx(t), StaticURL(url))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(db.Close)
	return &env{t: t, url: url, db: db}
}

// testCtx is a context that ends with the test, bounded so a hang fails
// instead of stalling the run.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// exec runs statements on a plain connection of the test database.
func (e *env) exec(sqls ...string) {
	e.t.Helper()
	ctx := testCtx(e.t)
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			e.t.Fatalf("%s: %v", sql, err)
		}
	}
}

// queryString returns the first column of the first row as text.
func (e *env) queryString(sql string, args ...any) string {
	e.t.Helper()
	ctx := testCtx(e.t)
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var s string
	if err := conn.QueryRow(ctx, sql, args...).Scan(&s); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func (e *env) replConn() *ReplConn {
	e.t.Helper()
	r, err := ConnectReplication(testCtx(e.t), StaticURL(e.url))
	if err != nil {
		e.t.Fatalf("connect replication: %v", err)
	}
	e.t.Cleanup(func() {
		if err := r.Close(context.Background()); err != nil {
			e.t.Errorf("close replication connection: %v", err)
		}
	})
	return r
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
