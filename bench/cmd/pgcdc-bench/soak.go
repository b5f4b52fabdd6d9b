package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Soak (issue 29 item 5): pg-cdc start with every setting at its default
// except a flush a second, a filesystem sink, the metrics address and
// catalog.type iceberg (the embedded SQL catalog), so compaction runs as it
// does by default (compaction.interval 10 s: minor merges and major
// compactions on their thresholds) and the Iceberg publisher beside it. A
// steady mixed workload (mostly single-row updates, some inserts and
// deletes, in transactions of 1–7 statements over random tables, from two
// connections) runs on --soak-tables tables of --soak-rows seeded rows at
// --soak-rate changes a second for --soak-duration (1 h with --full).
//
// Every 10 s the harness samples: the flush duration histogram (p50 and
// p99 over the interval, from its bucket deltas), the manifest's bytes, the
// delta files per table (max and mean), the bytes under _pgcdc/ and
// _pgcdc/iceberg/, the daemon's RSS and CPU (per change over the
// interval), compactions by kind, the replication lag, and the latency of
// two pg-cdc query runs (count(*) and a filtered aggregate of one table).
// At the end the workload stops, the sink catches up with the source's WAL
// position, the daemon gets SIGTERM, and every table is compared with
// PostgreSQL by an independent reader: DuckDB over the Parquet files the
// manifest names, merged by soak_oracle.go, value by value. pg-cdc dump's
// CSV against PostgreSQL's COPY is compared too (pg-cdc's own reader).
//
// With --soak-kill the same soak runs in kill mode (soak_kill.go): SIGKILL
// and an immediate restart every interval, some kills aimed at
// compactions, and an outside sampler checking that the slot is never
// confirmed past the manifest's end LSN.
//
// The pass criteria: flush p50 and p99, manifest bytes, count(*)
// latency and RSS each grow at most 1.5× between minute 2 and the end;
// delta files per table stay ≤ 64 throughout. In kill mode they are
// reported but not judged: every restart resets the process they measure.
//
// The section runs only when named (--only soak): at 10 minutes it would
// make the default run longer by more than half.

const (
	soakDB    = "soak"
	soakEvery = 10 * time.Second
	// soakMaxTxn is the most statements in one transaction (1..7: 4 on
	// average).
	soakMaxTxn = 7
	// soakQueryTimeout bounds one sampled pg-cdc query (its own
	// query.timeout is a minute).
	soakQueryTimeout = 2 * time.Minute
	// soakGrowthLimit and soakDeltaLimit are the pass criteria.
	soakGrowthLimit = 1.5
	soakDeltaLimit  = 64
)

type soakResult struct {
	duration                  time.Duration // asked for
	tables, seedRows, rate    int
	settings                  string // the settings pg-cdc did not have at their defaults, as YAML
	init                      usage
	began                     time.Time
	samples                   []soakSample
	elapsed                   time.Duration // the workload's, as run
	changes, txns             int64
	updates, inserts, deletes int64 // rows affected
	misses                    int64 // statements that matched no row (a key deleted before)
	retried                   int64 // transactions that failed on a deadlock or serialization error and were skipped
	queryTable                string
	sqlCount, sqlFilter       string
	queryErrors               int
	lastQueryErr              string
	scrapeErrors              int
	stopLSN, endLSN           cdc.LSN
	caughtUp                  bool
	catchUp                   time.Duration
	final                     daemonMetrics // a scrape after the catch-up
	hwm                       int64         // the daemon's VmHWM before SIGTERM
	start                     usage         // the daemon's whole life
	stopErr                   string        // "" when it stopped cleanly
	verify                    []soakVerified
	charts                    []soakChartFile
	loadStart, loadEnd        string
	kill                      *soakKillResult // nil: the default soak
}

type soakSample struct {
	at      time.Duration // since the workload started
	life    int           // which pg-cdc start process (kill mode restarts it), from 0
	changes int64         // committed so far
	ok      bool          // the scrape succeeded
	m       daemonMetrics
	// deltaMax and deltaMean are over the tables of the scrape.
	deltaMax, deltaMean     float64
	metaBytes, icebergBytes int64
	rss                     int64
	cpu                     time.Duration // utime + stime so far
	countLat, filterLat     float64       // seconds; NaN when the query failed
}

