package main

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/bench"
	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

// Read path (issue 15): a table of --read-rows rows, snapshotted by pg-cdc
// init, then --read-epochs rounds of changes (each one transaction: updates
// to a hundredth of the keys, deletes of a thousandth, inserts of a
// thousandth new keys) streamed by pg-cdc start, so the sink holds a base
// and about one delta epoch per round. Then, with the daemon stopped:
//
//   - each query through pg-cdc query as a child process (start-up, engine
//     build over the base and deltas, the query; peak RSS from rusage and
//     VmHWM polled in /proc), through internal/query in-process (a new
//     Reader: build and first query; then the same query on the built
//     engine: the engine alone), and through a plain in-process DuckDB over
//     a pre-merged Parquet copy of the same state (COPY … TO of the merged
//     views, sorted by key, zstd: what a compacted table would be), in an
//     order that rotates from one repetition to the next;
//   - the same queries as of a middle epoch (--as-of epoch:N);
//   - every answer is checked against PostgreSQL's (the as-of ones against
//     what PostgreSQL held right after that round).
//
// Last, the history's metadata: pg-cdc start on the same sink with a flush a
// second (--flush-interval 1) while a light workload (one single-row UPDATE
// every 100 ms) runs for --read-meta-duration; the log objects each
// committed version added (entries and checkpoints) and the manifest's
// growth, extrapolated to 86,400 flushes a day.

type readQuery struct {
	key, title, sql, point string
	pgSQL                  string
	want                   string // PostgreSQL's answer, columns joined by ","
	cli                    []usage
	hwm                    []int64 // VmHWM polled during each pg-cdc query, bytes
	cold, warm             []float64
	duckCold, duckWarm     []float64
	// The same with query.isolation none (DuckDB in the calling process,
	// as before issue 27): what the worker process costs.
	cliNone            []usage
	coldNone, warmNone []float64
	engineHWM, duckHWM []int64           // VmHWM of those children, bytes
	got                map[string]string // answer by engine
}

type readResult struct {
	rows, epochs              int
	changes                   int // delta rows written in all
	loadTime                  time.Duration
	init                      usage
	baseBytes, deltaBytes     int64
	baseFiles, deltaFiles     int
	deltas                    int
	deltaRows                 int64
	manifestBytes             int64
	mergedBytes               int64
	mergeTime                 time.Duration
	asOfEpoch                 uint64
	asOfRound                 int
	firstEpoch, lastEpoch     uint64
	queries                   []*readQuery
	meta                      *metaResult
	updates, deletes, inserts int    // of the last round
	harnessHWM                int64  // this process's VmHWM at the end
	loadStart, loadEnd        string // /proc/loadavg around the section
	cliMaxRSS                 int64  // the largest rusage maxrss of the pg-cdc query runs (polluted: see renderRead)
}

type metaResult struct {
	duration                     time.Duration
	txns                         int
	versions                     uint64 // committed during the window
	entries, checkpoints         int
	entryBytes, checkpointBytes  int64
	entryFirst, entryLast        float64 // mean entry bytes of the first and last fifth of the window
	manifestStart, manifestEnd   int64
	logEntries, logCheckpoints   int64 // bytes under _pgcdc/log at the end, all versions
	logEntryN, logCheckpointN    int
	otherMeta                    int64 // other _pgcdc objects at the end (refs, oldest, …)
	manifestDeltasStart, deltasN int
}

const readDB = "readpath"

