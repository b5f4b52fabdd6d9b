package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/bench"
)

type machine struct {
	nproc                      int
	cpu, memory, kernel        string
	loadStart                  string
	goVersion, postgres, pgcdc string
}

type report struct {
	opts              options
	started, finished time.Time
	machine           machine
	recvlogical       string
	drains            []*drainResult
	snapshot          *snapshotResult
	compact           *compactResult
	lag               *lagResult
	read              *readResult
	serve             *serveResult
	catalog           *catalogResult
	soak              *soakResult
}

// Targets of issue 3.
const (
	targetDrain    = 0.9
	targetSnapshot = 0.8
	targetRSS      = 256 << 20
	// targetCompactRSS is for a compaction of targetCompactRows rows.
	targetCompactRSS  = 512 << 20
	targetCompactRows = 10_000_000
)

func (r *report) write(path string) error {
	var b bytes.Buffer
	r.render(&b)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (r *report) render(b *bytes.Buffer) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	o := r.opts
	p("# Benchmarks\n\n")
	status := "complete"
	if r.finished.IsZero() {
		status = "**partial** (the run was still going or failed)"
	}
	p("Written by `make bench` (`bench/cmd/pgcdc-bench`) on %s; run %s", r.started.UTC().Format("2006-01-02 15:04 UTC"), status)
	if !r.finished.IsZero() {
		p(" in %s", r.finished.Sub(r.started).Round(time.Second))
	}
	p(". Every figure is the median of %d repetitions with the range in parentheses (live lag: one run, percentiles over its transactions", o.reps)
	for _, d := range r.drains {
		if n := d.reps(); n != o.reps {
			p("; %s: %d repetitions", strings.ToUpper(d.w.key), n)
		}
	}
	p("); ")
	p("the consumers ran in an order that rotates from one repetition to the next. ")
	p("`go run ./bench/cmd/pgcdc-bench --help` lists the knobs; `--full` uses the issue's 10M-row snapshot table.\n\n")

	p("## How to read this\n\n")
	p("The **ratios** are the headline: each is taken within one repetition, between runs that followed each other on the same data, and then the median of those ratios is shown. ")
	p("Absolute rates move with whatever else the shared machine is doing (repeated runs here vary by tens of percent); a ratio moves much less, and its range shows by how much. ")
	p("The **bare client** is the ceiling for streaming: it asks PostgreSQL for exactly what pg-cdc asks for and parses every message with pglogrepl, then throws it away, so pg-cdc ÷ bare is the share of the protocol's own speed that pg-cdc keeps while also converting, compressing, writing Parquet and committing manifests. ")
	p("On %d cores the walsender (PostgreSQL's side of the stream) and the consumer share the machine: CPU per row shows where the time goes even when wall time is bound by the walsender. ", r.machine.nproc)
	p("`pg_recvlogical` (PostgreSQL's own client, writing to /dev/null) is context, not a target. ")
	p("Raw `COPY … (FORMAT binary)` into a counter is the ceiling for the snapshot; `COPY` text (what pg-cdc reads today) is context.\n\n")

	r.renderMachine(p)
	r.renderTargets(p)
	r.renderDrains(p)
	r.renderBinary(p)
	r.renderSnapshot(p)
	r.renderCompaction(p)
	r.renderLag(p)
	r.renderRead(p)
	r.renderServe(p)
	r.renderCatalog(p)
	r.renderSoak(p)
	var missing []string
	if !r.hasDrain("w6") {
		missing = append(missing, "- **pgbench TPC-B mix (W6)**: not in this run (`--only w6` measures it; it needs pgbench).\n")
	}
	if r.compact == nil {
		missing = append(missing, "- **Compaction** rows/s and peak RSS (target ≤ 512 MB for 10M rows): not in this run (`--only compact` measures it).\n")
	}
	if o.snapshotRows < 10_000_000 {
		missing = append(missing, fmt.Sprintf("- **10M-row snapshot**: this run used %s rows to stay within about 15 minutes; `make bench BENCH_FLAGS=--full` runs the issue's 10M.\n", count(o.snapshotRows)))
	}
	if r.compact != nil && r.compact.rows < targetCompactRows {
		missing = append(missing, fmt.Sprintf("- **10M-row compaction**: this run compacted %s rows; `make bench BENCH_FLAGS=--full` runs the issue's 10M.\n", count(r.compact.rows)))
	}
	if r.soak == nil {
		missing = append(missing, "- **Soak** (issue 29): not in the default run; `make bench BENCH_FLAGS=\"--only soak\"` runs it (10 minutes; `--full`: 1 hour).\n")
	}
	if len(missing) > 0 {
		p("## Not yet measured\n\n%s\n", strings.Join(missing, ""))
	}
	r.renderProfile(p)
	r.renderCompactProfile(p)
	r.renderMethod(p)
}

