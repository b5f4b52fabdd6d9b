package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/bench"
)

// Compaction (issue 3 "compaction rows/s and peak RSS", issue 5 "bounded in
// memory"): a sink of --compact-rows rows as pg-cdc makes it (a snapshot
// base from pg-cdc init, then deltas streamed by pg-cdc start), folded by
// pg-cdc compact, timed as a child process like every other consumer.
//
// Two passes, each repeated from the same input:
//
//  1. the snapshot base plus deltas of updates to a tenth of the keys and
//     deletes of a hundredth (the first compaction of a table);
//  2. pass 1's compacted base (sorted, with tombstones) plus deltas of
//     updates to another tenth, deletes of another hundredth and inserts of
//     a hundredth new keys (compaction in steady state).
//
// Every repetition of a pass starts from a copy of the sink taken before
// the first one (data files hard-linked: the filesystem sink never writes a
// file in place, it renames finished files over), so all of them fold the
// same files; the last one's result is the input of pass 2.

type compactRun struct {
	pass, rep  int
	usage      usage
	versions   int64 // input rows: base rows (tombstones included) + delta rows
	rows       int64 // output base rows, tombstones included
	tombstones int64 // of rows
	bytesIn    int64 // base + delta Parquet bytes
	bytesOut   int64 // new base Parquet bytes
	files      int   // new base files
	runs       int   // sorted runs the merge spilled (pg-cdc's log), -1 when not found
}

type compactPass struct {
	n                               int
	updates, deletes, inserts       int
	baseRows, baseBytes             int64
	deltas                          int // delta epochs
	deltaRows, deltaBytes           int64
	genTime                         time.Duration // writing the changes (not timed against anything)
	drain                           drainRun      // pg-cdc start until they were durable
	runs                            []compactRun
	wantLive                        int64 // live rows every repetition's base must hold
	compactedBase                   bool  // the input base came from a compaction (sorted)
	baseFilesCount, deltaFilesCount int
}

type compactResult struct {
	rows     int
	budget   int64 // compaction.memory_budget_bytes; 0: pg-cdc's default
	loadTime time.Duration
	init     usage
	passes   []*compactPass
	profile  *profile
}