// soakVerified is one table's end check, by two readers of the sink.
type soakVerified struct {
	table  string
	pgRows int
	// The independent reader: DuckDB over the files the manifest names
	// (soak_oracle.go), against PostgreSQL's rows value by value.
	duckRows   int
	duckEqual  bool
	duckDetail string // why not, when not equal: the first differing rows
	duckFiles  int
	dupChanges int64 // replayed change rows the merge folded (not a difference)
	// pg-cdc's own reader: pg-cdc dump's CSV against COPY's, byte for byte.
	dumpRows   int
	dumpEqual  bool
	dumpDetail string
}

func (v soakVerified) equal() bool { return v.duckEqual && v.dumpEqual }

type soakChartFile struct{ path, link, title string }

func soakTable(i int) string { return fmt.Sprintf("soak_%02d", i+1) }

func (h *harness) soak(ctx context.Context) (*soakResult, error) {
	o := h.o
	res := &soakResult{duration: o.soakDuration, tables: o.soakTables, seedRows: o.soakRows, rate: o.soakRate, loadStart: loadAvg()}
	res.queryTable = "public." + soakTable(0)
	res.sqlCount = "SELECT count(*) AS n FROM " + res.queryTable
	res.sqlFilter = "SELECT sum(a) AS s FROM " + res.queryTable + " WHERE id % 7 = 3"
	h.logf("soak: %d tables of %s rows, %d changes/s for %s", res.tables, count(res.seedRows), res.rate, res.duration)
	if o.soakKill > 0 {
		res.kill = &soakKillResult{every: o.soakKill}
		h.logf("soak: kill mode: SIGKILL and a restart every %s", o.soakKill)
	}

	c, err := h.soakDatabase(ctx, res)
	if err != nil {
		return nil, fmt.Errorf("source tables: %w", err)
	}
	defer c.Close(context.Background())
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r, err := h.soakConfig(res, fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, err
	}
	if _, res.init, err = h.initPGCDC(r); err != nil {
		return nil, fmt.Errorf("pg-cdc init: %w", err)
	}
	h.logf("soak: pg-cdc init in %s", res.init.Wall.Round(100*time.Millisecond))

	// Kill mode: the outside LSN sampler, from now (the manifest exists)
	// to the last stop.
	stopSampler := func() soakLSNResult { return soakLSNResult{} }
	if res.kill != nil {
		sc, err := pgx.Connect(ctx, h.cluster.URL(soakDB))
		if err != nil {
			return nil, fmt.Errorf("LSN sampler: %w", err)
		}
		s := &soakLSNSampler{slot: r.slot, manifestPath: filepath.Join(r.sink, manifest.Key)}
		sctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(sctx, sc)
		}()
		stopSampler = sync.OnceValue(func() soakLSNResult {
			cancel()
			wg.Wait()
			sc.Close(context.Background())
			return s.result()
		})
		defer stopSampler()
	}

	d := newSoakDaemon(h.bin, r)
	if err := d.start(); err != nil {
		return nil, err
	}
	defer d.kill()
	client := &http.Client{Timeout: 5 * time.Second}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	deadline := time.Now().Add(time.Minute)
	for {
		if exited, log := d.exited(); exited {
			return nil, fmt.Errorf("pg-cdc start exited early: %s", logTail(r.dir, log))
		}
		if _, err := scrapeMetrics(ctx, client, metricsURL); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("pg-cdc start did not serve %s within a minute: %s", metricsURL, logTail(r.dir, "start.log"))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}

	// The workload: two connections, each half the rate.
	const workers = 2
	load := newSoakLoad(res.tables, res.seedRows)
	conns := make([]*pgx.Conn, 0, workers)
	for range workers {
		wc, err := pgx.Connect(ctx, h.cluster.URL(soakDB))
		if err != nil {
			for _, wc := range conns {
				wc.Close(context.Background())
			}
			return nil, err
		}
		conns = append(conns, wc)
	}
	wctx, stopWork := context.WithCancel(ctx)
	var (
		workWG  sync.WaitGroup
		workMu  sync.Mutex
		workErr error
	)
	// On every return: the workers stop before their connections close.
	defer func() {
		stopWork()
		workWG.Wait()
		for _, wc := range conns {
			wc.Close(context.Background())
		}
	}()
	res.began = time.Now()
	for i, wc := range conns {
		workWG.Add(1)
		go func() {
			defer workWG.Done()
			if err := load.run(wctx, wc, uint64(i+1), float64(res.rate)/workers); err != nil {
				workMu.Lock()
				workErr = errors.Join(workErr, err)
				workMu.Unlock()
				stopWork()
			}
		}()
	}
	// Sample 0, at the workload's start: the baseline of the first
	// interval.
	res.samples = append(res.samples, h.soakSample(ctx, client, metricsURL, r, d, load, res))

	// Kill mode: the killer, from the workload's start to its stop.
	var (
		killWG  sync.WaitGroup
		killErr error // guarded by workMu
	)
	kctx, stopKills := context.WithCancel(ctx)
	// On every return: the killer stops before the workers and the daemon.
	defer func() {
		stopKills()
		killWG.Wait()
	}()
	if res.kill != nil {
		killWG.Add(1)
		go func() {
			defer killWG.Done()
			if err := h.soakKiller(kctx, d, filepath.Join(r.dir, "state", "compact"), res.began, res.kill); err != nil {
				workMu.Lock()
				killErr = err
				workMu.Unlock()
			}
		}()
	}

	stopAt := res.began.Add(res.duration)
	tick := time.NewTicker(soakEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		workMu.Lock()
		err, kerr := workErr, killErr
		workMu.Unlock()
		if kerr != nil {
			return nil, fmt.Errorf("kill mode: %w", kerr)
		}
		if exited, log := d.exited(); exited {
			return nil, fmt.Errorf("pg-cdc start exited during the soak: %s", logTail(r.dir, log))
		}
		if err != nil {
			return nil, fmt.Errorf("workload: %w", err)
		}
		s := h.soakSample(ctx, client, metricsURL, r, d, load, res)
		res.samples = append(res.samples, s)
		if n := len(res.samples); n > 1 && (n-1)%6 == 0 {
			h.logf("soak: %s", res.logLine(n-1))
		}
		if !time.Now().Before(stopAt) {
			break
		}
	}

	// The end: stop the killer and the workload, wait for the sink to hold
	// everything committed, stop the daemon.
	stopKills()
	killWG.Wait()
	if killErr != nil {
		return nil, fmt.Errorf("kill mode: %w", killErr)
	}
	stopWork()
	workWG.Wait()
	res.elapsed = time.Since(res.began)
	if workErr != nil {
		return nil, fmt.Errorf("workload: %w", workErr)
	}
	load.totals(res)
	res.loadEnd = loadAvg()
	h.logf("soak: workload stopped: %s changes in %s transactions (%.0f/s); waiting for the sink", count(int(res.changes)), count(int(res.txns)), float64(res.changes)/res.elapsed.Seconds())
	if err := h.soakCatchUp(ctx, c, r, d, res); err != nil {
		return nil, err
	}
	start, life, _ := d.current()
	res.final = res.samples[len(res.samples)-1].m // should the last scrape fail
	if m, err := scrapeMetrics(ctx, client, metricsURL); err == nil {
		res.final = d.cumulative(life, m)
	}
	res.hwm = procStatusBytes(start.cmd.Process.Pid, "VmHWM:")
	if res.start, err = start.stop(2 * time.Minute); err != nil {
		res.stopErr = err.Error()
		h.logf("soak: pg-cdc start did not stop cleanly: %v", err)
	}
	if k := res.kill; k != nil {
		k.lsn = stopSampler()
		k.cpu = d.cpu + res.start.CPU
		k.logs = d.logNames()
		for _, name := range k.logs {
			b, err := os.ReadFile(filepath.Join(r.dir, name))
			if err != nil {
				return nil, fmt.Errorf("kill mode: %w", err)
			}
			minor, major := countCompactionLogs(string(b))
			k.minor += minor
			k.major += major
		}
		h.logf("soak: kill mode: %d kills (%d aimed at a compaction, %d left one unfinished), %d restarts; LSN sampler: %d samples, %d violations, %d errors; %d minor and %d major compactions over %d lives",
			len(k.kills), k.aimed(), k.landed(), k.restarts, k.lsn.samples, k.lsn.violations, k.lsn.errors, k.minor, k.major, len(k.logs))
	}

	if err := h.soakVerify(ctx, c, r, res); err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	if err := writeSoakCharts(h.o.out, res); err != nil {
		return nil, fmt.Errorf("charts: %w", err)
	}
	c.Close(context.Background())
	if !h.o.keep {
		if err := os.RemoveAll(r.dir); err != nil {
			return nil, err
		}
	}
	return res, h.dropDatabase(ctx, soakDB)
}