func (r *report) renderMachine(p func(string, ...any)) {
	m := r.machine
	p("## Machine\n\n| | |\n| --- | --- |\n")
	p("| CPUs (nproc) | %d |\n| CPU | %s |\n| memory | %s |\n| kernel | %s |\n| load average at start | %s |\n", m.nproc, m.cpu, m.memory, m.kernel, m.loadStart)
	p("| Go | %s |\n| PostgreSQL | %s |\n| pg-cdc | %s |\n", m.goVersion, m.postgres, strings.ReplaceAll(m.pgcdc, "\n", "; "))
	recv := "not found"
	if r.recvlogical != "" {
		recv = "`" + r.recvlogical + "`"
	}
	p("| pg_recvlogical | %s |\n\n", recv)
}

func (r *report) hasDrain(key string) bool {
	for _, d := range r.drains {
		if d.w.key == key {
			return true
		}
	}
	return false
}

// reps is the number of repetitions d ran.
func (d *drainResult) reps() int {
	n := 0
	for _, run := range d.runs {
		n = max(n, run.rep)
	}
	return n
}

// drainRatio is the per-repetition ratio pg-cdc rate ÷ other's rate (the
// same rows over each one's wall time).
func drainRatio(d *drainResult, other string) bench.Summary {
	walls := map[int]map[string]time.Duration{}
	for _, run := range d.runs {
		if walls[run.rep] == nil {
			walls[run.rep] = map[string]time.Duration{}
		}
		walls[run.rep][run.consumer] = run.usage.Wall
	}
	var xs []float64
	for _, w := range walls {
		if w[consPGCDC] > 0 && w[other] > 0 {
			xs = append(xs, w[other].Seconds()/w[consPGCDC].Seconds())
		}
	}
	return bench.Summarize(xs)
}

func (d *drainResult) of(consumer string, f func(drainRun) float64) bench.Summary {
	var xs []float64
	for _, run := range d.runs {
		if run.consumer == consumer {
			xs = append(xs, f(run))
		}
	}
	return bench.Summarize(xs)
}

func (d *drainResult) rate(consumer string) bench.Summary {
	return d.of(consumer, func(r drainRun) float64 { return float64(d.w.rows) / r.usage.Wall.Seconds() })
}

func (d *drainResult) cpuPerRow(consumer string) bench.Summary {
	return d.of(consumer, func(r drainRun) float64 { return r.usage.CPU.Seconds() * 1e6 / float64(d.w.rows) })
}

func (d *drainResult) walsenderPerRow(consumer string) bench.Summary {
	return d.of(consumer, func(r drainRun) float64 { return r.walsender.Seconds() * 1e6 / float64(d.w.rows) })
}

// busy is the median share of the wall time the walsender (or the
// consumer) spent on a CPU during consumer's runs.
func (d *drainResult) busy(consumer string, walsender bool) float64 {
	return d.of(consumer, func(r drainRun) float64 {
		if walsender {
			return r.walsender.Seconds() / r.usage.Wall.Seconds()
		}
		return r.usage.CPU.Seconds() / r.usage.Wall.Seconds()
	}).Median
}

func (d *drainResult) rss(consumer string) bench.Summary {
	return d.of(consumer, func(r drainRun) float64 { return float64(r.usage.MaxRSS) })
}

func (d *drainResult) parquetPerRow() bench.Summary {
	return d.of(consPGCDC, func(r drainRun) float64 { return float64(r.parquet) / float64(d.w.rows) })
}

