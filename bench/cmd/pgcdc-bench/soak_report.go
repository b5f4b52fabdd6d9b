package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// What the soak section reports: windows over its samples, the issue's
// criteria, a table of samples a minute apart, and the charts.

// soakIndex is the last sample taken at or before t (half a sampling
// interval of slack: the samples drift by the time a sample takes); -1
// when none.
func (res *soakResult) soakIndex(t time.Duration) int {
	i := -1
	for k, s := range res.samples {
		if s.at <= t+soakEvery/2 {
			i = k
		}
	}
	return i
}

// okAtOrBefore is the last sample at or before index i whose scrape
// succeeded; -1 when none.
func (res *soakResult) okAtOrBefore(i int) int {
	for ; i >= 0; i-- {
		if res.samples[i].ok {
			return i
		}
	}
	return -1
}

// soakInterval is what happened between two samples a < b.
type soakInterval struct {
	changesPerSec, flushP50, flushP99, cpuPerChange float64 // seconds for the flush; µs for the CPU
	flushes                                         float64
}

func (res *soakResult) interval(a, b int) soakInterval {
	out := soakInterval{changesPerSec: math.NaN(), flushP50: math.NaN(), flushP99: math.NaN(), cpuPerChange: math.NaN()}
	if b < 0 || b >= len(res.samples) || a >= b {
		return out
	}
	sb := res.samples[b]
	var sa soakSample
	if a >= 0 {
		sa = res.samples[a]
	}
	if d := (sb.at - sa.at).Seconds(); d > 0 {
		out.changesPerSec = float64(sb.changes-sa.changes) / d
	}
	// CPU is per process: over a restart (kill mode) it is unknown.
	if n := sb.changes - sa.changes; n > 0 && sb.cpu > 0 && sa.cpu > 0 && sa.life == sb.life {
		out.cpuPerChange = float64((sb.cpu - sa.cpu).Microseconds()) / float64(n)
	}
	if j := res.okAtOrBefore(b); j == b {
		var prev histogram
		if i := res.okAtOrBefore(a); i >= 0 {
			prev = res.samples[i].m.flush
		}
		h := sb.m.flush.since(prev)
		out.flushP50, out.flushP99, out.flushes = h.quantile(0.5), h.quantile(0.99), h.count
	}
	return out
}

// soakWindows are the two windows the growth ratios compare: the minute
// ending at minute 2 and the last minute (for a run shorter than 4
// minutes: its first and second half).
func (res *soakResult) soakWindows() (base, end [2]time.Duration) {
	if len(res.samples) == 0 {
		return base, end
	}
	last := res.samples[len(res.samples)-1].at
	baseEnd := 2 * time.Minute
	if last < 4*time.Minute {
		baseEnd = last / 2
	}
	width := min(time.Minute, baseEnd)
	return [2]time.Duration{baseEnd - width, baseEnd}, [2]time.Duration{last - width, last}
}

