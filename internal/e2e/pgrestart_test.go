package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

// TestPostgresRestartAndCrash restarts PostgreSQL, then crashes it
// (SIGKILL of the postmaster), under a running daemon and workload. The
// daemon must ride both out with its bounded retries and lose nothing.
func TestPostgresRestartAndCrash(t *testing.T) {
	waitBound(t)
	cluster := pgtest.New(t)
	e := newEnv(t, envOptions{cluster: cluster})
	seed(t, e, 50, 50)
	e.mustRun("init")
	d := e.start()

	ctx := context.Background()
	for i, disrupt := range []func() error{
		func() error { return cluster.Restart(ctx) },
		func() error {
			if err := cluster.Kill(); err != nil {
				return err
			}
			return cluster.Start(ctx)
		},
	} {
		before := e.manifest().EndLSN
		w := runWorkloadFor(e.url, int64(10+i), 3*time.Second)
		// Disrupt only once the daemon is streaming the workload.
		e.waitProgress(before, 60*time.Second)
		if err := disrupt(); err != nil {
			t.Fatalf("disrupt PostgreSQL: %v", err)
		}
		<-w.done // the workload fails when the server goes away; that is expected
		e.reconnect()
	}
	s := e.startSampler()
	w := runWorkloadFor(e.url, 20, 3*time.Second)
	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(120 * time.Second)
	d.stop()
	s.check()
	if !strings.Contains(d.out.String(), "retrying") {
		t.Errorf("the daemon never retried; did PostgreSQL really go away?\n%s", lines(d.out.String(), 20))
	}
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
}

// reconnect replaces the test's source connection after a server restart.
func (e *env) reconnect() {
	e.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, e.url)
		if err == nil {
			e.conn.Close(ctx)
			e.conn = conn
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("reconnect: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