func (r *report) renderTargets(p func(string, ...any)) {
	p("## Targets of issue 3\n\n| target | measured here | met |\n| --- | --- | --- |\n")
	if len(r.drains) > 0 {
		var parts []string
		met := true
		for _, d := range r.drains {
			s := drainRatio(d, consBare)
			parts = append(parts, fmt.Sprintf("%s %s", strings.ToUpper(d.w.key), s.Range(ratio)))
			met = met && s.Median >= targetDrain
		}
		p("| backlog drain ≥ %.1f× the bare client (until durable in the manifest) | %s | %s |\n", targetDrain, strings.Join(parts, "; "), yes(met))
	}
	if r.lag != nil {
		limit := float64(r.opts.flushSec) + 1
		p("| live lag ≤ flush interval + 1 s (= %.0f s here) | commit → manifest p50 %s, p99 %s, max %s | %s |\n", limit,
			secs(r.lag.latency.P50), secs(r.lag.latency.P99), secs(r.lag.latency.Max), yes(r.lag.latency.Max <= limit && r.lag.unmatched == 0))
	}
	if s := r.snapshot; s != nil {
		rt := snapRatio(s, snapBinary)
		extra := ""
		if ps := snapRatio(s, snapPsql); ps.N > 0 {
			extra = fmt.Sprintf("; against psql's: %s", ps.Range(ratio))
		}
		p("| snapshot ≥ %.1f× raw `COPY … (FORMAT binary)` to /dev/null | %s against a Go client's (%s rows)%s | %s |\n", targetSnapshot, rt.Range(ratio), count(s.rows), extra, yes(rt.Median >= targetSnapshot))
	}
	if len(r.drains) > 0 || r.lag != nil {
		var parts []string
		worst := int64(0)
		for _, d := range r.drains {
			m := int64(d.rss(consPGCDC).Max)
			worst = max(worst, m)
			parts = append(parts, fmt.Sprintf("%s %s", strings.ToUpper(d.w.key), bytesIEC(m)))
		}
		if r.lag != nil {
			worst = max(worst, r.lag.usage.MaxRSS)
			parts = append(parts, "live "+bytesIEC(r.lag.usage.MaxRSS))
		}
		p("| peak RSS ≤ 256 MB for every streaming workload (worst of the repetitions) | %s | %s |\n", strings.Join(parts, "; "), yes(worst <= targetRSS))
	}
	if c := r.compact; c != nil {
		var parts []string
		worst := int64(0)
		for _, ps := range c.passes {
			m := int64(ps.rss().Max)
			worst = max(worst, m)
			parts = append(parts, fmt.Sprintf("pass %d %s", ps.n, bytesIEC(m)))
		}
		met := "–"
		what := fmt.Sprintf("%s rows, %s: %s", count(c.rows), c.budgetText(), strings.Join(parts, "; "))
		if c.rows >= targetCompactRows {
			met = yes(worst <= targetCompactRSS && len(parts) > 0)
		} else {
			what += " (not 10M: `--full` measures it)"
		}
		p("| compaction of 10M rows ≤ 512 MB peak RSS (worst of the repetitions) | %s | %s |\n\n", what, met)
	} else {
		p("| compaction of 10M rows ≤ 512 MB | not in this run | – |\n\n")
	}
}

