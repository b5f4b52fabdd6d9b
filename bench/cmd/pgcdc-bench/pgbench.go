package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// W6 is pgbench's built-in TPC-B-like script: each transaction updates one
// row of pgbench_accounts, pgbench_tellers and pgbench_branches and inserts
// one into pgbench_history, so it is four changes.
const (
	tpcbChangesPerTxn = 4
	// pgbenchClients and pgbenchThreads: four sessions contend on the ten
	// branch rows of scale 10 as a small OLTP mix would, while two threads
	// keep pgbench's own client from needing more than the 2 cores have.
	pgbenchClients = 4
	pgbenchThreads = 2
)

// pgbenchTables are what pg-cdc captures in W6 (pgbench_history has no
// primary key and REPLICA IDENTITY DEFAULT: captured insert-only, which is
// all pgbench does to it).
var pgbenchTables = []string{"public.pgbench_accounts", "public.pgbench_tellers", "public.pgbench_branches", "public.pgbench_history"}

// pgbenchPath finds pgbench: PostgreSQL 15's, else the one on PATH; "" when
// there is none.
func pgbenchPath() string {
	for _, p := range []string{"/usr/lib/postgresql/15/bin/pgbench", "pgbench"} {
		if found, err := exec.LookPath(p); err == nil {
			return found
		}
	}
	return ""
}

// pgbenchWorkload is W6: pgbench -i at scale before any slot exists, then
// txns TPC-B-like transactions as the backlog.
func pgbenchWorkload(o options) workload {
	perClient := o.pgbenchTxns / pgbenchClients
	txns := perClient * pgbenchClients
	return workload{
		key: "w6",
		title: fmt.Sprintf("W6 pgbench TPC-B-like, scale %d, %s txns on %d clients (%s changes)",
			o.pgbenchScale, count(txns), pgbenchClients, count(txns*tpcbChangesPerTxn)),
		rows:   txns * tpcbChangesPerTxn,
		tables: pgbenchTables,
		reps:   min(o.reps, o.pgbenchReps),
		prepare: func(ctx context.Context, c *pgx.Conn) error {
			return pgbenchInit(ctx, c, o.pgbenchScale)
		},
		backlog: func(ctx context.Context, c *pgx.Conn) error {
			return pgbenchRun(ctx, c, perClient)
		},
	}
}

// pgbenchURL is c's database as a libpq URI, which pgbench takes as its
// database name.
func pgbenchURL(c *pgx.Conn) string {
	cfg := c.Config()
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

// pgbenchInit creates and fills the pgbench tables (logged: an unlogged
// table is not decoded), with their primary keys, then checkpoints so no
// checkpoint falls inside a timed drain.
func pgbenchInit(ctx context.Context, c *pgx.Conn, scale int) error {
	bin := pgbenchPath()
	if bin == "" {
		return fmt.Errorf("pgbench not found (PostgreSQL's client tools)")
	}
	out, _, err := runProc(10*time.Minute, bin, []string{"-i", "-q", "-s", strconv.Itoa(scale), pgbenchURL(c)}, nil, "")
	if err != nil {
		return fmt.Errorf("pgbench -i -s %d: %w\n%s", scale, err, tail(out, 10))
	}
	_, err = c.Exec(ctx, "CHECKPOINT")
	return err
}

// pgbenchRun runs perClient transactions on each client and checks that all
// of them committed, against pgbench's report and against the source itself
// (one pgbench_history row per transaction), so W6's row count is what the
// WAL holds.
func pgbenchRun(ctx context.Context, c *pgx.Conn, perClient int) error {
	bin := pgbenchPath()
	if bin == "" {
		return fmt.Errorf("pgbench not found (PostgreSQL's client tools)")
	}
	args := []string{"-n", "-b", "tpcb-like", "-M", "prepared", "-t", strconv.Itoa(perClient),
		"-c", strconv.Itoa(pgbenchClients), "-j", strconv.Itoa(pgbenchThreads), pgbenchURL(c)}
	out, _, err := runProc(10*time.Minute, bin, args, nil, "")
	if err != nil {
		return fmt.Errorf("pgbench %v: %w\n%s", args[:len(args)-1], err, tail(out, 10))
	}
	done, planned, err := pgbenchProcessed(out)
	if err != nil {
		return err
	}
	want := perClient * pgbenchClients
	if done != want || planned != want {
		return fmt.Errorf("pgbench processed %d of %d transactions, want %d:\n%s", done, planned, want, tail(out, 10))
	}
	var history int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pgbench_history").Scan(&history); err != nil {
		return fmt.Errorf("count pgbench_history: %w", err)
	}
	if history != want {
		return fmt.Errorf("pgbench_history holds %d rows after %d transactions", history, want)
	}
	return nil
}

var pgbenchProcessedRE = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)/(\d+)\s*$`)

// pgbenchProcessed reads "number of transactions actually processed: D/P"
// from pgbench's report: D committed out of P planned.
func pgbenchProcessed(out string) (done, planned int, err error) {
	m := pgbenchProcessedRE.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("pgbench's report has no \"number of transactions actually processed\" line:\n%s", tail(out, 10))
	}
	if done, err = strconv.Atoi(m[1]); err != nil {
		return 0, 0, fmt.Errorf("pgbench's processed count %q: %w", m[1], err)
	}
	if planned, err = strconv.Atoi(m[2]); err != nil {
		return 0, 0, fmt.Errorf("pgbench's planned count %q: %w", m[2], err)
	}
	return done, planned, nil
}
