// Command pgcdc-bench is what `make bench` runs (issue 3): it starts a
// throwaway PostgreSQL, creates the workloads, measures pg-cdc against the
// reference clients of package bench, alternating them run by run, and
// writes BENCHMARKS.md.
//
// Measurements, in order:
//
//   - Backlog drain (W1–W4, and W6: pgbench's TPC-B-like mix, pgbench.go):
//     for each repetition, pg-cdc is initialised and a bare-client slot
//     (and slots for pg_recvlogical and for a bare client asking pgoutput
//     for binary values, --pgoutput-binary) is created, all before
//     the backlog is written with every consumer off, so every consumer
//     decodes exactly the same WAL. A non-transactional logical message after
//     the backlog marks its end. Then, in an order that rotates from one
//     repetition to the next, each consumer drains its own slot: the bare
//     client (bench.Drain) and pg_recvlogical until the marker, pg-cdc start
//     until the manifest holds every backlog row (then SIGTERM).
//   - Snapshot (W5): pg-cdc init on a large table against raw COPY to a
//     counter on one connection (binary: the ceiling; text: context).
//   - Compaction: pg-cdc compact of a table of --compact-rows rows, snapshot
//     base plus streamed updates and deletes, then once more on its result
//     plus new deltas (compact.go).
//   - Live lag: pg-cdc start while W1 runs at a fixed rate.
//   - A CPU and allocation profile of pg-cdc draining W1.
//   - Read path (issue 15): pg-cdc query over a base and delta epochs
//     against DuckDB over a pre-merged copy, as of a middle epoch, its peak
//     RSS, and the history log's bytes at one flush a second (read.go).
//   - Serve under load (issue 16): pg-cdc serve answering 32 clients over
//     REST and MCP while pg-cdc start streams and compacts (serve.go).
//   - Soak (issue 29), only when named (--only soak): pg-cdc start at its
//     defaults with a flush a second and the Iceberg catalog under a
//     steady workload for --soak-duration, sampled every 10 s; growth
//     ratios against the criteria, SVG charts beside the report,
//     and the sink compared with the source at the end by an independent
//     reader, DuckDB over the files the manifest names (soak.go,
//     soak_oracle.go). With --soak-kill, kill mode: SIGKILL and a restart
//     every interval, kills aimed at compactions, and an outside sampler
//     of the slot's confirmed LSN against the manifest (soak_kill.go).
//
// Every consumer runs as a child process, so wall time, CPU time and peak
// RSS come from the same place (wait4's rusage) for all of them. The
// subcommands "drain" and "copy" are those children for the Go clients.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