func (r *report) renderDrains(p func(string, ...any)) {
	if len(r.drains) == 0 {
		return
	}
	p("## Backlog drain\n\n")
	p("Each backlog was written with every consumer off, into slots created beforehand, so every consumer decodes the same WAL. ")
	p("The bare client and pg_recvlogical stop at a logical message written right after the backlog; pg-cdc is timed from its start until the harness reads a manifest that lists every backlog row (then it gets SIGTERM). ")
	p("pg-cdc runs with `flush.interval_sec: %d` and `replication.standby_interval_sec: %d` so the last flush does not wait out a long interval; everything else is its default (`flush.max_rows` 100,000, `flush.max_bytes` 128 MiB, `replication.memory_budget_bytes` 64 MiB). ", r.opts.flushSec, r.opts.flushSec)
	p("Rates count the workload's rows over wall time from process start, connection included, for all consumers")
	if r.hasDrain("w6") {
		p("; a W6 row is one change: each pgbench transaction updates one row of pgbench_accounts, pgbench_tellers and pgbench_branches and inserts one into pgbench_history, so it is %d rows, and pg-cdc is done when the deltas of the four tables hold them all", tpcbChangesPerTxn)
	}
	p(".\n\n")
	hasRecv := false
	for _, d := range r.drains {
		for _, run := range d.runs {
			hasRecv = hasRecv || run.consumer == consRecv
		}
	}
	p("| workload | WAL | bare client rows/s | pg-cdc rows/s | **pg-cdc ÷ bare** |")
	if hasRecv {
		p(" pg_recvlogical rows/s | pg-cdc ÷ pg_recvlogical |")
	}
	p("\n| --- | ---: | ---: | ---: | ---: |")
	if hasRecv {
		p(" ---: | ---: |")
	}
	p("\n")
	for _, d := range r.drains {
		p("| %s | %s | %s | %s | **%s** |", d.w.title, bytesIEC(d.walBytes), d.rate(consBare).Range(rate), d.rate(consPGCDC).Range(rate), drainRatio(d, consBare).Range(ratio))
		if hasRecv {
			p(" %s | %s |", d.rate(consRecv).Range(rate), drainRatio(d, consRecv).Range(ratio))
		}
		p("\n")
	}
	for _, d := range r.drains {
		if rt := drainRatio(d, consCompare); rt.N > 0 {
			p("\nA/B (`--compare %s`): %s pg-cdc ÷ the compared binary %s; its CPU µs/row %s against %s, peak RSS %s.\n", r.opts.compare,
				strings.ToUpper(d.w.key), rt.Range(ratio), d.cpuPerRow(consCompare).Range(f2), d.cpuPerRow(consPGCDC).Range(f2), d.rss(consCompare).Range(mib))
		}
	}
	p("\nCost per row and size, same runs:\n\n")
	p("| workload | WAL B/row | Parquet B/row (pg-cdc deltas) | CPU µs/row: bare client | CPU µs/row: pg-cdc |")
	if hasRecv {
		p(" CPU µs/row: pg_recvlogical |")
	}
	p(" walsender CPU µs/row, serving: bare client / pg-cdc | peak RSS: bare client | **peak RSS: pg-cdc** |\n| --- | ---: | ---: | ---: | ---: |")
	if hasRecv {
		p(" ---: |")
	}
	p(" ---: | ---: | ---: |\n")
	for _, d := range r.drains {
		p("| %s | %.0f | %s | %s | %s |", strings.ToUpper(d.w.key), float64(d.walBytes)/float64(d.w.rows), d.parquetPerRow().Range(f0),
			d.cpuPerRow(consBare).Range(f2), d.cpuPerRow(consPGCDC).Range(f2))
		if hasRecv {
			p(" %s |", d.cpuPerRow(consRecv).Range(f2))
		}
		p(" %s / %s | %s | **%s** |\n", d.walsenderPerRow(consBare).Range(f2), d.walsenderPerRow(consPGCDC).Range(f2), d.rss(consBare).Range(mib), d.rss(consPGCDC).Range(mib))
	}
	p("\nWhat limits each drain: the share of the wall time each process was on a CPU (one core = 100%%), medians over the repetitions. ")
	p("A process near 100%% is the bottleneck; the walsender is PostgreSQL's side of the stream, and how much CPU it needs per row depends on how the consumer reads (see the walsender column above).\n\n")
	p("| workload | serving the bare client: walsender / client | serving pg-cdc: walsender / pg-cdc | bottleneck for pg-cdc |\n| --- | ---: | ---: | --- |\n")
	for _, d := range r.drains {
		bw, bc := d.busy(consBare, true), d.busy(consBare, false)
		pw, pc := d.busy(consPGCDC, true), d.busy(consPGCDC, false)
		neck := "in turn: neither is busy throughout"
		switch {
		case pc >= 0.85 && pc >= pw:
			neck = "**pg-cdc**"
		case pw >= 0.85:
			neck = "walsender"
		}
		p("| %s | %.0f%% / %.0f%% | %.0f%% / %.0f%% | %s |\n", strings.ToUpper(d.w.key), 100*bw, 100*bc, 100*pw, 100*pc, neck)
	}
	p("\nBacklog generation (not timed against anything): ")
	var parts []string
	for _, d := range r.drains {
		parts = append(parts, fmt.Sprintf("%s %s", strings.ToUpper(d.w.key), d.genTime.Round(100*time.Millisecond)))
	}
	p("%s.\n\n", strings.Join(parts, ", "))
}