// compaction measures pg-cdc compact; see above.
func (h *harness) compaction(ctx context.Context) (*compactResult, error) {
	const db = "compact"
	n := h.o.compactRows
	res := &compactResult{rows: n, budget: h.o.compactMemory}
	h.logf("compact: loading a %s-row table", count(n))
	c, err := h.database(ctx, db)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	began := time.Now()
	if err := loadRows(ctx, c, n); err != nil {
		return nil, err
	}
	res.loadTime = time.Since(began)

	r, err := h.pgcdcConfig(db, "compact_pgcdc")
	if err != nil {
		return nil, err
	}
	if res.budget > 0 {
		if err := appendConfig(r, fmt.Sprintf("compaction:\n  memory_budget_bytes: %d\n", res.budget)); err != nil {
			return nil, err
		}
	}
	if _, res.init, err = h.initPGCDC(r); err != nil {
		return nil, fmt.Errorf("pg-cdc init: %w", err)
	}
	h.logf("compact: loaded in %s, pg-cdc init in %s (rss %s)", res.loadTime.Round(time.Second), res.init.Wall.Round(100*time.Millisecond), bytesIEC(res.init.MaxRSS))

	per := h.o.txnRows
	live := int64(n)
	for pass := 1; pass <= 2; pass++ {
		p := &compactPass{n: pass, compactedBase: pass > 1}
		// Keys by residue, so the changes are spread over the whole key
		// range (every base file and every sorted run is touched).
		updRem, delRem := 1, 7
		if pass == 2 {
			updRem, delRem = 2, 9
			p.inserts = n / 100
		}
		p.updates, p.deletes = keysMod(n, 10, updRem), keysMod(n, 100, delRem)
		h.logf("compact: pass %d: writing %s updates, %s deletes, %s inserts", pass, count(p.updates), count(p.deletes), count(p.inserts))
		began := time.Now()
		if err := modBatches(ctx, c, "UPDATE bench SET a = a + 1, c = now(), d = d + 1", n, 10, updRem, per); err != nil {
			return nil, fmt.Errorf("pass %d updates: %w", pass, err)
		}
		if err := modBatches(ctx, c, "DELETE FROM bench", n, 100, delRem, per); err != nil {
			return nil, fmt.Errorf("pass %d deletes: %w", pass, err)
		}
		if p.inserts > 0 {
			if err := insertBatches(ctx, c, n+1, n+p.inserts, per); err != nil {
				return nil, fmt.Errorf("pass %d inserts: %w", pass, err)
			}
		}
		p.genTime = time.Since(began)
		changes := p.updates + p.deletes + p.inserts
		if p.drain, err = h.drainPGCDC(ctx, h.bin, r, changes, nil); err != nil {
			return nil, fmt.Errorf("pass %d: pg-cdc start: %w", pass, err)
		}
		h.logf("compact: pass %d: %s changes durable in %s", pass, count(changes), p.drain.usage.Wall.Round(100*time.Millisecond))
		live += int64(p.inserts - p.deletes)
		p.wantLive = live
		m := readManifest(r)
		t := m.Tables["public.bench"]
		if t == nil || t.Base == nil {
			return nil, fmt.Errorf("pass %d: the manifest holds no base for public.bench", pass)
		}
		p.baseRows, p.baseFilesCount = t.Base.RowCount, len(t.Base.Files)
		for _, f := range t.Base.Files {
			p.baseBytes += f.Bytes
		}
		p.deltas = len(t.Deltas)
		for _, d := range t.Deltas {
			p.deltaRows += d.Rows
			p.deltaFilesCount += len(d.Files)
			for _, f := range d.Files {
				p.deltaBytes += f.Bytes
			}
		}

		saved := filepath.Join(h.dir, fmt.Sprintf("compact-input-%d", pass))
		if err := cloneTree(r.sink, saved); err != nil {
			return nil, fmt.Errorf("copy the sink: %w", err)
		}
		for rep := 1; rep <= h.o.reps; rep++ {
			if err := restoreSink(r, saved); err != nil {
				return nil, err
			}
			run, err := h.compactOnce(r, p, nil, fmt.Sprintf("compact-%d-%d.log", pass, rep))
			if err != nil {
				return nil, fmt.Errorf("pass %d, repetition %d: %w", pass, rep, err)
			}
			run.pass, run.rep = pass, rep
			h.logf("compact: pass %d rep %d %6.2fs  %9.0f versions/s  cpu %6.2fs  rss %s  runs %d  %s → %s",
				pass, rep, run.usage.Wall.Seconds(), float64(run.versions)/run.usage.Wall.Seconds(), run.usage.CPU.Seconds(),
				bytesIEC(run.usage.MaxRSS), run.runs, bytesIEC(run.bytesIn), bytesIEC(run.bytesOut))
			p.runs = append(p.runs, run)
		}
		if pass == 1 && h.o.profile {
			// One more, profiled and not counted; it leaves the same
			// result as the others for pass 2.
			if err := restoreSink(r, saved); err != nil {
				return nil, err
			}
			if res.profile, err = h.profileCompaction(ctx, r, p); err != nil {
				return nil, fmt.Errorf("profile: %w", err)
			}
		}
		if !h.o.keep {
			if err := os.RemoveAll(saved); err != nil {
				return nil, err
			}
		}
		res.passes = append(res.passes, p)
	}
	c.Close(context.Background())
	if !h.o.keep {
		// The sinks are the largest thing the harness writes.
		if err := os.RemoveAll(r.dir); err != nil {
			return nil, err
		}
	}
	return res, h.dropDatabase(ctx, db)
}

// compactOnce runs pg-cdc compact on r's sink and checks what it wrote.
func (h *harness) compactOnce(r pgcdcRun, p *compactPass, env []string, logName string) (compactRun, error) {
	var run compactRun
	before := readManifest(r)
	if before == nil || before.Tables["public.bench"] == nil {
		return run, fmt.Errorf("no manifest to compact")
	}
	bt := before.Tables["public.bench"]
	if bt.Base != nil {
		run.versions += bt.Base.RowCount
		for _, f := range bt.Base.Files {
			run.bytesIn += f.Bytes
		}
	}
	for _, d := range bt.Deltas {
		run.versions += d.Rows
		for _, f := range d.Files {
			run.bytesIn += f.Bytes
		}
	}
	logPath := filepath.Join(r.dir, logName)
	_, u, err := runProc(time.Hour, h.bin, []string{"-c", r.config, "compact", "--table", "public.bench"}, env, logPath)
	if err != nil {
		b, _ := os.ReadFile(logPath)
		return run, fmt.Errorf("%w\n%s", err, tail(string(b), 20))
	}
	run.usage = u
	after := readManifest(r)
	t := after.Tables["public.bench"]
	if t == nil || t.Base == nil || t.Base.CompactedAt == nil || len(t.Deltas) != 0 {
		return run, fmt.Errorf("pg-cdc compact left no compacted base, or deltas")
	}
	run.rows, run.tombstones, run.files = t.Base.RowCount, t.Base.Tombstones, len(t.Base.Files)
	for _, f := range t.Base.Files {
		run.bytesOut += f.Bytes
	}
	if got := run.rows - run.tombstones; got != p.wantLive {
		return run, fmt.Errorf("the compacted base holds %d live rows, want %d", got, p.wantLive)
	}
	run.runs = -1
	if b, err := os.ReadFile(logPath); err == nil {
		if m := logRuns.FindSubmatch(b); m != nil {
			run.runs, _ = strconv.Atoi(string(m[1]))
		}
	}
	return run, nil
}