type options struct {
	bin          string
	out          string
	dir          string
	keep         bool
	reps         int
	rows         int
	txnRows      int
	wideRows     int
	wideBytes    int
	snapshotRows int
	full         bool
	only         string
	flushSec     int
	lagDuration  time.Duration
	lagRate      int
	profile      bool
	recvlogical  bool
	port         int
	compare      string
	profileDir   string
	// pgoutputBinary adds a bare client that asks for binary values.
	pgoutputBinary bool
	wideRandom     bool
	// compactRows is the table pg-cdc compact folds; compactMemory its
	// compaction.memory_budget_bytes (0: pg-cdc's default).
	compactRows   int
	compactMemory int64
	// pgbenchScale, pgbenchTxns and pgbenchReps size W6: pgbench -i -s,
	// the backlog's transactions over all clients, its repetitions.
	pgbenchScale int
	pgbenchTxns  int
	pgbenchReps  int
	// readRows, readEpochs and readMeta size the read path (read.go): the
	// table, its rounds of changes, the history-metadata window.
	readRows   int
	readEpochs int
	readMeta   time.Duration
	// serveRows, serveClients, serveDuration and serveCompaction size the
	// serve-under-load section (serve.go).
	serveRows       int
	serveClients    int
	serveDuration   time.Duration
	serveCompaction time.Duration
	// serveMaxConcurrent is serve.max_concurrent (pg-cdc's default 4).
	serveMaxConcurrent int
	// serveRate is serve.rate_limit per principal (burst twice that).
	serveRate int
	// catalogRows and catalogVersions size the catalog publisher's cost
	// (catalog.go): the drained backlog, the versions published in process.
	catalogRows, catalogVersions int
	// soakDuration, soakTables, soakRate and soakRows size the soak
	// (soak.go): how long the workload runs, its tables, its changes a
	// second, the rows each table is seeded with.
	soakDuration                   time.Duration
	soakTables, soakRate, soakRows int
	// soakKill is kill mode's interval between kills (0: the default
	// soak, no kills).
	soakKill time.Duration
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "drain":
			os.Exit(childDrain(os.Args[2:]))
		case "copy":
			os.Exit(childCopy(os.Args[2:]))
		case "engine", "duckdb", "merge":
			os.Exit(childRead(os.Args[1], os.Args[2:]))
		}
	}
	var o options
	flag.StringVar(&o.bin, "bin", "bin/pg-cdc", "the pg-cdc binary to measure")
	flag.StringVar(&o.out, "out", "BENCHMARKS.md", "the report to write")
	flag.StringVar(&o.dir, "dir", "", "working directory (default: a new one under the temp dir, removed at the end)")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory (cluster, sinks, logs, profiles)")
	flag.IntVar(&o.reps, "reps", 5, "repetitions of each measurement")
	flag.IntVar(&o.rows, "rows", 1_000_000, "rows of W1 (inserts), W2 (updates) and W3 (one transaction)")
	flag.IntVar(&o.txnRows, "txn-rows", 1000, "rows per transaction in W1, W2 and W4")
	flag.IntVar(&o.wideRows, "wide-rows", 100_000, "rows of W4 (wide rows)")
	flag.IntVar(&o.wideBytes, "wide-bytes", 8192, "text bytes per W4 row")
	flag.BoolVar(&o.wideRandom, "wide-random", false, "W4 texts of random hex (incompressible) instead of English words")
	flag.IntVar(&o.snapshotRows, "snapshot-rows", 2_000_000, "rows of the W5 snapshot table (--full: 10,000,000)")
	flag.IntVar(&o.compactRows, "compact-rows", 1_000_000, "rows of the table pg-cdc compact folds (--full: 10,000,000)")
	flag.Int64Var(&o.compactMemory, "compact-memory", 0, "compaction.memory_budget_bytes for pg-cdc compact (0: pg-cdc's default)")
	flag.IntVar(&o.pgbenchScale, "pgbench-scale", 10, "pgbench -i scale of W6 (100,000 pgbench_accounts rows each)")
	flag.IntVar(&o.pgbenchTxns, "pgbench-txns", 75_000, "TPC-B-like transactions of the W6 backlog, over its 4 clients (4 changes each)")
	flag.IntVar(&o.pgbenchReps, "pgbench-reps", 3, "repetitions of W6 (at most --reps): its backlog takes the longest to write and drain")
	flag.IntVar(&o.readRows, "read-rows", 1_000_000, "rows of the read path's table (issue 15)")
	flag.IntVar(&o.readEpochs, "read-epochs", 10, "rounds of changes (delta epochs) on the read path's table")
	flag.DurationVar(&o.readMeta, "read-meta-duration", 90*time.Second, "how long the history-metadata workload runs at one flush a second (0: skip)")
	flag.IntVar(&o.serveRows, "serve-rows", 500_000, "rows of the serve-under-load table (issue 16)")
	flag.IntVar(&o.serveClients, "serve-clients", 32, "concurrent clients of the serve-under-load section")
	flag.DurationVar(&o.serveDuration, "serve-duration", 60*time.Second, "how long the serve-under-load clients run")
	flag.DurationVar(&o.serveCompaction, "serve-compaction", 20*time.Second, "compaction.interval of pg-cdc start during the serve-under-load section")
	flag.IntVar(&o.serveRate, "serve-rate", 6, "serve.rate_limit per principal of the serve-under-load section (rate_burst twice it): two principals at 6/s stay below what 2 cores answer of this mix, so overload is told with 429, not queued into 503")
	flag.IntVar(&o.serveMaxConcurrent, "serve-max-concurrent", 4, "serve.max_concurrent of the serve-under-load section (pg-cdc's default: 4)")
	flag.IntVar(&o.catalogRows, "catalog-rows", 500_000, "rows of the backlog drained with and without the catalog publisher (issue 17)")
	flag.IntVar(&o.catalogVersions, "catalog-versions", 360, "manifest versions the catalog publisher publishes in process (issue 17)")
	flag.DurationVar(&o.soakDuration, "soak-duration", 10*time.Minute, "how long the soak's workload runs (--full: 1h unless set)")
	flag.IntVar(&o.soakTables, "soak-tables", 10, "tables of the soak")
	flag.IntVar(&o.soakRate, "soak-rate", 200, "changes per second of the soak's steady workload")
	flag.IntVar(&o.soakRows, "soak-rows", 20_000, "rows each soak table is seeded with")
	flag.DurationVar(&o.soakKill, "soak-kill", 0, "kill mode: SIGKILL pg-cdc start every this long during the soak and restart it at once, every other kill aimed at a compaction, with an outside LSN sampler (0: off; e.g. 2m)")
	flag.BoolVar(&o.full, "full", false, "the issue's full sizes: a 10M-row snapshot table and a 10M-row compaction, a 1 h soak")
	flag.StringVar(&o.only, "only", "", "comma-separated subset: w1,w2,w3,w4,w6,w5,compact,lag,read,serve,catalog,soak (default all but soak, which runs only when named)")
	flag.IntVar(&o.flushSec, "flush-interval", 1, "pg-cdc flush.interval_sec (and standby_interval_sec) for the runs")
	flag.DurationVar(&o.lagDuration, "lag-duration", 30*time.Second, "how long the live-lag load runs")
	flag.IntVar(&o.lagRate, "lag-rate", 20_000, "rows per second of the live-lag load (in --txn-rows transactions)")
	flag.BoolVar(&o.profile, "profile", true, "profile one extra pg-cdc W1 drain (CPU and allocations)")
	flag.BoolVar(&o.recvlogical, "recvlogical", true, "also time pg_recvlogical, when installed, as context")
	flag.IntVar(&o.port, "port", 0, "PostgreSQL port (default: a free one)")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write a CPU profile of every pg-cdc run into this directory (investigation)")
	flag.BoolVar(&o.pgoutputBinary, "pgoutput-binary", true, "also drain every backlog with a bare client asking pgoutput for binary values (issue 4 item 7)")
	flag.StringVar(&o.compare, "compare", "", "a second pg-cdc binary to drain every backlog too, alternating with --bin (A/B of a change)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "pgcdc-bench: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if o.full {
		o.snapshotRows = max(o.snapshotRows, 10_000_000)
		o.compactRows = max(o.compactRows, 10_000_000)
		soakSet := false
		flag.Visit(func(f *flag.Flag) { soakSet = soakSet || f.Name == "soak-duration" })
		if !soakSet {
			o.soakDuration = time.Hour
		}
	}
	if o.soakDuration < 30*time.Second || o.soakTables < 1 || o.soakRate < 1 || o.soakRows < 100 {
		fmt.Fprintln(os.Stderr, "pgcdc-bench: --soak-duration must be ≥ 30s, --soak-tables and --soak-rate ≥ 1, --soak-rows ≥ 100")
		os.Exit(2)
	}
	if o.soakKill != 0 && (o.soakKill < soakMinKillEvery || o.soakKill >= o.soakDuration) {
		fmt.Fprintf(os.Stderr, "pgcdc-bench: --soak-kill must be 0 (off) or at least %s and shorter than --soak-duration (%s), so that at least one kill happens\n", soakMinKillEvery, o.soakDuration)
		os.Exit(2)
	}
	if o.reps < 1 || o.rows < o.txnRows || o.txnRows < 1 || o.wideRows < o.txnRows || o.compactRows < 100 || o.pgbenchScale < 1 || o.pgbenchTxns < pgbenchClients || o.pgbenchReps < 1 || o.readRows < 1000 || o.readEpochs < 1 || o.serveRows < 1000 || o.serveClients < 1 || o.serveMaxConcurrent < 1 || o.serveRate < 1 || o.catalogRows < o.txnRows || o.catalogVersions < 2 {
		fmt.Fprintln(os.Stderr, "pgcdc-bench: --reps must be ≥ 1, the row counts at least --txn-rows and --compact-rows at least 100; --pgbench-scale and --pgbench-reps ≥ 1, --pgbench-txns ≥ 4; --read-rows ≥ 1000, --read-epochs ≥ 1; --serve-rows ≥ 1000, --serve-clients ≥ 1")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "pgcdc-bench: FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("pgcdc-bench: wrote %s in %s\n", o.out, time.Since(started).Round(time.Second))
}