// renderBinary compares the bare client asking pgoutput for binary values
// with the one asking for text, on the same backlogs (issue 4, item 7).
func (r *report) renderBinary(p func(string, ...any)) {
	has := false
	for _, d := range r.drains {
		has = has || d.rate(consBareBin).N > 0
	}
	if !has {
		return
	}
	p("## pgoutput binary against text\n\n")
	p("The bare client once more on every backlog, asking pgoutput for values in binary (`binary 'true'`, each type's send function) instead of text (its output function); everything else is the same. ")
	p("Binary ÷ text is the per-repetition ratio of their rates. The walsender's CPU is where a difference would show: it runs each value's output or send function, and it is the bottleneck of every drain above except where pg-cdc is. ")
	p("The bare client only parses messages, so its own CPU does not include turning values into typed ones (for that, see the decision in docs/decisions.md).\n\n")
	p("| workload | text rows/s | binary rows/s | **binary ÷ text** | walsender CPU µs/row: text / binary | client CPU µs/row: text / binary | pgoutput B/row: text / binary |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, d := range r.drains {
		if d.rate(consBareBin).N == 0 {
			continue
		}
		var xs []float64
		walls := map[int]map[string]time.Duration{}
		for _, run := range d.runs {
			if walls[run.rep] == nil {
				walls[run.rep] = map[string]time.Duration{}
			}
			walls[run.rep][run.consumer] = run.usage.Wall
		}
		for _, w := range walls {
			if w[consBare] > 0 && w[consBareBin] > 0 {
				xs = append(xs, w[consBare].Seconds()/w[consBareBin].Seconds())
			}
		}
		perRow := func(cons string) bench.Summary {
			return d.of(cons, func(r drainRun) float64 { return float64(r.bytes) / float64(d.w.rows) })
		}
		p("| %s | %s | %s | **%s** | %s / %s | %s / %s | %s / %s |\n", strings.ToUpper(d.w.key),
			d.rate(consBare).Range(rate), d.rate(consBareBin).Range(rate), bench.Summarize(xs).Range(ratio),
			d.walsenderPerRow(consBare).Range(f2), d.walsenderPerRow(consBareBin).Range(f2),
			d.cpuPerRow(consBare).Range(f2), d.cpuPerRow(consBareBin).Range(f2),
			perRow(consBare).Range(f0), perRow(consBareBin).Range(f0))
	}
	p("\n")
}

func snapRatio(s *snapshotResult, other string) bench.Summary {
	var xs []float64
	for rep := 1; rep <= len(s.runs); rep++ {
		var pw, ow time.Duration
		for _, run := range s.runs {
			if run.rep == rep && run.who == snapPGCDC {
				pw = run.usage.Wall
			}
			if run.rep == rep && run.who == other {
				ow = run.usage.Wall
			}
		}
		if pw > 0 && ow > 0 {
			xs = append(xs, ow.Seconds()/pw.Seconds())
		}
	}
	return bench.Summarize(xs)
}

func (s *snapshotResult) of(who string, f func(snapRun) float64) bench.Summary {
	var xs []float64
	for _, run := range s.runs {
		if run.who == who {
			xs = append(xs, f(run))
		}
	}
	return bench.Summarize(xs)
}