// soakDatabase creates the soak database with its tables, seeded, and
// returns a connection to it.
func (h *harness) soakDatabase(ctx context.Context, res *soakResult) (*pgx.Conn, error) {
	c, err := h.database(ctx, soakDB)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.Close(context.Background())
		}
	}()
	if _, err := c.Exec(ctx, "DROP TABLE bench"); err != nil {
		return nil, err
	}
	for i := range res.tables {
		t := soakTable(i)
		if _, err := c.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (id bigint PRIMARY KEY, a int NOT NULL, b text, c numeric(12,2), d timestamptz)`, t)); err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		if _, err := c.Exec(ctx, fmt.Sprintf(`INSERT INTO %s SELECT g, (g %% 1000)::int, md5(g::text), (g %% 100000) / 100.0, now() FROM generate_series(1, %d) g`, t, res.seedRows)); err != nil {
			return nil, fmt.Errorf("seed %s: %w", t, err)
		}
		if _, err := c.Exec(ctx, "VACUUM (FREEZE, ANALYZE) "+t); err != nil {
			return nil, err
		}
	}
	if _, err := c.Exec(ctx, "CHECKPOINT"); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// soakConfig writes the configuration: pg-cdc's defaults but for what the
// section needs (the source, the sink and state under the working
// directory, the metrics address) and what it measures (a flush a second,
// the embedded Iceberg catalog). Compaction is left alone: on by default.
func (h *harness) soakConfig(res *soakResult, metricsAddr string) (pgcdcRun, error) {
	dir := filepath.Join(h.dir, "pgcdc", "soak")
	if err := os.RemoveAll(dir); err != nil {
		return pgcdcRun{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return pgcdcRun{}, err
	}
	r := pgcdcRun{dir: dir, config: filepath.Join(dir, "pg-cdc.yml"), sink: filepath.Join(dir, "sink"), slot: "pg_cdc_slot"}
	res.settings = fmt.Sprintf(`storage:
  type: filesystem
  path: %s
state:
  path: %s
flush:
  interval_sec: 1
metrics:
  listen: %s
catalog:
  type: iceberg
`, filepath.Join("<work>", "sink"), filepath.Join("<work>", "state"), metricsAddr)
	cfg := fmt.Sprintf(`source:
  postgres:
    url: %q
storage:
  type: filesystem
  path: %q
state:
  path: %q
flush:
  interval_sec: 1
metrics:
  listen: %q
catalog:
  type: iceberg
`, h.cluster.URL(soakDB), r.sink, filepath.Join(dir, "state"), metricsAddr)
	return r, os.WriteFile(r.config, []byte(cfg), 0o644)
}

// soakSample takes one sample; what fails to read is NaN (or 0 bytes) and
// counted, not fatal: the daemon's exit is checked by the caller.
func (h *harness) soakSample(ctx context.Context, client *http.Client, metricsURL string, r pgcdcRun, d *soakDaemon, load *soakLoad, res *soakResult) soakSample {
	p, life, _ := d.current()
	pid := p.cmd.Process.Pid
	s := soakSample{at: time.Since(res.began), life: life, changes: load.changes.Load(), deltaMax: math.NaN(), deltaMean: math.NaN()}
	s.rss = procStatusBytes(pid, "VmRSS:")
	s.cpu, _ = procCPU(pid)
	m, err := scrapeMetrics(ctx, client, metricsURL)
	if err != nil {
		res.scrapeErrors++
		h.logf("soak: scrape: %v", err)
		nan := math.NaN()
		s.m = daemonMetrics{flushes: nan, manifestBytes: nan, minor: nan, major: nan, lag: nan}
	} else {
		s.ok, s.m = true, d.cumulative(life, m)
		if len(m.deltaFiles) > 0 {
			s.deltaMax, s.deltaMean = 0, 0
			for _, n := range m.deltaFiles {
				s.deltaMax = math.Max(s.deltaMax, n)
				s.deltaMean += n
			}
			s.deltaMean /= float64(len(m.deltaFiles))
		}
	}
	s.metaBytes = liveDirSize(filepath.Join(r.sink, "_pgcdc"))
	s.icebergBytes = liveDirSize(filepath.Join(r.sink, iceberg.MetadataPrefix))
	s.countLat = h.soakQuery(ctx, r, res.sqlCount, res)
	s.filterLat = h.soakQuery(ctx, r, res.sqlFilter, res)
	return s
}

// soakQuery runs pg-cdc query as a child process and returns its wall
// time in seconds, NaN when it failed (counted).
func (h *harness) soakQuery(ctx context.Context, r pgcdcRun, sqlText string, res *soakResult) float64 {
	p, err := startProc(h.bin, []string{"-c", r.config, "query", "--format", "csv", sqlText}, nil, filepath.Join(r.dir, "query.log"))
	if err != nil {
		res.queryErrors++
		res.lastQueryErr = err.Error()
		return math.NaN()
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.kill()
		return math.NaN()
	case <-time.After(soakQueryTimeout):
		p.kill()
		res.queryErrors++
		res.lastQueryErr = fmt.Sprintf("%s: killed after %s", sqlText, soakQueryTimeout)
		return math.NaN()
	}
	u, err := p.wait(time.Minute)
	if err == nil {
		recs, perr := csv.NewReader(strings.NewReader(p.stdout.String())).ReadAll()
		if perr != nil || len(recs) != 2 {
			err = fmt.Errorf("pg-cdc query printed %q", tail(p.stdout.String(), 3))
		}
	}
	if err != nil {
		res.queryErrors++
		res.lastQueryErr = fmt.Sprintf("%s: %v %s", sqlText, err, logTail(r.dir, "query.log"))
		return math.NaN()
	}
	return u.Wall.Seconds()
}

// soakCatchUp waits until the manifest's end LSN reaches the source's WAL
// position at the workload's stop. A non-transactional logical message
// after that position, sent again every 5 s, lets the idle daemon record
// it (design.md §1.3) even without a keepalive.
func (h *harness) soakCatchUp(ctx context.Context, c *pgx.Conn, r pgcdcRun, d *soakDaemon, res *soakResult) error {
	var lsn string
	if err := c.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	if err := res.stopLSN.UnmarshalText([]byte(lsn)); err != nil {
		return err
	}
	began := time.Now()
	var nudged time.Time
	for {
		if m := readManifest(r); m != nil {
			res.endLSN = m.EndLSN
			if m.EndLSN >= res.stopLSN {
				res.caughtUp = true
				break
			}
		}
		if exited, log := d.exited(); exited {
			return fmt.Errorf("pg-cdc start exited while catching up: %s", logTail(r.dir, log))
		}
		if time.Since(began) > 5*time.Minute {
			h.logf("soak: the manifest's end LSN %s did not reach %s within 5 minutes", res.endLSN, res.stopLSN)
			break
		}
		if time.Since(nudged) > 5*time.Second {
			if _, err := c.Exec(ctx, "SELECT pg_logical_emit_message(false, 'pgcdc-bench', 'soak end')"); err != nil {
				return err
			}
			nudged = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	res.catchUp = time.Since(began)
	h.logf("soak: the manifest reached %s (the WAL at the stop: %s) in %.1f s", res.endLSN, res.stopLSN, res.catchUp.Seconds())
	return nil
}

// soakVerify compares every table of the sink with PostgreSQL's, by two
// readers. The independent one, which the verdict rests on: DuckDB over
// the Parquet files the manifest names, merged by soak_oracle.go, against
// PostgreSQL's rows, value by value. pg-cdc's own: pg-cdc dump's CSV
// against PostgreSQL's COPY CSV of the same ordered query (the e2e tests'
// check), byte for byte.
func (h *harness) soakVerify(ctx context.Context, c *pgx.Conn, r pgcdcRun, res *soakResult) error {
	if _, err := c.Exec(ctx, "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET extra_float_digits = 1"); err != nil {
		return err
	}
	m := readManifest(r)
	if m == nil {
		return fmt.Errorf("the sink's manifest is missing or unreadable")
	}
	// DuckDB in this process, unlike the read section's children: the
	// soak is the run's last section, so no measured child started after
	// it inherits DuckDB's high-water RSS (see renderRead).
	db, err := openOracle(ctx, filepath.Join(r.dir, "duckdb-tmp"))
	if err != nil {
		return err
	}
	defer db.Close()
	for i := range res.tables {
		t := soakTable(i)
		v := soakVerified{table: "public." + t}
		var want bytes.Buffer
		if _, err := c.PgConn().CopyTo(ctx, &want, "COPY (SELECT * FROM "+t+" ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)"); err != nil {
			return fmt.Errorf("COPY %s: %w", t, err)
		}
		got, _, err := runProc(10*time.Minute, h.bin, []string{"-c", r.config, "dump", "--table", v.table, "--format", "csv"}, nil, filepath.Join(r.dir, "dump-"+t+".log"))
		if err != nil {
			v.dumpDetail = fmt.Sprintf("pg-cdc dump: %v %s", err, logTail(r.dir, "dump-"+t+".log"))
		} else {
			v.dumpRows = max(0, strings.Count(got, "\n")-1)
			v.dumpEqual = got == want.String()
			if !v.dumpEqual {
				v.dumpDetail = firstDiff(got, want.String())
			}
		}

		pgRows, err := pgSoakRows(ctx, c, t)
		if err != nil {
			return err
		}
		v.pgRows = len(pgRows)
		if mt := m.Tables[v.table]; mt == nil {
			v.duckDetail = "the manifest has no such table"
		} else {
			sinkRows, info, err := oracleRows(ctx, db, r.sink, mt)
			v.duckFiles, v.dupChanges = info.files, info.dupChanges
			if err != nil {
				v.duckDetail = err.Error()
			} else {
				v.duckRows = len(sinkRows)
				n, first := diffSoakRows(pgRows, sinkRows, 3)
				v.duckEqual = n == 0
				if n > 0 {
					v.duckDetail = fmt.Sprintf("%d differences; the first: %s", n, strings.Join(first, "; "))
				}
			}
		}
		h.logf("soak: %s: PostgreSQL %s rows; DuckDB over the manifest's %d files %s rows, equal %v %s; pg-cdc dump %s rows, equal %v %s",
			v.table, count(v.pgRows), v.duckFiles, count(v.duckRows), v.duckEqual, v.duckDetail, count(v.dumpRows), v.dumpEqual, v.dumpDetail)
		res.verify = append(res.verify, v)
	}
	return nil
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d: the sink %q, PostgreSQL %q", i+1, a, b)
		}
	}
	return ""
}

// liveDirSize is the bytes of the files under dir, which the daemon may be
// changing: a file or directory gone while walking is skipped.
func liveDirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	return n
}

// soakLoad is the steady workload: the highest key handed out per table
// (shared by the connections, so inserts never collide) and what committed.
type soakLoad struct {
	next                                             []atomic.Int64
	changes, txns, updates, inserts, deletes, misses atomic.Int64
	retried                                          atomic.Int64
}

func newSoakLoad(tables, seeded int) *soakLoad {
	l := &soakLoad{next: make([]atomic.Int64, tables)}
	for i := range l.next {
		l.next[i].Store(int64(seeded))
	}
	return l
}

func (l *soakLoad) totals(res *soakResult) {
	res.changes, res.txns = l.changes.Load(), l.txns.Load()
	res.updates, res.inserts, res.deletes = l.updates.Load(), l.inserts.Load(), l.deletes.Load()
	res.misses, res.retried = l.misses.Load(), l.retried.Load()
}

type soakStmt struct {
	kind  byte // 'U' (a, c, d), 'V' (b too), 'I', 'D'
	table int
	id    int64
}

// plan draws one transaction: 1..soakMaxTxn statements over random tables,
// 80 % updates (a quarter of them rewriting the text column too), 10 %
// inserts of new keys, 10 % deletes, in (table, key) order so that two
// connections always lock rows in the same order and never deadlock.
func (l *soakLoad) plan(rng *rand.Rand) []soakStmt {
	n := 1 + rng.IntN(soakMaxTxn)
	out := make([]soakStmt, 0, n)
	for range n {
		t := rng.IntN(len(l.next))
		s := soakStmt{table: t}
		switch k := rng.IntN(100); {
		case k < 60:
			s.kind, s.id = 'U', 1+rng.Int64N(l.next[t].Load())
		case k < 80:
			s.kind, s.id = 'V', 1+rng.Int64N(l.next[t].Load())
		case k < 90:
			s.kind, s.id = 'I', l.next[t].Add(1)
		default:
			s.kind, s.id = 'D', 1+rng.Int64N(l.next[t].Load())
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].table != out[j].table {
			return out[i].table < out[j].table
		}
		return out[i].id < out[j].id
	})
	return out
}

// run commits transactions on c at rate changes (statements) a second
// until ctx ends. Behind schedule by more than a second, it drops the
// backlog rather than burst.
func (l *soakLoad) run(ctx context.Context, c *pgx.Conn, seed uint64, rate float64) error {
	rng := rand.New(rand.NewPCG(seed, 29))
	next := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		stmts := l.plan(rng)
		next = next.Add(time.Duration(float64(len(stmts)) / rate * float64(time.Second)))
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			}
		} else if d < -time.Second {
			next = time.Now()
		}
		if err := l.commit(ctx, c, stmts); err != nil {
			if ctx.Err() != nil {
				return nil // stopped, perhaps inside a transaction, which rolled back
			}
			var pe *pgconn.PgError
			if errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001") {
				l.retried.Add(1)
				continue
			}
			return err
		}
	}
}

func (l *soakLoad) commit(ctx context.Context, c *pgx.Conn, stmts []soakStmt) error {
	b := &pgx.Batch{}
	for _, s := range stmts {
		t := soakTable(s.table)
		switch s.kind {
		case 'U':
			b.Queue("UPDATE "+t+" SET a = a + 1, c = c + 0.01, d = now() WHERE id = $1", s.id)
		case 'V':
			b.Queue("UPDATE "+t+" SET a = a + 1, b = md5(random()::text), c = c - 0.01, d = now() WHERE id = $1", s.id)
		case 'I':
			b.Queue("INSERT INTO "+t+" (id, a, b, c, d) VALUES ($1::bigint, ($1::bigint % 1000)::int, md5($1::bigint::text), ($1::bigint % 100000) / 100.0, now())", s.id)
		case 'D':
			b.Queue("DELETE FROM "+t+" WHERE id = $1", s.id)
		}
	}
	var upd, ins, del, miss int64
	err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		br := tx.SendBatch(ctx, b)
		for _, s := range stmts {
			ct, err := br.Exec()
			if err != nil {
				br.Close()
				return err
			}
			n := ct.RowsAffected()
			if n == 0 {
				miss++
			}
			switch s.kind {
			case 'U', 'V':
				upd += n
			case 'I':
				ins += n
			case 'D':
				del += n
			}
		}
		return br.Close()
	})
	if err != nil {
		return err
	}
	l.updates.Add(upd)
	l.inserts.Add(ins)
	l.deletes.Add(del)
	l.misses.Add(miss)
	l.changes.Add(upd + ins + del)
	l.txns.Add(1)
	return nil
}