func (h *harness) readPath(ctx context.Context) (*readResult, error) {
	n := h.o.readRows
	res := &readResult{rows: n, epochs: h.o.readEpochs, loadStart: loadAvg()}
	defer func() { res.loadEnd = loadAvg() }()
	h.logf("read: loading a %s-row table", count(n))
	c, err := h.database(ctx, readDB)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	began := time.Now()
	if err := loadRows(ctx, c, n); err != nil {
		return nil, err
	}
	res.loadTime = time.Since(began)
	r, err := h.pgcdcConfig(readDB, "read_pgcdc")
	if err != nil {
		return nil, err
	}
	if _, res.init, err = h.initPGCDC(r); err != nil {
		return nil, fmt.Errorf("pg-cdc init: %w", err)
	}
	h.logf("read: loaded in %s, pg-cdc init in %s", res.loadTime.Round(time.Second), res.init.Wall.Round(100*time.Millisecond))

	const filter = "a BETWEEN 1000 AND 3999"
	res.queries = []*readQuery{
		{key: "count", title: "`count(*)`", sql: "SELECT count(*) AS n FROM public.bench",
			pgSQL: "SELECT count(*)::text FROM bench"},
		{key: "filter", title: "filtered scan + aggregate", sql: "SELECT count(*) AS n, sum(d) AS sum_d, max(b) AS max_b FROM public.bench WHERE " + filter,
			pgSQL: "SELECT count(*)::text, sum(d)::text, max(b) FROM bench WHERE " + filter},
	}
	asOf := []*readQuery{
		{key: "count-asof", title: "`count(*)` as of a middle epoch", sql: res.queries[0].sql, pgSQL: res.queries[0].pgSQL},
		{key: "filter-asof", title: "filtered scan + aggregate as of a middle epoch", sql: res.queries[1].sql, pgSQL: res.queries[1].pgSQL},
	}

	// The rounds of changes, streamed by one pg-cdc start.
	p, err := startProc(h.bin, []string{"-c", r.config, "start"}, nil, filepath.Join(r.dir, "start.log"))
	if err != nil {
		return nil, err
	}
	defer p.kill()
	res.asOfRound = max(1, res.epochs/2)
	per := max(1, n/1000)
	for k := 1; k <= res.epochs; k++ {
		tx, err := c.Begin(ctx)
		if err != nil {
			return nil, err
		}
		u, err := tx.Exec(ctx, fmt.Sprintf("UPDATE bench SET a = a + 1, c = now(), d = d + 1 WHERE id %% 100 = %d", k%100))
		if err != nil {
			return nil, err
		}
		d, err := tx.Exec(ctx, fmt.Sprintf("DELETE FROM bench WHERE id %% 1000 = %d", (950-k)%1000))
		if err != nil {
			return nil, err
		}
		lo := n + (k-1)*per + 1
		i, err := tx.Exec(ctx, "INSERT INTO bench "+rowsSQL(lo, lo+per-1))
		if err != nil {
			return nil, err
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, err
		}
		res.updates, res.deletes, res.inserts = int(u.RowsAffected()), int(d.RowsAffected()), int(i.RowsAffected())
		res.changes += res.updates + res.deletes + res.inserts
		if k == res.asOfRound {
			for _, q := range asOf {
				if q.want, err = pgAnswer(ctx, c, q.pgSQL); err != nil {
					return nil, err
				}
			}
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if p.exited() {
				b, _ := os.ReadFile(filepath.Join(r.dir, "start.log"))
				return nil, fmt.Errorf("pg-cdc exited early: %s", tail(string(b), 20))
			}
			m := readManifest(r)
			if got, _ := deltaTotals(m); got >= int64(res.changes) {
				if k == res.asOfRound {
					res.asOfEpoch = m.Epoch
				}
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("round %d: the changes were not durable within 2 minutes", k)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, err := p.stop(2 * time.Minute); err != nil {
		return nil, fmt.Errorf("pg-cdc start: %w", err)
	}
	m := readManifest(r)
	t := m.Tables["public.bench"]
	if t == nil || t.Base == nil {
		return nil, fmt.Errorf("the manifest holds no base for public.bench")
	}
	res.baseFiles = len(t.Base.Files)
	for _, f := range t.Base.Files {
		res.baseBytes += f.Bytes
	}
	res.deltas = len(t.Deltas)
	for i, d := range t.Deltas {
		if i == 0 {
			res.firstEpoch = d.Epoch
		}
		res.lastEpoch = d.Epoch
		res.deltaRows += d.Rows
		res.deltaFiles += len(d.Files)
		for _, f := range d.Files {
			res.deltaBytes += f.Bytes
		}
	}
	if fi, err := os.Stat(filepath.Join(r.sink, manifest.Key)); err == nil {
		res.manifestBytes = fi.Size()
	}
	for _, q := range res.queries {
		if q.want, err = pgAnswer(ctx, c, q.pgSQL); err != nil {
			return nil, err
		}
	}
	for _, q := range asOf {
		q.point = fmt.Sprintf("epoch:%d", res.asOfEpoch)
	}
	res.queries = append(res.queries, asOf...)
	h.logf("read: %d rounds, %s delta rows in %d delta epochs (%d–%d), base %s, deltas %s; as of %s = after round %d",
		res.epochs, count(int(res.deltaRows)), res.deltas, res.firstEpoch, res.lastEpoch, bytesIEC(res.baseBytes), bytesIEC(res.deltaBytes), asOf[0].point, res.asOfRound)

	// The pre-merged copy.
	work := filepath.Join(h.dir, "read")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, err
	}
	merged := filepath.Join(work, "merged.parquet")
	began = time.Now()
	if _, _, err := h.readChild([]string{"merge", "--sink", r.sink, "--out", merged}, filepath.Join(r.dir, "merge.log")); err != nil {
		return nil, fmt.Errorf("pre-merged copy: %w", err)
	}
	res.mergeTime = time.Since(began)
	if fi, err := os.Stat(merged); err == nil {
		res.mergedBytes = fi.Size()
	}
	h.logf("read: pre-merged copy %s in %s", bytesIEC(res.mergedBytes), res.mergeTime.Round(100*time.Millisecond))

	const (
		who     = 5
		cli     = 0
		in      = 1
		duk     = 2
		cliNone = 3
		inNone  = 4
	)
	for rep := range h.o.reps {
		for _, q := range res.queries {
			for j := range who {
				switch (rep + j) % who {
				case cliNone:
					u, _, out, err := h.queryProc(r, q, fmt.Sprintf("query-none-%s-%d.log", q.key, rep), "PGCDC_QUERY_ISOLATION=none")
					if err != nil {
						return nil, fmt.Errorf("%s: pg-cdc query (isolation none): %w", q.key, err)
					}
					q.cliNone = append(q.cliNone, u)
					q.answer("pg-cdc query, isolation none", out)
				case inNone:
					args := []string{"engine", "--sink", r.sink, "--tmp", filepath.Join(work, "inproc"), "--sql", q.sql, "--isolation", "none"}
					if q.point != "" {
						args = append(args, "--point", q.point)
					}
					out, _, err := h.readChild(args, filepath.Join(r.dir, fmt.Sprintf("engine-none-%s-%d.log", q.key, rep)))
					if err != nil {
						return nil, fmt.Errorf("%s: in-process (isolation none): %w", q.key, err)
					}
					q.coldNone, q.warmNone = append(q.coldNone, out.Cold.Seconds()), append(q.warmNone, out.Warm.Seconds())
					q.answer("internal/query, isolation none", out.Answer)
				case cli:
					u, hwm, out, err := h.queryProc(r, q, fmt.Sprintf("query-%s-%d.log", q.key, rep))
					if err != nil {
						return nil, fmt.Errorf("%s: pg-cdc query: %w", q.key, err)
					}
					q.cli, q.hwm = append(q.cli, u), append(q.hwm, hwm)
					q.answer("pg-cdc query", out)
				case in:
					args := []string{"engine", "--sink", r.sink, "--tmp", filepath.Join(work, "inproc"), "--sql", q.sql}
					if q.point != "" {
						args = append(args, "--point", q.point)
					}
					out, hwm, err := h.readChild(args, filepath.Join(r.dir, fmt.Sprintf("engine-%s-%d.log", q.key, rep)))
					if err != nil {
						return nil, fmt.Errorf("%s: in-process: %w", q.key, err)
					}
					q.cold, q.warm = append(q.cold, out.Cold.Seconds()), append(q.warm, out.Warm.Seconds())
					q.engineHWM = append(q.engineHWM, hwm)
					q.answer("internal/query", out.Answer)
				case duk:
					if q.point != "" {
						continue // the pre-merged copy is of the newest state
					}
					out, hwm, err := h.readChild([]string{"duckdb", "--merged", merged, "--sql", q.sql}, filepath.Join(r.dir, fmt.Sprintf("duckdb-%s-%d.log", q.key, rep)))
					if err != nil {
						return nil, fmt.Errorf("%s: DuckDB over the pre-merged copy: %w", q.key, err)
					}
					q.duckCold, q.duckWarm = append(q.duckCold, out.Cold.Seconds()), append(q.duckWarm, out.Warm.Seconds())
					q.duckHWM = append(q.duckHWM, hwm)
					q.answer("DuckDB pre-merged", out.Answer)
				}
			}
		}
		last := func(xs []float64) float64 {
			if len(xs) == 0 {
				return 0
			}
			return xs[len(xs)-1]
		}
		for _, q := range res.queries {
			h.logf("read: rep %d %-12s cli %6.3fs hwm %s | engine cold %6.3fs warm %6.3fs | duckdb cold %6.3fs warm %6.3fs",
				rep+1, q.key, q.cli[len(q.cli)-1].Wall.Seconds(), bytesIEC(q.hwm[len(q.hwm)-1]), last(q.cold), last(q.warm), last(q.duckCold), last(q.duckWarm))
		}
	}
	for _, q := range res.queries {
		for engine, got := range q.got {
			if got != q.want {
				return nil, fmt.Errorf("%s: %s answered %q, PostgreSQL %q", q.key, engine, got, q.want)
			}
		}
	}
	h.logf("read: every answer matches PostgreSQL's")
	res.harnessHWM = procStatusBytes(os.Getpid(), "VmHWM:")
	for _, q := range res.queries {
		for _, u := range q.cli {
			res.cliMaxRSS = max(res.cliMaxRSS, u.MaxRSS)
		}
	}

	if h.o.readMeta > 0 {
		if res.meta, err = h.historyMeta(ctx, c, r); err != nil {
			return nil, fmt.Errorf("history metadata: %w", err)
		}
	}
	c.Close(context.Background())
	if !h.o.keep {
		if err := os.RemoveAll(r.dir); err != nil {
			return nil, err
		}
		if err := os.RemoveAll(work); err != nil {
			return nil, err
		}
	}
	return res, h.dropDatabase(ctx, readDB)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// answer records an engine's answer; a different one from the same engine
// on another repetition is kept as a mismatch.
func (q *readQuery) answer(engine, got string) {
	if q.got == nil {
		q.got = map[string]string{}
	}
	if prev, ok := q.got[engine]; ok && prev != got {
		q.got[engine+" (another repetition)"] = got
		return
	}
	q.got[engine] = got
}

func pgAnswer(ctx context.Context, c *pgx.Conn, sql string) (string, error) {
	rows, err := c.Query(ctx, sql)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var out string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return "", err
		}
		cells := make([]string, len(vals))
		for i, v := range vals {
			cells[i] = fmt.Sprint(v)
		}
		out = strings.Join(cells, ",")
	}
	return out, rows.Err()
}

// childResult is what the engine, duckdb and merge children print.
type childResult struct {
	Cold, Warm time.Duration
	Answer     string
}

// readChild runs this program's child args, polling its VmHWM, and
// decodes the JSON line it prints.
func (h *harness) readChild(args []string, logPath string) (childResult, int64, error) {
	var out childResult
	p, err := startProc(h.self, args, nil, logPath)
	if err != nil {
		return out, 0, err
	}
	hwm := pollHWM(p)
	if _, err := p.wait(10 * time.Minute); err != nil {
		b, _ := os.ReadFile(logPath)
		return out, hwm, fmt.Errorf("%w\n%s", err, tail(string(b), 20))
	}
	if err := json.Unmarshal(p.stdout.Bytes(), &out); err != nil {
		return out, hwm, fmt.Errorf("%s printed %q: %w", args[0], tail(p.stdout.String(), 3), err)
	}
	return out, hwm, nil
}

// pollHWM reads the child's VmHWM every 5 ms until it exits, and returns
// the last (largest) reading plus that of each process the child started
// (its query worker, which holds DuckDB's memory): the peaks summed, an
// upper bound of what the query held at once.
func pollHWM(p *proc) int64 {
	var hwm int64
	workers := map[int]int64{}
	pid := p.cmd.Process.Pid
	for !p.exited() {
		if v := procStatusBytes(pid, "VmHWM:"); v > hwm {
			hwm = v
		}
		for _, c := range childPIDs(pid) {
			if v := procStatusBytes(c, "VmHWM:"); v > workers[c] {
				workers[c] = v
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, v := range workers {
		hwm += v
	}
	return hwm
}

// childPIDs are the processes pid's threads started and that still run
// (/proc/<pid>/task/*/children).
func childPIDs(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, w := range strings.Fields(string(b)) {
			var c int
			if _, err := fmt.Sscanf(w, "%d", &c); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// childReadArgs parses the flags of the engine, duckdb and merge children.
func childReadArgs(name string, args []string) (sink, tmp, point, sqlText, merged, out, isolation string) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.StringVar(&isolation, "isolation", "", "query.isolation (default landlock)")
	fs.StringVar(&sink, "sink", "", "the filesystem sink")
	fs.StringVar(&tmp, "tmp", "", "the engine's temp directory")
	fs.StringVar(&point, "point", "", "--as-of point")
	fs.StringVar(&sqlText, "sql", "", "the query")
	fs.StringVar(&merged, "merged", "", "the pre-merged Parquet file")
	fs.StringVar(&out, "out", "", "the Parquet file to write")
	_ = fs.Parse(args)
	return
}

// childRead is the engine, duckdb or merge child (read.go): one
// measurement in a process of its own, so that the harness never holds
// DuckDB's memory.
func childRead(name string, args []string) int {
	sink, tmp, point, sqlText, merged, out, isolation := childReadArgs(name, args)
	ctx := context.Background()
	var res childResult
	var err error
	switch name {
	case "engine":
		var store *fs.Store
		if store, err = fs.New(sink); err == nil {
			res.Cold, res.Warm, res.Answer, err = inProcess(ctx, store, tmp, &readQuery{sql: sqlText, point: point}, isolation)
		}
	case "duckdb":
		res.Cold, res.Warm, res.Answer, err = duckMerged(ctx, merged, sqlText)
	case "merge":
		var b []byte
		if b, err = os.ReadFile(filepath.Join(sink, manifest.Key)); err == nil {
			var m *manifest.Manifest
			if m, err = manifest.Decode(b); err == nil {
				err = writeMerged(ctx, m, sink, out)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// queryProc runs pg-cdc query once, polling its VmHWM.
func (h *harness) queryProc(r pgcdcRun, q *readQuery, logName string, env ...string) (usage, int64, string, error) {
	args := []string{"-c", r.config, "query", "--format", "csv"}
	if q.point != "" {
		args = append(args, "--as-of", q.point)
	}
	args = append(args, q.sql)
	p, err := startProc(h.bin, args, env, filepath.Join(r.dir, logName))
	if err != nil {
		return usage{}, 0, "", err
	}
	hwm := pollHWM(p)
	u, err := p.wait(time.Minute)
	if err != nil {
		return u, hwm, "", err
	}
	recs, err := csv.NewReader(strings.NewReader(p.stdout.String())).ReadAll()
	if err != nil || len(recs) != 2 {
		return u, hwm, "", fmt.Errorf("pg-cdc query printed %q", tail(p.stdout.String(), 5))
	}
	return u, hwm, strings.Join(recs[1], ","), nil
}

// procStatusBytes reads a "kB" field of /proc/<pid>/status, in bytes (0
// when the process is gone).
func procStatusBytes(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib); err == nil {
				return kib << 10
			}
		}
	}
	return 0
}

// readLimits are pg-cdc query's defaults (config.Default().Query).
var readLimits = query.Limits{MemoryBytes: 1 << 30, Threads: 2, Timeout: time.Minute, MaxRows: 100_000, MaxBytes: 64 << 20}

// inProcess answers q through internal/query: a new Reader, the point
// resolved, the first query (building the engine: its sandbox and views),
// then the same query again on the built engine.
func inProcess(ctx context.Context, store *fs.Store, tmp string, q *readQuery, isolation string) (cold, warm time.Duration, answer string, err error) {
	started := time.Now()
	rd, err := query.NewReader(query.ReaderOptions{Sink: store, TempDir: tmp, Limits: readLimits, Isolation: isolation})
	if err != nil {
		return 0, 0, "", err
	}
	defer rd.Close()
	at, err := rd.Resolve(ctx, q.point)
	if err != nil {
		return 0, 0, "", err
	}
	if _, err := rd.Query(ctx, at, q.sql); err != nil {
		return 0, 0, "", err
	}
	cold = time.Since(started)
	res, err := rd.Query(ctx, at, q.sql)
	if err != nil {
		return 0, 0, "", err
	}
	if len(res.Rows) != 1 {
		return 0, 0, "", fmt.Errorf("%d rows", len(res.Rows))
	}
	cells := make([]string, len(res.Rows[0]))
	for i, v := range res.Rows[0] {
		cells[i] = fmt.Sprint(v) // int64, *big.Int, and DECIMAL and VARCHAR as strings
	}
	return cold, res.Elapsed, strings.Join(cells, ","), nil
}

// plainDuckDB opens an in-memory DuckDB with pg-cdc query's threads and
// memory limit.
func plainDuckDB(ctx context.Context) (*sql.DB, error) {
	connector, err := duckdb.NewConnector("", nil)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	for _, s := range []string{fmt.Sprintf("SET threads = %d", readLimits.Threads), fmt.Sprintf("SET memory_limit = '%dB'", readLimits.MemoryBytes)} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// writeMerged writes the current state of public.bench, as pg-cdc query's
// views define it, to one Parquet file sorted by key (zstd), with DuckDB.
func writeMerged(ctx context.Context, m *manifest.Manifest, sink, out string) error {
	db, err := plainDuckDB(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	views, err := query.Views(m, mergesql.Bound{}, func(key string) (string, error) { return filepath.Join(sink, key), nil })
	if err != nil {
		return err
	}
	for _, s := range views {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%.80s: %w", s, err)
		}
	}
	_, err = db.ExecContext(ctx, fmt.Sprintf("COPY (SELECT * FROM public.bench ORDER BY id) TO '%s' (FORMAT parquet, COMPRESSION zstd)", out))
	return err
}

// duckMerged answers sqlText in a plain in-process DuckDB where
// public.bench is the pre-merged file: cold is opening the database,
// defining the view and the first query; warm the same query again.
func duckMerged(ctx context.Context, merged, sqlText string) (cold, warm time.Duration, answer string, err error) {
	started := time.Now()
	db, err := plainDuckDB(ctx)
	if err != nil {
		return 0, 0, "", err
	}
	defer db.Close()
	for _, s := range []string{"CREATE SCHEMA public", fmt.Sprintf("CREATE VIEW public.bench AS SELECT * FROM read_parquet('%s')", merged)} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return 0, 0, "", err
		}
	}
	if _, err := scanOne(ctx, db, sqlText); err != nil {
		return 0, 0, "", err
	}
	cold = time.Since(started)
	began := time.Now()
	answer, err = scanOne(ctx, db, sqlText)
	return cold, time.Since(began), answer, err
}

func scanOne(ctx context.Context, db *sql.DB, sqlText string) (string, error) {
	rows, err := db.QueryContext(ctx, sqlText)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var out string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		cells := make([]string, len(vals))
		for i, v := range vals {
			cells[i] = fmt.Sprint(v)
		}
		out = strings.Join(cells, ",")
	}
	return out, rows.Err()
}

// logSizes lists the history log: entry and checkpoint bytes by version,
// and the bytes of the other _pgcdc objects (manifest excluded).
func logSizes(sink string) (entries, checkpoints map[uint64]int64, other int64, err error) {
	entries, checkpoints = map[uint64]int64{}, map[uint64]int64{}
	root := filepath.Join(sink, "_pgcdc")
	err = filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, err := filepath.Rel(sink, path)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if v, cp, ok := manifest.ParseLogKey(key); ok {
			if cp {
				checkpoints[v] = info.Size()
			} else {
				entries[v] = info.Size()
			}
		} else if key != manifest.Key && !strings.Contains(key, ".tmp") {
			other += info.Size()
		}
		return nil
	})
	return entries, checkpoints, other, err
}

// historyMeta runs pg-cdc start on r's sink while one single-row UPDATE
// commits every 100 ms, and measures what the history log grew by.
func (h *harness) historyMeta(ctx context.Context, c *pgx.Conn, r pgcdcRun) (*metaResult, error) {
	res := &metaResult{duration: h.o.readMeta}
	h.logf("read: history metadata: pg-cdc start with a %d s flush, one single-row UPDATE every 100 ms for %s", h.o.flushSec, res.duration)
	p, err := startProc(h.bin, []string{"-c", r.config, "start"}, nil, filepath.Join(r.dir, "start-meta.log"))
	if err != nil {
		return nil, err
	}
	defer p.kill()
	time.Sleep(2 * time.Second) // connected, streaming, its first commit done
	m0 := readManifest(r)
	if m0 == nil {
		return nil, fmt.Errorf("no manifest")
	}
	if fi, err := os.Stat(filepath.Join(r.sink, manifest.Key)); err == nil {
		res.manifestStart = fi.Size()
	}
	res.manifestDeltasStart = len(m0.Tables["public.bench"].Deltas)
	v0 := m0.Version
	tick := time.NewTicker(100 * time.Millisecond)
	stopAt := time.Now().Add(res.duration)
	rng := rand.New(rand.NewPCG(1, 2))
	for time.Now().Before(stopAt) {
		if p.exited() {
			b, _ := os.ReadFile(filepath.Join(r.dir, "start-meta.log"))
			return nil, fmt.Errorf("pg-cdc exited early: %s", tail(string(b), 20))
		}
		if _, err := c.Exec(ctx, "UPDATE bench SET a = a + 1, c = now() WHERE id = $1", 1+rng.IntN(h.o.readRows)); err != nil {
			return nil, err
		}
		res.txns++
		<-tick.C
	}
	tick.Stop()
	time.Sleep(time.Duration(h.o.flushSec)*time.Second + 500*time.Millisecond)
	m1 := readManifest(r)
	if _, err := p.stop(2 * time.Minute); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(filepath.Join(r.sink, manifest.Key)); err == nil {
		res.manifestEnd = fi.Size()
	}
	res.deltasN = len(m1.Tables["public.bench"].Deltas)
	v1 := m1.Version
	res.versions = v1 - v0
	entries, checkpoints, other, err := logSizes(r.sink)
	if err != nil {
		return nil, err
	}
	res.otherMeta = other
	var window []float64
	for v := v0 + 1; v <= v1; v++ {
		if b, ok := entries[v]; ok {
			res.entries++
			res.entryBytes += b
			window = append(window, float64(b))
		}
		if b, ok := checkpoints[v]; ok {
			res.checkpoints++
			res.checkpointBytes += b
		}
	}
	for _, b := range entries {
		res.logEntries += b
		res.logEntryN++
	}
	for _, b := range checkpoints {
		res.logCheckpoints += b
		res.logCheckpointN++
	}
	if k := len(window) / 5; k > 0 {
		res.entryFirst = bench.Summarize(window[:k]).Median
		res.entryLast = bench.Summarize(window[len(window)-k:]).Median
	}
	h.logf("read: history metadata: %d versions in %s, %d entries %s, %d checkpoints %s, manifest %s → %s",
		res.versions, res.duration, res.entries, bytesIEC(res.entryBytes), res.checkpoints, bytesIEC(res.checkpointBytes), bytesIEC(res.manifestStart), bytesIEC(res.manifestEnd))
	return res, nil
}

func (q *readQuery) sum(xs []float64) bench.Summary { return bench.Summarize(xs) }

func (q *readQuery) cliWall() bench.Summary {
	xs := make([]float64, len(q.cli))
	for i, u := range q.cli {
		xs[i] = u.Wall.Seconds()
	}
	return bench.Summarize(xs)
}

func (q *readQuery) cliRSS() bench.Summary {
	// Not usage.MaxRSS: a child's rusage maxrss starts at the harness's
	// own high-water RSS (see renderRead), and this harness ran DuckDB.
	xs := make([]float64, len(q.hwm))
	for i, b := range q.hwm {
		xs[i] = float64(b)
	}
	return bench.Summarize(xs)
}

// ratios pairs the i-th runs of two series (same repetition).
func ratios(a, b []float64) bench.Summary {
	var xs []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			xs = append(xs, a[i]/b[i])
		}
	}
	return bench.Summarize(xs)
}