func (r *report) renderSnapshot(p func(string, ...any)) {
	s := r.snapshot
	if s == nil {
		return
	}
	p("## Snapshot\n\n")
	p("A table of %s rows (%s on disk, vacuumed and frozen, cache warm). pg-cdc init is timed as a process, from start to exit: preflight, publication, slot, the COPY under the exported snapshot, Parquet, upload and manifest. The COPY clients are timed the same way, connection included. ", count(s.rows), bytesIEC(s.tableSize))
	p("pg-cdc reads one table on one connection, in text format. `psql COPY binary` is psql writing the same binary COPY to /dev/null, the reference the issue quotes (its bytes are not counted).\n\n")
	p("| | rows/s | **pg-cdc ÷ this** | CPU µs/row | peak RSS | bytes out |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, who := range []string{snapBinary, snapText, snapPsql, snapPGCDC} {
		if s.of(who, func(snapRun) float64 { return 0 }).N == 0 {
			continue
		}
		rt := "–"
		if who != snapPGCDC {
			rt = "**" + snapRatio(s, who).Range(ratio) + "**"
		}
		out := "–"
		if who != snapPsql {
			out = s.of(who, func(r snapRun) float64 { return float64(r.bytes) }).Range(func(x float64) string { return bytesIEC(int64(x)) })
		}
		p("| %s | %s | %s | %s | %s | %s |\n", who,
			s.of(who, func(r snapRun) float64 { return float64(s.rows) / r.usage.Wall.Seconds() }).Range(rate), rt,
			s.of(who, func(r snapRun) float64 { return r.usage.CPU.Seconds() * 1e6 / float64(s.rows) }).Range(f2),
			s.of(who, func(r snapRun) float64 { return float64(r.usage.MaxRSS) }).Range(mib), out)
	}
	p("\nTable load (not timed against anything): %s.\n\n", s.loadTime.Round(time.Second))
}

func (r *report) renderLag(p func(string, ...any)) {
	l := r.lag
	if l == nil {
		return
	}
	p("## Live lag\n\n")
	p("pg-cdc start (`flush.interval_sec: %d`) while W1 runs at a fixed rate of %s rows/s in %s-row transactions for %s (achieved %s rows/s, %d transactions, %d epochs). ",
		r.opts.flushSec, count(l.rate), count(l.per), l.duration, count(int(l.achieved)), l.txns, l.epochs)
	p("**Commit → manifest** is, per transaction, the time from its COMMIT returning to the harness's first read of a manifest listing it (the manifest is polled every %s, which is included). ", l.pollInterval)
	p("**WAL behind** is the source's `pg_current_wal_lsn()` minus the manifest's end LSN, sampled every 250 ms.\n\n")
	p("| | p50 | p99 | max |\n| --- | ---: | ---: | ---: |\n")
	p("| commit → manifest | %s | %s | %s |\n", secs(l.latency.P50), secs(l.latency.P99), secs(l.latency.Max))
	p("| WAL behind | %s | %s | %s |\n\n", bytesIEC(int64(l.walLag.P50)), bytesIEC(int64(l.walLag.P99)), bytesIEC(int64(l.walLag.Max)))
	p("pg-cdc over the run: CPU %.1f s (%.0f%% of one core), peak RSS %s.", l.usage.CPU.Seconds(), 100*l.usage.CPU.Seconds()/l.usage.Wall.Seconds(), bytesIEC(l.usage.MaxRSS))
	if l.unmatched > 0 {
		p(" **%d transactions were not found in any epoch.**", l.unmatched)
	}
	p("\n\n")
}

func (r *report) renderProfile(p func(string, ...any)) {
	var prof *profile
	for _, d := range r.drains {
		if d.profile != nil {
			prof = d.profile
		}
	}
	if prof == nil {
		return
	}
	p("## Profile of pg-cdc draining W1\n\n")
	p("One extra W1 drain with `PG_CDC_CPUPROFILE` and `PG_CDC_MEMPROFILE` set (internal/profiling), not counted above: %.2f s, %s rows/s, CPU %.2f s.\n\n",
		prof.run.usage.Wall.Seconds(), rate(float64(prof.run.rows)/prof.run.usage.Wall.Seconds()), prof.run.usage.CPU.Seconds())
	p("CPU (`go tool pprof -top`):\n\n```\n%s\n```\n\n", prof.cpuTop)
	if prof.memTop != "" {
		p("Allocations (`-sample_index=alloc_space`):\n\n```\n%s\n```\n\n", prof.memTop)
	}
}

