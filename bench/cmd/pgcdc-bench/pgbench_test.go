package main

import (
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// pgbench 15's report of a W6 backlog.
const pgbenchReport = `pgbench (15.10 (Debian 15.10-0+deb12u1))
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 10
query mode: prepared
number of clients: 4
number of threads: 2
maximum number of tries: 1
number of transactions per client: 18750
number of transactions actually processed: {processed}
number of failed transactions: 0 (0.000%)
latency average = 1.712 ms
initial connection time = 4.071 ms
tps = 2336.187702 (without initial connection time)
`

func TestPgbenchProcessed(t *testing.T) {
	for _, tc := range []struct {
		line          string
		done, planned int
	}{
		{"75000/75000", 75000, 75000},
		{"74988/75000", 74988, 75000}, // clients that failed stop early
	} {
		done, planned, err := pgbenchProcessed(strings.Replace(pgbenchReport, "{processed}", tc.line, 1))
		if err != nil || done != tc.done || planned != tc.planned {
			t.Errorf("%s: got %d/%d, %v; want %d/%d", tc.line, done, planned, err, tc.done, tc.planned)
		}
	}
	// A run that never got to its report (connection refused, say).
	if _, _, err := pgbenchProcessed("pgbench: error: connection to server failed\n"); err == nil {
		t.Error("no report: want an error")
	}
	// The figure must be the whole line's, not a prefix of another line.
	if _, _, err := pgbenchProcessed("xnumber of transactions actually processed: 1/1\n"); err == nil {
		t.Error("a line that only contains the phrase: want an error")
	}
}

func TestDeltaTotals(t *testing.T) {
	delta := func(rows, bytes int64) manifest.Delta {
		return manifest.Delta{Rows: rows, Files: []manifest.File{{Rows: rows, Bytes: bytes}}}
	}
	m := &manifest.Manifest{Tables: map[string]*manifest.Table{
		"public.bench":            {Deltas: []manifest.Delta{delta(5, 50)}},
		"public.pgbench_accounts": {Deltas: []manifest.Delta{delta(10, 100), delta(20, 200)}},
		"public.pgbench_history":  {Deltas: []manifest.Delta{delta(30, 300)}},
	}}
	if rows, bytes := deltaTotals(m); rows != 5 || bytes != 50 {
		t.Errorf("default (the bench table): %d rows, %d bytes; want 5, 50", rows, bytes)
	}
	// A table with no delta yet (pgbench_tellers) counts zero.
	if rows, bytes := deltaTotals(m, pgbenchTables...); rows != 60 || bytes != 600 {
		t.Errorf("pgbench tables: %d rows, %d bytes; want 60, 600", rows, bytes)
	}
	if rows, _ := deltaTotals(nil, pgbenchTables...); rows != 0 {
		t.Errorf("no manifest: %d rows", rows)
	}
}