// logRuns finds the sorted runs in compaction's "compacted table" line.
var logRuns = regexp.MustCompile(`msg="compacted table".* runs=(\d+)`)

// profileCompaction runs one more compaction with pg-cdc's profiling
// variables set.
func (h *harness) profileCompaction(ctx context.Context, r pgcdcRun, p *compactPass) (*profile, error) {
	cpu, mem := filepath.Join(r.dir, "compact-cpu.pprof"), filepath.Join(r.dir, "compact-mem.pprof")
	h.logf("compact: profiling one compaction (%s, %s)", cpu, mem)
	run, err := h.compactOnce(r, p, []string{"PG_CDC_CPUPROFILE=" + cpu, "PG_CDC_MEMPROFILE=" + mem}, "compact-profile.log")
	if err != nil {
		return nil, err
	}
	prof := &profile{run: drainRun{usage: run.usage, rows: run.versions}, files: r.dir}
	prof.cpuTop, prof.memTop = h.pprofTops(ctx, cpu, mem)
	return prof, nil
}

// restoreSink replaces r's sink with a copy of saved.
func restoreSink(r pgcdcRun, saved string) error {
	if err := os.RemoveAll(r.sink); err != nil {
		return err
	}
	if err := cloneTree(saved, r.sink); err != nil {
		return fmt.Errorf("restore the sink: %w", err)
	}
	return nil
}

// cloneTree copies the directory tree src to dst: files of 1 MiB or more are
// hard-linked (the filesystem sink replaces files by rename, never writes
// into one), smaller ones (manifest, lock files) copied.
func cloneTree(src, dst string) error {
	return filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case info.IsDir():
			return os.MkdirAll(target, 0o755)
		case !info.Mode().IsRegular():
			return nil
		case info.Size() >= 1<<20:
			if err := os.Link(path, target); err == nil {
				return nil
			}
		}
		return copyFile(path, target)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// appendConfig adds YAML sections to r's configuration.