func (r *report) renderMethod(p func(string, ...any)) {
	p("## Method and settings\n\n")
	p("- PostgreSQL: a throwaway cluster (internal/pgtest: loopback, `fsync = off`, `full_page_writes = off`) with %s.\n", "`"+strings.Join(pgSettings, "`, `")+"`")
	wide := "random English words (TOAST's pglz and zstd both compress them, to about half and a third)"
	if r.opts.wideRandom {
		wide = "random hex (nothing compresses it: every row carries it whole through WAL)"
	}
	p("- The table: `(id bigint primary key, a int, b text, c timestamptz, d numeric(12,2), e jsonb)`; b is a 32-character md5 and e a three-key JSON object, except in W4, where b is %s of %s; pgoutput sends every such value whole.\n", bytesIEC(int64(r.opts.wideBytes)), wide)
	p("- Backlogs are written server-side (DO blocks that COMMIT every %s rows), W2 updates rows loaded before the slots existed, W3 is a single INSERT … SELECT (PostgreSQL streams it to every consumer in chunks, since it exceeds logical_decoding_work_mem).\n", count(r.opts.txnRows))
	if r.hasDrain("w6") {
		p("- W6: `pgbench -i -s %d` (logged tables with their primary keys, filled and vacuumed before any slot exists; pg-cdc init snapshots them), then `pgbench -n -b tpcb-like -M prepared -t %d -c %d -j %d` with every consumer off; the harness checks that every transaction committed, in pgbench's report and in pgbench_history's row count. pgbench_history has no primary key: pg-cdc captures it insert-only, with a warning at init, which is all TPC-B does to it. An accounts update changes abalance only; pgoutput sends the whole new row (84-character filler included) under REPLICA IDENTITY DEFAULT, and no value is TOASTed.\n",
			r.opts.pgbenchScale, r.opts.pgbenchTxns/pgbenchClients, pgbenchClients, pgbenchThreads)
	}
	p("- The bare client and the COPY clients set SO_RCVLOWAT to 64 KiB and read through a 256 KiB buffer (the best this protocol allows a client here); they confirm each transaction's end as they go.\n")
	p("- pg_recvlogical gets the same plugin options as pg-cdc (`proto_version 2`, the publication, `messages`, `streaming`), `--endpos` at the marker, `-f /dev/null`, `-F 0`.\n")
	p("- CPU time and peak RSS come from each child's rusage; CPU includes start-up and, for pg-cdc, the graceful stop.\n")
	p("- Workload sizes: `--rows %d --txn-rows %d --wide-rows %d --wide-bytes %d --snapshot-rows %d --compact-rows %d --compact-memory %d --reps %d --lag-rate %d --lag-duration %s --flush-interval %d --pgbench-scale %d --pgbench-txns %d --pgbench-reps %d`.\n\n",
		r.opts.rows, r.opts.txnRows, r.opts.wideRows, r.opts.wideBytes, r.opts.snapshotRows, r.opts.compactRows, r.opts.compactMemory, r.opts.reps, r.opts.lagRate, r.opts.lagDuration, r.opts.flushSec,
		r.opts.pgbenchScale, r.opts.pgbenchTxns, r.opts.pgbenchReps)
}

// Formatters.

func count(n int) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func bytesIEC(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func rate(x float64) string {
	if x >= 1e6 {
		return fmt.Sprintf("%.2fM", x/1e6)
	}
	return fmt.Sprintf("%.0fk", x/1e3)
}

func ratio(x float64) string { return fmt.Sprintf("%.2f×", x) }
func f0(x float64) string    { return fmt.Sprintf("%.0f", x) }
func f2(x float64) string    { return fmt.Sprintf("%.2f", x) }
func mib(x float64) string   { return fmt.Sprintf("%.0f MiB", x/(1<<20)) }
func secs(x float64) string  { return fmt.Sprintf("%.2f s", x) }

func yes(ok bool) string {
	if ok {
		return "✅ yes"
	}
	return "❌ no"
}