// windowMedian is the median of f over the samples in window w (NaNs left
// out).
func (res *soakResult) windowMedian(w [2]time.Duration, f func(soakSample) float64) float64 {
	i, j := res.soakIndex(w[0]), res.soakIndex(w[1])
	var xs []float64
	for k := i + 1; k <= j; k++ {
		if v := f(res.samples[k]); finite(v) {
			xs = append(xs, v)
		}
	}
	return median(xs)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// soakSeries is one line of the growth table.
type soakSeries struct {
	name       string
	base, end  float64
	format     func(float64) string
	limit      float64 // the growth limit (×), or 0
	absLimit   float64 // a bound on every sample (delta files), or 0
	worst      float64 // the largest sample, for absLimit
	criterion  bool
	windowNote string
}

func (s soakSeries) ratio() float64 {
	if !(s.base > 0) || !finite(s.end) {
		return math.NaN()
	}
	return s.end / s.base
}

func (s soakSeries) pass() bool {
	switch {
	case s.absLimit > 0:
		return finite(s.worst) && s.worst <= s.absLimit
	case s.limit > 0:
		r := s.ratio()
		return finite(r) && r <= s.limit
	}
	return true
}

func (res *soakResult) series() []soakSeries {
	base, end := res.soakWindows()
	flushQ := func(w [2]time.Duration, q float64) float64 {
		in := res.interval(res.soakIndex(w[0]), res.soakIndex(w[1]))
		if q == 0.5 {
			return in.flushP50
		}
		return in.flushP99
	}
	cpu := func(w [2]time.Duration) float64 {
		return res.interval(res.soakIndex(w[0]), res.soakIndex(w[1])).cpuPerChange
	}
	med := func(f func(soakSample) float64) (float64, float64) {
		return res.windowMedian(base, f), res.windowMedian(end, f)
	}
	worstDelta := math.NaN()
	for _, s := range res.samples {
		if finite(s.deltaMax) && !(s.deltaMax <= worstDelta) {
			worstDelta = s.deltaMax
		}
	}
	var out []soakSeries
	add := func(name string, b, e float64, f func(float64) string, limit float64) {
		out = append(out, soakSeries{name: name, base: b, end: e, format: f, limit: limit, criterion: limit > 0})
	}
	add("flush duration p50 (histogram over the window)", flushQ(base, 0.5), flushQ(end, 0.5), msOr, soakGrowthLimit)
	add("flush duration p99 (histogram over the window)", flushQ(base, 0.99), flushQ(end, 0.99), msOr, soakGrowthLimit)
	b, e := med(func(s soakSample) float64 { return s.m.manifestBytes })
	add("manifest bytes", b, e, bytesOr, soakGrowthLimit)
	b, e = med(func(s soakSample) float64 { return s.countLat })
	add("`count(*)` latency (`pg-cdc query`)", b, e, msOr, soakGrowthLimit)
	b, e = med(func(s soakSample) float64 { return float64(s.rss) })
	add("RSS of `pg-cdc start`", b, e, bytesOr, soakGrowthLimit)
	b, e = med(func(s soakSample) float64 { return s.deltaMax })
	out = append(out, soakSeries{name: "delta files, the most of any table", base: b, end: e, format: f0Or, absLimit: soakDeltaLimit, worst: worstDelta, criterion: true})
	b, e = med(func(s soakSample) float64 { return s.deltaMean })
	add("delta files, mean over tables", b, e, f1Or, 0)
	b, e = med(func(s soakSample) float64 { return s.filterLat })
	add("filtered aggregate latency (`pg-cdc query`)", b, e, msOr, 0)
	add("CPU of `pg-cdc start` per change", cpu(base), cpu(end), usOr, 0)
	b, e = med(func(s soakSample) float64 { return float64(s.metaBytes) })
	add("`_pgcdc/` bytes", b, e, bytesOr, 0)
	b, e = med(func(s soakSample) float64 { return float64(s.icebergBytes) })
	add("`_pgcdc/iceberg/` bytes", b, e, bytesOr, 0)
	return out
}

// verdict is PASS when every criterion passed, the sink equals the source
// for every table (by both readers), the daemon caught up and stopped
// cleanly. In kill mode the growth criteria are informational (each
// restart resets the process they measure) and kill mode's own part
// counts instead: kills, restarts, and an LSN sampler that took samples
// and saw no violation.
func (res *soakResult) verdict() bool {
	end := res.allEqual() && res.caughtUp && res.stopErr == ""
	if res.kill != nil {
		return end && res.kill.pass()
	}
	for _, s := range res.series() {
		if s.criterion && !s.pass() {
			return false
		}
	}
	return end
}

func (res *soakResult) allEqual() bool {
	for _, v := range res.verify {
		if !v.equal() {
			return false
		}
	}
	return len(res.verify) == res.tables
}

// logLine summarizes the minute before sample i, for the progress log.
func (res *soakResult) logLine(i int) string {
	s := res.samples[i]
	in := res.interval(res.soakIndex(s.at-time.Minute), i)
	return fmt.Sprintf("%s: %.0f changes/s, flush p50 %s p99 %s, manifest %s, delta files max %s, RSS %s, CPU %s/change, count(*) %s, compactions %s minor %s major",
		clock(s.at), in.changesPerSec, msOr(in.flushP50), msOr(in.flushP99), bytesOr(s.m.manifestBytes), f0Or(s.deltaMax), bytesIEC(s.rss),
		usOr(in.cpuPerChange), msOr(s.countLat), f0Or(s.m.minor), f0Or(s.m.major))
}

// minuteRows are the samples a minute apart (and the last), for the table.
func (res *soakResult) minuteRows() []int {
	var out []int
	if len(res.samples) == 0 {
		return out
	}
	last := len(res.samples) - 1
	for m := time.Minute; ; m += time.Minute {
		j := res.soakIndex(m)
		if j >= last || m > res.samples[last].at+soakEvery/2 {
			break
		}
		if j > 0 && (len(out) == 0 || out[len(out)-1] != j) {
			out = append(out, j)
		}
	}
	return append(out, last)
}

func (r *report) renderSoak(p func(string, ...any)) {
	res := r.soak
	if res == nil || len(res.samples) < 2 {
		return
	}
	m := r.machine
	k := res.kill
	if k == nil {
		p("## Soak (issue 29)\n\n")
		p("Measured %s on %d CPUs (%s, %s, %s; load average %s at the section's start, %s at its end), %s, pg-cdc `%s`. Reproduce: `make bench BENCH_FLAGS=\"--only soak\"` (`--soak-duration`, default 10m, 1h with `--full`; `--soak-tables`, `--soak-rate`, `--soak-rows`; `--soak-kill` for kill mode). Not part of the default run (it would lengthen it by more than half): only when named.\n\n",
			res.began.UTC().Format("2006-01-02 15:04 UTC"), m.nproc, m.cpu, m.memory, m.kernel, res.loadStart, res.loadEnd, strings.SplitN(m.postgres, " on ", 2)[0], strings.ReplaceAll(m.pgcdc, "\n", "; "))
	} else {
		p("## Soak (issue 29), kill mode\n\n")
		p("Measured %s on %d CPUs (%s, %s, %s; load average %s at the section's start, %s at its end), %s, pg-cdc `%s`. Reproduce: `make bench BENCH_FLAGS=\"--only soak --soak-kill %s\"` (`--soak-duration`, default 10m, 1h with `--full`; `--soak-tables`, `--soak-rate`, `--soak-rows`). Not part of the default run: only when named.\n\n",
			res.began.UTC().Format("2006-01-02 15:04 UTC"), m.nproc, m.cpu, m.memory, m.kernel, res.loadStart, res.loadEnd, strings.SplitN(m.postgres, " on ", 2)[0], strings.ReplaceAll(m.pgcdc, "\n", "; "), k.every)
	}
	verdict := "FAIL"
	if res.verdict() {
		verdict = "PASS"
	}
	if k == nil {
		p("**Verdict: %s** (every criterion below, the sink equal to the source for every table by an independent reader and by pg-cdc's own, the catch-up and a clean stop).\n\n", verdict)
	} else {
		p("**Verdict: %s** (kill mode: at least one kill, each followed by a restart; the outside LSN sampler took samples and saw no violation; the sink equal to the source for every table by an independent reader and by pg-cdc's own; the catch-up and a clean stop. The growth criteria are informational here: each restart resets the process they measure).\n\n", verdict)
	}
	p("`pg-cdc start` with every setting at its default except these (compaction is on by default: `compaction.interval` 10 s, minor merges of 8 deltas, major compactions on their thresholds; the Iceberg publisher with every `catalog.iceberg` setting at its default):\n\n```yaml\n%s```\n\n", res.settings)
	p("The source: %d tables `(id bigint primary key, a int, b text, c numeric(12,2), d timestamptz)`, %s rows each, snapshotted by `pg-cdc init` (%s). ", res.tables, count(res.seedRows), res.init.Wall.Round(100*time.Millisecond))
	p("The workload for %s: two connections, each committing transactions of 1–%d statements over random tables (in (table, key) order, so they never deadlock) at %d changes/s between them: 60 %% updates of a, c, d by key, 20 %% updates of b too, 10 %% inserts of new keys, 10 %% deletes by key. ", res.elapsed.Round(time.Second), soakMaxTxn, res.rate)
	p("It committed %s changes (%.0f/s: %s updated, %s inserted, %s deleted rows) in %s transactions; %s statements found their key deleted already and changed nothing", count(int(res.changes)), float64(res.changes)/res.elapsed.Seconds(),
		count(int(res.updates)), count(int(res.inserts)), count(int(res.deletes)), count(int(res.txns)), count(int(res.misses)))
	if res.retried > 0 {
		p("; %d transactions failed on a deadlock or serialization error and were skipped", res.retried)
	}
	p(".\n\n")
	p("Every %s the harness sampled: `/metrics` (`pgcdc_flush_duration_seconds`, whose p50 and p99 over an interval are interpolated from its bucket deltas as PromQL's `histogram_quantile` does, buckets 10 ms × 2ⁿ; `pgcdc_manifest_bytes`; `pgcdc_table_delta_files` per table; `pgcdc_compactions_total`; `pgcdc_replication_lag_seconds`), the bytes under the sink's `_pgcdc/` and `_pgcdc/iceberg/`, the daemon's VmRSS and utime + stime from /proc, and the wall time of two `pg-cdc query --format csv` child processes on %s: `%s` and `%s` (each a new process: start-up, its sandboxed engine over the current version, the query). The queries and the harness share the %d CPUs with the daemon and PostgreSQL.\n\n",
		soakEvery, res.queryTable, res.sqlCount, res.sqlFilter, m.nproc)

	base, end := res.soakWindows()
	p("### Growth and the issue's criteria\n\n")
	if k != nil {
		p("Kill mode: informational, not part of the verdict. RSS and CPU are of the process alive at each sample; flush quantiles over an interval with a restart in it are of the new process's flushes only; compaction counts add up the lives.\n\n")
	}
	p("*Minute 2* is the window %s–%s, *the end* %s–%s: the flush quantiles and the CPU per change are over the window, the other series the median of its samples (a single sample of RSS or of a query's latency is noisy).\n\n", clock(base[0]), clock(base[1]), clock(end[0]), clock(end[1]))
	p("| series | minute 2 | the end | end ÷ minute 2 | criterion | result |\n| --- | ---: | ---: | ---: | --- | --- |\n")
	for _, s := range res.series() {
		crit, result := "–", "–"
		switch {
		case s.absLimit > 0:
			crit = fmt.Sprintf("≤ %.0f at every sample (the most seen: %s)", s.absLimit, s.format(s.worst))
			result = passFail(s.pass())
		case s.limit > 0:
			crit = fmt.Sprintf("≤ %.1f×", s.limit)
			result = passFail(s.pass())
		}
		if k != nil && s.criterion {
			crit += " (informational in kill mode)"
		}
		p("| %s | %s | %s | %s | %s | %s |\n", s.name, s.format(s.base), s.format(s.end), ratioOr(s.ratio()), crit, result)
	}
	p("\n")

	p("### The end\n\n")
	caught := fmt.Sprintf("the manifest's end LSN reached the source's `pg_current_wal_lsn()` at the workload's stop (%s) in %.1f s", res.stopLSN, res.catchUp.Seconds())
	if !res.caughtUp {
		caught = fmt.Sprintf("**the manifest's end LSN (%s) did not reach the source's WAL position at the workload's stop (%s) within 5 minutes**", res.endLSN, res.stopLSN)
	}
	stop := "stopped cleanly on SIGTERM (exit 0)"
	if res.stopErr != "" {
		stop = "**did not stop cleanly on SIGTERM**: " + strings.ReplaceAll(res.stopErr, "\n", " ")
	}
	if k == nil {
		p("After the workload stopped, %s; `pg-cdc start` %s. Over its life it used %s of CPU; its VmHWM was %s. ", caught, stop, res.start.CPU.Round(100*time.Millisecond), bytesIEC(res.hwm))
		p("Compactions committed inside start: %s minor, %s major; %s flushes. ", f0Or(res.final.minor), f0Or(res.final.major), f0Or(res.final.flushes))
	} else {
		p("After the workload stopped, %s; the last `pg-cdc start` (process %d of %d) %s. It used %s of CPU, all the processes %s; its VmHWM was %s. Compactions: see *Kill mode* below. ", caught, len(k.logs), len(k.logs), stop, res.start.CPU.Round(100*time.Millisecond), k.cpu.Round(100*time.Millisecond), bytesIEC(res.hwm))
	}
	if res.queryErrors > 0 {
		p("**%d `pg-cdc query` runs failed** (the last: `%s`). ", res.queryErrors, strings.ReplaceAll(tail(res.lastQueryErr, 3), "\n", " "))
	}
	if res.scrapeErrors > 0 {
		p("%d scrapes of `/metrics` failed (those samples lack its series). ", res.scrapeErrors)
	}
	p("\n\nThe sink against the source, every table, by two readers:\n\n")
	p("- **DuckDB (independent)**: an in-process DuckDB reads the Parquet files `_pgcdc/manifest.json` names for the table (its base and its deltas, nothing listed from the directory) and merges them with SQL written in the harness apart from pg-cdc's own merge (`soak_oracle.go`: per key the newest version by (`__lsn`, `__seq`) wins, a base row before a replayed copy of it, a delete is no row; a truncate or a column left unchanged by TOAST, which the soak never produces, fails the table rather than being guessed). Every row is compared with PostgreSQL's `SELECT id, a, b, c::text, d FROM T`, value by value (id, a and b exact, c as numeric(12,2) text, d to the microsecond in UTC): the counts, every value, and no key missing, extra or held twice. *Replayed change rows* are delta rows repeating another's (key, `__lsn`, `__seq`): the same change written twice, which the merge counts once (design.md §1.1 rule 4); not a difference.\n")
	p("- **`pg-cdc dump` (pg-cdc's own reader)**: `pg-cdc dump --table T --format csv` against PostgreSQL's `COPY (SELECT * FROM T ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER)` (TimeZone UTC, ISO dates), byte for byte.\n\n")
	p("| table | rows in PostgreSQL | DuckDB (independent): files read, rows | replayed change rows | equal (DuckDB) | rows by `pg-cdc dump` | equal (`pg-cdc dump`) |\n| --- | ---: | ---: | ---: | --- | ---: | --- |\n")
	cell := func(ok bool, detail string) string {
		if ok {
			return "✅ equal"
		}
		return "❌ **not equal**: " + strings.ReplaceAll(strings.ReplaceAll(detail, "|", "\\|"), "\n", " ")
	}
	for _, v := range res.verify {
		p("| `%s` | %s | %d files, %s rows | %s | %s | %s | %s |\n", v.table, count(v.pgRows), v.duckFiles, count(v.duckRows), count(int(v.dupChanges)),
			cell(v.duckEqual, v.duckDetail), count(v.dumpRows), cell(v.dumpEqual, v.dumpDetail))
	}
	p("\n")
	if k != nil {
		res.renderKill(p)
	}

	p("### Samples, a minute apart\n\n")
	p("Rates, flush quantiles and CPU are over the minute before the row; the rest are the row's sample.\n\n")
	p("| time | changes/s | flush p50 | flush p99 | manifest | delta files max / mean | `_pgcdc/` | `_pgcdc/iceberg/` | RSS | CPU / change | `count(*)` | filtered | lag | compactions minor / major |\n")
	p("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	prev := 0
	for _, j := range res.minuteRows() {
		s, in := res.samples[j], res.interval(prev, j)
		p("| %s | %.0f | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |\n", clock(s.at), in.changesPerSec, msOr(in.flushP50), msOr(in.flushP99),
			bytesOr(s.m.manifestBytes), f0Or(s.deltaMax), f1Or(s.deltaMean), bytesIEC(s.metaBytes), bytesIEC(s.icebergBytes), bytesIEC(s.rss),
			usOr(in.cpuPerChange), msOr(s.countLat), msOr(s.filterLat), secsOr(s.m.lag), f0Or(s.m.minor), f0Or(s.m.major))
		prev = j
	}
	p("\n")
	if len(res.charts) > 0 {
		p("### Charts\n\nEvery sample (%s apart; interval series over the %s before each).\n\n", soakEvery, soakEvery)
		for _, c := range res.charts {
			p("![%s](%s)\n\n", c.title, c.link)
		}
	}
}

// renderKill is kill mode's subsection of the soak report.
func (res *soakResult) renderKill(p func(string, ...any)) {
	k := res.kill
	p("### Kill mode\n\n")
	p("`pg-cdc start` got SIGKILL (its process group) every %s of the workload and was started again at once with the same configuration: **%d kills, %d restarts** (%d processes in all, each with its own log). ", k.every, len(k.kills), k.restarts, len(k.logs))
	p("Every other kill, the first among them, was aimed at a compaction: it waited up to %s for a compaction scratch directory of the running process (`<state.path>/compact/<schema>.<table>[.minor].pid<pid>`, which internal/compact makes when a table's compaction starts and removes when it ends) and killed at a random point up to %s after one appeared, while one was still there. ", soakAimWait, soakAimDelay)
	p("The daemon logs no line when a compaction starts, so whether a kill landed inside one is read after it from those directories: one the killed process left behind is a compaction that started and did not end. ")
	aimedSaw := 0
	for _, x := range k.kills {
		if x.aimedAt != "" {
			aimedSaw++
		}
	}
	p("**%d of %d kills landed inside a compaction** (aimed: %d; of those, %d saw one start in time).", k.landed(), len(k.kills), k.aimed(), aimedSaw)
	if k.landed() == 0 {
		p(" No kill was seen inside a compaction: this run does not show one.")
	}
	p(" Compactions committed over all the processes (their \"merged deltas\" and \"compacted table\" log lines; `pgcdc_compactions_total` starts again at zero with each process): %d minor, %d major.\n\n", k.minor, k.major)
	lsn := k.lsn
	p("The outside LSN sampler (a connection of its own, every %s, from `pg-cdc init` to the last stop) read the slot's `confirmed_flush_lsn` from `pg_replication_slots`, then the sink's `_pgcdc/manifest.json`; a violation is the slot confirmed past the manifest's `end_lsn` (or an unreadable manifest). The slot is read first: the manifest's end only grows, so a later read can only make the check more lenient. ", soakLSNEvery)
	p("**%s samples, %d violations**", count(lsn.samples), lsn.violations)
	if lsn.samples == 0 {
		p(" (**no sample taken: the check shows nothing**)")
	}
	if lsn.errors > 0 {
		p("; %d samples could not be taken (the last: %s)", lsn.errors, strings.ReplaceAll(lsn.lastErr, "\n", " "))
	}
	p(".\n\n")
	for _, v := range lsn.first {
		p("- violation: %s\n", v)
	}
	if len(lsn.first) > 0 {
		p("\n")
	}
	if len(k.kills) > 0 {
		p("| kill | at | the process had run | aimed at a compaction | compactions left unfinished (started, not ended) |\n| ---: | ---: | ---: | --- | --- |\n")
		for i, x := range k.kills {
			aimed := "no"
			switch {
			case x.aimed && x.aimedAt != "":
				aimed = "yes: saw " + x.aimedAt + " start"
			case x.aimed:
				aimed = fmt.Sprintf("yes: none started within %s", soakAimWait)
			}
			p("| %d | %s | %s | %s | %s |\n", i+1, clock(x.at), x.uptime.Round(time.Second), aimed, listOr(x.inFlight, "none"))
		}
		p("\n")
	}
}

// soakChartDir is where the charts go, beside the report: BENCHMARKS.md's
// are in BENCHMARKS-soak/, and kill mode's in BENCHMARKS-soak-kill/, so
// the two runs' sections can stand side by side.
func soakChartDir(out string, kill bool) string {
	dir := strings.TrimSuffix(out, filepath.Ext(out)) + "-soak"
	if kill {
		dir += "-kill"
	}
	return dir
}

// soakCharts are the charts of res, one per series.
func (res *soakResult) soakCharts() map[string]lineChart {
	n := len(res.samples)
	xs := make([]float64, 0, n)
	col := func(f func(k int) float64) []float64 {
		ys := make([]float64, 0, n)
		for k := 1; k < n; k++ {
			ys = append(ys, f(k))
		}
		return ys
	}
	for k := 1; k < n; k++ {
		xs = append(xs, res.samples[k].at.Minutes())
	}
	in := make([]soakInterval, n)
	for k := 1; k < n; k++ {
		in[k] = res.interval(k-1, k)
	}
	one := func(name string, f func(k int) float64) chartSeries {
		return chartSeries{name: name, xs: xs, ys: col(f)}
	}
	const minutes = "minutes since the workload started"
	return map[string]lineChart{
		"flush": {title: "Flush duration (pgcdc_flush_duration_seconds, per 10 s)", xLabel: minutes, yLabel: "ms", series: []chartSeries{
			one("p50", func(k int) float64 { return in[k].flushP50 * 1e3 }), one("p99", func(k int) float64 { return in[k].flushP99 * 1e3 })}},
		"manifest": {title: "Manifest size (pgcdc_manifest_bytes)", xLabel: minutes, yLabel: "KiB", series: []chartSeries{
			one("manifest.json", func(k int) float64 { return res.samples[k].m.manifestBytes / 1024 })}},
		"delta-files": {title: "Delta files per table (pgcdc_table_delta_files)", xLabel: minutes, yLabel: "files", limit: soakDeltaLimit, limitLabel: "limit 64",
			series: []chartSeries{one("max over tables", func(k int) float64 { return res.samples[k].deltaMax }), one("mean over tables", func(k int) float64 { return res.samples[k].deltaMean })}},
		"metadata": {title: "Sink metadata bytes", xLabel: minutes, yLabel: "MiB", series: []chartSeries{
			one("_pgcdc/", func(k int) float64 { return float64(res.samples[k].metaBytes) / (1 << 20) }),
			one("_pgcdc/iceberg/", func(k int) float64 { return float64(res.samples[k].icebergBytes) / (1 << 20) })}},
		"rss": {title: "RSS of pg-cdc start (VmRSS)", xLabel: minutes, yLabel: "MiB", series: []chartSeries{
			one("VmRSS", func(k int) float64 { return float64(res.samples[k].rss) / (1 << 20) })}},
		"cpu": {title: "CPU of pg-cdc start per change (per 10 s)", xLabel: minutes, yLabel: "µs per change", series: []chartSeries{
			one("utime + stime ÷ changes", func(k int) float64 { return in[k].cpuPerChange })}},
		"query": {title: "pg-cdc query latency (a new process each)", xLabel: minutes, yLabel: "ms", series: []chartSeries{
			one("count(*)", func(k int) float64 { return res.samples[k].countLat * 1e3 }),
			one("filtered aggregate", func(k int) float64 { return res.samples[k].filterLat * 1e3 })}},
		"lag": {title: "Replication lag (pgcdc_replication_lag_seconds)", xLabel: minutes, yLabel: "s", series: []chartSeries{
			one("lag", func(k int) float64 { return res.samples[k].m.lag })}},
		"compactions": {title: "Compactions committed (pgcdc_compactions_total)", xLabel: minutes, yLabel: "compactions", series: []chartSeries{
			one("minor", func(k int) float64 { return res.samples[k].m.minor }), one("major", func(k int) float64 { return res.samples[k].m.major })}},
	}
}

// soakChartOrder is the order of the charts in the report.
var soakChartOrder = []string{"flush", "manifest", "delta-files", "rss", "query", "cpu", "metadata", "lag", "compactions"}

// writeSoakCharts writes one SVG per series beside the report and records
// their links (relative to the report).
func writeSoakCharts(out string, res *soakResult) error {
	dir := soakChartDir(out, res.kill != nil)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	charts := res.soakCharts()
	for _, name := range soakChartOrder {
		c := charts[name]
		path := filepath.Join(dir, name+".svg")
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := c.write(f); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		res.charts = append(res.charts, soakChartFile{path: path, link: filepath.ToSlash(filepath.Join(filepath.Base(dir), name+".svg")), title: c.title})
	}
	return nil
}

// Formatters that print "–" for a missing value.

func or(f func(float64) string) func(float64) string {
	return func(x float64) string {
		if !finite(x) {
			return "–"
		}
		return f(x)
	}
}

var (
	msOr    = or(func(x float64) string { return fmt.Sprintf("%.1f ms", x*1e3) })
	usOr    = or(func(x float64) string { return fmt.Sprintf("%.0f µs", x) })
	bytesOr = or(func(x float64) string { return bytesIEC(int64(x)) })
	f0Or    = or(f0)
	f1Or    = or(func(x float64) string { return fmt.Sprintf("%.1f", x) })
	secsOr  = or(secs)
	ratioOr = or(ratio)
)

func passFail(ok bool) string {
	if ok {
		return "✅ PASS"
	}
	return "❌ **FAIL**"
}

// clock formats a duration since the workload's start as m:ss.
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d/time.Minute), int(d%time.Minute/time.Second))
}