func appendConfig(r pgcdcRun, yaml string) error {
	f, err := os.OpenFile(r.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(yaml); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// keysMod counts the keys k in 1..n with k % mod == rem (0 < rem < mod).
func keysMod(n, mod, rem int) int {
	if n < rem {
		return 0
	}
	return (n-rem)/mod + 1
}

// modBatches runs stmt (an UPDATE or DELETE of bench) on the keys 1..n with
// id % mod = rem, per keys to a transaction, server-side.
func modBatches(ctx context.Context, c *pgx.Conn, stmt string, n, mod, rem, per int) error {
	window := per * mod
	sql := fmt.Sprintf(`DO $$
DECLARE lo bigint;
BEGIN
  FOR lo IN SELECT generate_series(1, %d, %d) LOOP
    %s WHERE id BETWEEN lo AND lo + %d - 1 AND id %% %d = %d;
    COMMIT;
  END LOOP;
END $$`, n, window, stmt, window, mod, rem)
	_, err := c.Exec(ctx, sql)
	return err
}

func (c *compactResult) budgetText() string {
	if c.budget > 0 {
		return "memory_budget_bytes " + bytesIEC(c.budget)
	}
	return "memory_budget_bytes 64 MiB (default)"
}

func (p *compactPass) of(f func(compactRun) float64) bench.Summary {
	xs := make([]float64, 0, len(p.runs))
	for _, run := range p.runs {
		xs = append(xs, f(run))
	}
	return bench.Summarize(xs)
}

func (p *compactPass) rss() bench.Summary {
	return p.of(func(r compactRun) float64 { return float64(r.usage.MaxRSS) })
}

func (r *report) renderCompaction(p func(string, ...any)) {
	c := r.compact
	if c == nil || len(c.passes) == 0 {
		return
	}
	first := c.passes[0]
	p("## Compaction\n\n")
	p("A table of %s rows of the schema below, snapshotted by `pg-cdc init` (a base of %s in %d file(s)), then changed in %s-row transactions that `pg-cdc start` made durable as deltas. ",
		count(c.rows), bytesIEC(first.baseBytes), first.baseFilesCount, count(r.opts.txnRows))
	p("`pg-cdc compact --table public.bench` is timed as a process, from start to exit: it downloads the base and the deltas, sorts the versions by key (an external sort that spills sorted runs beyond `compaction.memory_budget_bytes`; a base an earlier compaction sorted is not sorted again but merged as it is read), folds each key's versions (docs/design.md §7), writes the new base as zstd Parquet, uploads it, commits the manifest and collects garbage. ")
	p("Every repetition of a pass starts from the same sink (a copy taken before the first), so they fold the same files; the last one's result is pass 2's base. ")
	p("Pass 1 is a table's first compaction: the snapshot base (in COPY order: it goes through the sort with the deltas) with updates to a tenth of the keys and deletes of a hundredth. ")
	p("Pass 2 is the steady state: pass 1's base (sorted, tombstones kept: only the deltas go through the sort) with updates to another tenth, deletes of another hundredth and a hundredth new keys. ")
	p("Versions are input rows (base rows, tombstones included, plus delta rows); output rows are the new base's, tombstones included. Settings: %s, `compaction.target_file_bytes` 256 MiB (default).\n\n", c.budgetText())
	p("| pass | input | bytes in → out | wall | **versions/s** | output rows/s | CPU µs/version | sorted runs | **peak RSS** |\n")
	p("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, ps := range c.passes {
		if len(ps.runs) == 0 {
			continue
		}
		last := ps.runs[len(ps.runs)-1]
		input := fmt.Sprintf("base %s rows (%d file(s)) + %s delta rows (%d epochs: %s U, %s D, %s I)", count(int(ps.baseRows)), ps.baseFilesCount,
			count(int(ps.deltaRows)), ps.deltas, count(ps.updates), count(ps.deletes), count(ps.inserts))
		p("| %d | %s | %s → %s | %s | **%s** | %s | %s | %s | **%s** |\n", ps.n, input,
			bytesIEC(last.bytesIn), bytesIEC(last.bytesOut),
			ps.of(func(r compactRun) float64 { return r.usage.Wall.Seconds() }).Range(secs),
			ps.of(func(r compactRun) float64 { return float64(r.versions) / r.usage.Wall.Seconds() }).Range(rate),
			ps.of(func(r compactRun) float64 { return float64(r.rows) / r.usage.Wall.Seconds() }).Range(rate),
			ps.of(func(r compactRun) float64 { return r.usage.CPU.Seconds() * 1e6 / float64(r.versions) }).Range(f2),
			ps.of(func(r compactRun) float64 { return float64(r.runs) }).Range(f0),
			ps.rss().Range(mib))
	}
	p("\nThe inputs (not timed against anything): table load %s; pg-cdc init %s (peak RSS %s)", c.loadTime.Round(time.Second), c.init.Wall.Round(100*time.Millisecond), bytesIEC(c.init.MaxRSS))
	for _, ps := range c.passes {
		p("; pass %d changes written in %s, durable through pg-cdc start in %s", ps.n, ps.genTime.Round(100*time.Millisecond), ps.drain.usage.Wall.Round(100*time.Millisecond))
	}
	p(".\n\n")
}

func (r *report) renderCompactProfile(p func(string, ...any)) {
	c := r.compact
	if c == nil || c.profile == nil {
		return
	}
	prof := c.profile
	p("## Profile of pg-cdc compact\n\n")
	p("One extra pass-1 compaction with `PG_CDC_CPUPROFILE` and `PG_CDC_MEMPROFILE` set, not counted above: %.2f s, %s versions/s, CPU %.2f s, peak RSS %s.\n\n",
		prof.run.usage.Wall.Seconds(), rate(float64(prof.run.rows)/prof.run.usage.Wall.Seconds()), prof.run.usage.CPU.Seconds(), bytesIEC(prof.run.usage.MaxRSS))
	p("CPU (`go tool pprof -top`):\n\n```\n%s\n```\n\n", prof.cpuTop)
	if prof.memTop != "" {
		p("Allocations (`-sample_index=alloc_space`):\n\n```\n%s\n```\n\n", prof.memTop)
	}
}