func ms(x float64) string {
	if x < 0.01 {
		return fmt.Sprintf("%.1f ms", x*1e3)
	}
	return fmt.Sprintf("%.0f ms", x*1e3)
}

// targetReadRatio is issue 15's bound on pg-cdc query against DuckDB over
// a pre-merged copy.
const targetReadRatio = 1.5

func (r *report) renderRead(p func(string, ...any)) {
	rr := r.read
	if rr == nil || len(rr.queries) < 2 {
		return
	}
	m := r.machine
	p("## Read path (issue 15)\n\n")
	p("Measured %s on %d CPUs (%s, %s, %s; load average %s at the section's start, %s at its end: the machine was shared), %s, pg-cdc `%s`. Reproduce: `make bench BENCH_FLAGS=\"--only read --out /tmp/read.md\"` (`--read-rows`, `--read-epochs`, `--read-meta-duration`, `--reps` size it).\n\n",
		r.started.UTC().Format("2006-01-02 15:04 UTC"), m.nproc, m.cpu, m.memory, m.kernel, rr.loadStart, rr.loadEnd, strings.SplitN(m.postgres, " on ", 2)[0], strings.ReplaceAll(m.pgcdc, "\n", "; "))
	p("The sink: a table of %s rows (the bench table) snapshotted by `pg-cdc init` (a base of %s in %d file(s)), then %d rounds of changes, each one transaction (updates of a hundredth of the keys: a, c, d; deletes of a thousandth; inserts of a thousandth new keys; the last round %s U, %s D, %s I), streamed by `pg-cdc start` with a 1 s flush into %d delta epochs (%d–%d; %s delta rows, %s in %d files). The manifest is %s. ",
		count(rr.rows), bytesIEC(rr.baseBytes), rr.baseFiles, rr.epochs, count(rr.updates), count(rr.deletes), count(rr.inserts), rr.deltas, rr.firstEpoch, rr.lastEpoch, count(int(rr.deltaRows)), bytesIEC(rr.deltaBytes), rr.deltaFiles, bytesIEC(rr.manifestBytes))
	p("The baseline is a plain in-process DuckDB (duckdb-go, the same DuckDB, `threads` %d and `memory_limit` 1 GiB as pg-cdc query's defaults) over a pre-merged copy of the same state: the merged views written with `COPY (SELECT * FROM public.bench ORDER BY id) TO … (FORMAT parquet, COMPRESSION zstd)` (%s, written in %s), i.e. what the table reads like once compacted. ",
		readLimits.Threads, bytesIEC(rr.mergedBytes), rr.mergeTime.Round(100*time.Millisecond))
	p("Each figure is the median of %d repetitions (range in parentheses); in each repetition the three ways ran one after the other, in an order that rotates. Every answer was checked against PostgreSQL's (as of: against what PostgreSQL held right after round %d).\n\n", r.opts.reps, rr.asOfRound)
	p("- **pg-cdc query** is the command as a child process (`pg-cdc -c … query --format csv \"SQL\"`), start to exit: config, the sink's manifest, the sandboxed engine and its views over the base and deltas, the query, the output. Peak RSS is its VmHWM, polled from /proc every 5 ms until it exits. Not rusage: on Linux a child's ru_maxrss starts at its parent's high-water RSS (Go's fork+exec shares the parent's memory map until exec, and exec records that map's high water into the child), so it is only as good as the harness is small; here the largest rusage maxrss of these runs was %s, the harness's own VmHWM %s.\n", bytesIEC(rr.cliMaxRSS), bytesIEC(rr.harnessHWM))
	p("- **engine, cold** is internal/query in-process: a new Reader, Resolve, the first Query (which builds the engine: sandbox checks and views). **engine, warm** is the same query again on the built engine (`Result.Elapsed`): the query's own cost over base + deltas.\n")
	p("- **DuckDB pre-merged, cold** opens the database, defines the view and runs the query; **warm** runs it again.\n")
	p("- The engine and DuckDB measurements run in child processes of the harness (`pgcdc-bench engine|duckdb`), so the harness never holds DuckDB's memory; their peak RSS (VmHWM): %s.\n\n", childRSSText(rr.queries))
	p("| query | pg-cdc query (process) | peak RSS | engine, cold | **engine, warm** | DuckDB pre-merged, cold | **DuckDB pre-merged, warm** | **warm ÷ warm** | process ÷ DuckDB cold |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, q := range rr.queries {
		title := q.title
		if q.point != "" {
			title += fmt.Sprintf(" (`--as-of %s`)", q.point)
		}
		dc, dw, rw, rc := "–", "–", "–", "–"
		if len(q.duckWarm) > 0 {
			dc, dw = q.sum(q.duckCold).Range(ms), q.sum(q.duckWarm).Range(ms)
			rw = "**" + ratios(q.warm, q.duckWarm).Range(ratio) + "**"
			rc = ratios(q.cliSeconds(), q.duckCold).Range(ratio)
		}
		p("| %s | %s | %s | %s | **%s** | %s | **%s** | %s | %s |\n", title, q.cliWall().Range(ms), q.cliRSS().Range(mib),
			q.sum(q.cold).Range(ms), q.sum(q.warm).Range(ms), dc, dw, rw, rc)
	}
	p("\nThe SQL: `%s`; `%s`. PostgreSQL's answers: %s.\n\n", rr.queries[0].sql, rr.queries[1].sql, answersText(rr.queries))
	p("### The isolation's cost (issue 27)\n\n")
	p("The same queries with `query.isolation: landlock` (the default: DuckDB in a worker process that Landlock confines, the request and its result crossing two pipes) and `none` (DuckDB in the calling process, as before issue 27), in the same rotation. **warm** is what a server's request costs once its version's engine is built (the worker already running): the goal is ≤ 1.10×. **cold** adds the worker's start (an exec of the binary, Landlock, DuckDB's open and the sandbox checks) to the engine build; `pg-cdc query` pays it once per command. The peak RSS of a `pg-cdc query` above is the command's and its worker's together.\n\n")
	p("| query | engine warm, landlock | engine warm, none | **warm ratio** | engine cold, landlock | engine cold, none | cold ratio | pg-cdc query, landlock | pg-cdc query, none | process ratio |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, q := range rr.queries {
		if len(q.warmNone) == 0 || len(q.cliNone) == 0 {
			continue
		}
		title := q.title
		if q.point != "" {
			title += fmt.Sprintf(" (`--as-of %s`)", q.point)
		}
		none := make([]float64, len(q.cliNone))
		for i, u := range q.cliNone {
			none[i] = u.Wall.Seconds()
		}
		p("| %s | %s | %s | **%s** | %s | %s | %s | %s | %s | %s |\n", title,
			q.sum(q.warm).Range(ms), q.sum(q.warmNone).Range(ms), ratios(q.warm, q.warmNone).Range(ratio),
			q.sum(q.cold).Range(ms), q.sum(q.coldNone).Range(ms), ratios(q.cold, q.coldNone).Range(ratio),
			q.cliWall().Range(ms), q.sum(none).Range(ms), ratios(q.cliSeconds(), none).Range(ratio))
	}
	p("\n")
	if mt := rr.meta; mt != nil && mt.versions > 0 {
		perEntry := float64(mt.entryBytes) / float64(max(1, mt.entries))
		perVersionManifest := float64(mt.manifestEnd-mt.manifestStart) / float64(mt.versions)
		cpDay := 86_400 / manifest.CheckpointEvery
		p("### History metadata at one flush per second\n\n")
		p("`pg-cdc start` on the same sink (`flush.interval_sec: %d`), one single-row UPDATE committing every 100 ms (%d transactions in %s), no compaction: %d manifest versions committed (%.2f a second). What each added under `_pgcdc/log/`:\n\n",
			r.opts.flushSec, mt.txns, mt.duration, mt.versions, float64(mt.versions)/mt.duration.Seconds())
		p("| | measured | per flush | extrapolated to 86,400 flushes/day |\n| --- | ---: | ---: | ---: |\n")
		p("| log entries (`<v>.json`, header + diff) | %d, %s | %.0f B (first fifth %.0f B, last fifth %.0f B) | **%s/day** |\n", mt.entries, bytesIEC(mt.entryBytes), perEntry, mt.entryFirst, mt.entryLast, bytesIEC(int64(perEntry*86_400)))
		p("| checkpoints (`<v>.checkpoint.json`, the whole manifest, every %d versions) | %d, %s | manifest ÷ %d = %.0f B | %d × the manifest's size: **%s/day** at the end's %s; %s/day if it grew all day as here (no compaction) |\n",
			manifest.CheckpointEvery, mt.checkpoints, bytesIEC(mt.checkpointBytes), manifest.CheckpointEvery, float64(mt.manifestEnd)/manifest.CheckpointEvery,
			cpDay, bytesIEC(int64(cpDay)*mt.manifestEnd), bytesIEC(mt.manifestEnd),
			bytesIEC(int64(float64(cpDay)*(float64(mt.manifestEnd)+perVersionManifest*86_400/2))))
		p("| manifest.json (rewritten whole by every flush; not history) | %s → %s (%d → %d deltas) | +%.0f B/flush | %s after a day uncompacted; %s/day written |\n",
			bytesIEC(mt.manifestStart), bytesIEC(mt.manifestEnd), mt.manifestDeltasStart, mt.deltasN, perVersionManifest,
			bytesIEC(int64(float64(mt.manifestEnd)+perVersionManifest*86_400)), bytesIEC(int64(86_400*(float64(mt.manifestEnd)+perVersionManifest*86_400/2))))
		p("\nThe whole log at the end: %d entries, %s; %d checkpoints, %s; other `_pgcdc/` objects (refs, oldest) %s. ", mt.logEntryN, bytesIEC(mt.logEntries), mt.logCheckpointN, bytesIEC(mt.logCheckpoints), bytesIEC(mt.otherMeta))
		p("Scaling: an entry is the diff of one version, so its size follows what the flush changed (one delta appended, the epoch, LSN and history records), not the manifest's size: the first and last fifth of the window above differ by %.0f B while the manifest grew by %s. Checkpoints are the O(manifest) part: one whole manifest per %d versions, so their bytes per day are 864 × the manifest's size, which grows by one delta a flush until compaction folds the deltas.\n\n",
			mt.entryLast-mt.entryFirst, bytesIEC(mt.manifestEnd-mt.manifestStart), manifest.CheckpointEvery)
	}
	p("### Targets of issue 15\n\n")
	for _, q := range rr.queries {
		if len(q.duckWarm) == 0 {
			continue
		}
		w := ratios(q.warm, q.duckWarm)
		c := ratios(q.cliSeconds(), q.duckCold)
		p("- %s ≤ %.1f× DuckDB over pre-merged Parquet: engine %s (%s), process %s against DuckDB cold: %s.\n", q.title, targetReadRatio,
			ratio(w.Median), yes(w.Median <= targetReadRatio), ratio(c.Median), yes(c.Median <= targetReadRatio))
	}
	if mt := rr.meta; mt != nil && mt.versions > 0 {
		perEntry := float64(mt.entryBytes) / float64(max(1, mt.entries))
		cp := int64(86_400/manifest.CheckpointEvery) * mt.manifestEnd
		p("- History metadata at one flush per second: **%s/day** (entries %s/day + checkpoints %s/day at this manifest's %s). Entries are O(changes), not O(manifest): %s (the same size at the start and the end of the window while the manifest grew %.1f×). Checkpoints are O(manifest) ÷ %d, so they stay small only while compaction keeps the manifest small: with no compaction (the default, `compaction.interval: 0s`) a day of flushes grows the manifest to about %s and its checkpoints to %s/day.\n",
			bytesIEC(int64(perEntry*86_400)+cp), bytesIEC(int64(perEntry*86_400)), bytesIEC(cp), bytesIEC(mt.manifestEnd),
			yes(mt.entryLast-mt.entryFirst < 0.1*perEntry), float64(mt.manifestEnd)/float64(max(1, mt.manifestStart)), manifest.CheckpointEvery,
			bytesIEC(int64(float64(mt.manifestEnd)+float64(mt.manifestEnd-mt.manifestStart)/float64(mt.versions)*86_400)),
			bytesIEC(int64(float64(86_400/manifest.CheckpointEvery)*(float64(mt.manifestEnd)+float64(mt.manifestEnd-mt.manifestStart)/float64(mt.versions)*86_400/2))))
	}
	p("\n")
}

func (q *readQuery) cliSeconds() []float64 {
	xs := make([]float64, len(q.cli))
	for i, u := range q.cli {
		xs[i] = u.Wall.Seconds()
	}
	return xs
}

func childRSSText(qs []*readQuery) string {
	var parts []string
	for _, q := range qs {
		part := fmt.Sprintf("%s: engine %s", q.key, bytesIEC(int64(bench.Summarize(i64s(q.engineHWM)).Median)))
		if len(q.duckHWM) > 0 {
			part += fmt.Sprintf(", DuckDB pre-merged %s", bytesIEC(int64(bench.Summarize(i64s(q.duckHWM)).Median)))
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

func i64s(xs []int64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

func answersText(qs []*readQuery) string {
	var parts []string
	for _, q := range qs {
		parts = append(parts, fmt.Sprintf("%s `%s`", q.key, q.want))
	}
	return strings.Join(parts, ", ")
}
