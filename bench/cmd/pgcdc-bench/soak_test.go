package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// syntheticSoak is a 10-minute soak sampled every 10 s (each sample 0.4 s
// late, as the queries make them): 200 changes/s, ten flushes of 30 ms per
// interval, a flat manifest, RSS and query latency; rss, when set, gives
// the RSS at each sample instead.
func syntheticSoak(rss func(at time.Duration) int64) *soakResult {
	res := &soakResult{duration: 10 * time.Minute, tables: 2, seedRows: 100, rate: 200, caughtUp: true,
		verify: []soakVerified{
			{table: "public.soak_01", pgRows: 3, duckRows: 3, duckEqual: true, duckFiles: 2, dumpRows: 3, dumpEqual: true},
			{table: "public.soak_02", pgRows: 3, duckRows: 3, duckEqual: true, duckFiles: 2, dumpRows: 3, dumpEqual: true}}}
	bounds := []float64{0.01, 0.02, 0.04, 0.08}
	for k := 0; k <= 60; k++ {
		at := time.Duration(k)*soakEvery + time.Duration(k)*400*time.Millisecond/60
		n := float64(10 * k)
		s := soakSample{at: at, changes: int64(200 * at.Seconds()), ok: true,
			m: daemonMetrics{flush: histogram{bounds: bounds, cum: []float64{0, 0, n, n}, count: n}, manifestBytes: 20_000,
				deltaFiles: map[string]float64{"public.soak_01": float64(k % 9), "public.soak_02": 1}, minor: float64(k / 8), lag: 0.4},
			deltaMax: float64(k % 9), deltaMean: float64(k%9+1) / 2, metaBytes: 1 << 20, icebergBytes: 1 << 19,
			rss: 50 << 20, cpu: time.Duration(k) * time.Second, countLat: 0.3, filterLat: 0.35}
		if rss != nil {
			s.rss = rss(at)
		}
		res.samples = append(res.samples, s)
	}
	res.elapsed = res.samples[len(res.samples)-1].at
	return res
}

func TestSoakCriteriaPass(t *testing.T) {
	res := syntheticSoak(nil)
	base, end := res.soakWindows()
	if base != [2]time.Duration{time.Minute, 2 * time.Minute} {
		t.Errorf("base window %v", base)
	}
	if end[1] != res.samples[60].at || end[0] != end[1]-time.Minute {
		t.Errorf("end window %v", end)
	}
	// The window holds six samples: 1:10 … 2:00.
	if i, j := res.soakIndex(base[0]), res.soakIndex(base[1]); j-i != 6 {
		t.Errorf("base window samples %d..%d", i, j)
	}
	for _, s := range res.series() {
		if s.criterion && !s.pass() {
			t.Errorf("%s: base %v end %v worst %v: FAIL", s.name, s.base, s.end, s.worst)
		}
	}
	in := res.interval(res.soakIndex(base[0]), res.soakIndex(base[1]))
	if !near(in.flushP50, 0.03) || in.flushes != 60 {
		t.Errorf("flush over the base window: p50 %v, %v flushes", in.flushP50, in.flushes)
	}
	if math.Abs(in.changesPerSec-200) > 1 {
		t.Errorf("changes/s %v", in.changesPerSec)
	}
	// 6 s of CPU over 60 s × 200 changes: 500 µs a change.
	if math.Abs(in.cpuPerChange-500) > 5 {
		t.Errorf("CPU per change %v µs", in.cpuPerChange)
	}
	if !res.verdict() {
		t.Error("verdict FAIL, want PASS")
	}
	if rows := res.minuteRows(); len(rows) != 10 || rows[len(rows)-1] != 60 {
		t.Errorf("minute rows %v", rows)
	}
}

func TestSoakCriteriaFail(t *testing.T) {
	// RSS doubles after minute 5.
	res := syntheticSoak(func(at time.Duration) int64 {
		if at > 5*time.Minute {
			return 100 << 20
		}
		return 50 << 20
	})
	res.samples[30].deltaMax = 65
	failed := map[string]bool{}
	for _, s := range res.series() {
		if s.criterion && !s.pass() {
			failed[s.name] = true
		}
	}
	if !failed["RSS of `pg-cdc start`"] || !failed["delta files, the most of any table"] || len(failed) != 2 {
		t.Errorf("failed criteria %v, want RSS and delta files", failed)
	}
	if res.verdict() {
		t.Error("verdict PASS, want FAIL")
	}
	// A table that differs fails the verdict on its own, by either reader.
	res = syntheticSoak(nil)
	res.verify[1].duckEqual = false
	if res.verdict() {
		t.Error("verdict PASS with a table not equal by DuckDB")
	}
	res = syntheticSoak(nil)
	res.verify[0].dumpEqual = false
	if res.verdict() {
		t.Error("verdict PASS with a table not equal by pg-cdc dump")
	}
}

func TestSoakShortRunWindows(t *testing.T) {
	res := syntheticSoak(nil)
	res.samples = res.samples[:7] // one minute
	base, end := res.soakWindows()
	if base[1] != res.samples[6].at/2 || end[1] != res.samples[6].at || base[0] != 0 {
		t.Errorf("windows %v %v", base, end)
	}
	for _, s := range res.series() {
		if s.criterion && !finite(s.ratio()) && s.absLimit == 0 {
			t.Errorf("%s: no ratio over a one-minute run", s.name)
		}
	}
}

func TestRenderSoakAndCharts(t *testing.T) {
	res := syntheticSoak(nil)
	res.samples[20].ok = false // a failed scrape: its series are gaps
	res.samples[20].m = daemonMetrics{flushes: math.NaN(), manifestBytes: math.NaN(), minor: math.NaN(), major: math.NaN(), lag: math.NaN()}
	res.samples[20].deltaMax, res.samples[20].deltaMean = math.NaN(), math.NaN()
	res.samples[25].countLat = math.NaN()
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	if err := writeSoakCharts(out, res); err != nil {
		t.Fatal(err)
	}
	if len(res.charts) != len(soakChartOrder) {
		t.Fatalf("%d charts", len(res.charts))
	}
	for _, c := range res.charts {
		b, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		decodeSVG(t, b)
		if !strings.HasPrefix(c.link, "BENCHMARKS-soak/") {
			t.Errorf("link %q", c.link)
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(c.link))); err != nil {
			t.Errorf("link %q does not resolve beside the report: %v", c.link, err)
		}
	}
	r := &report{soak: res, machine: machine{nproc: 2, postgres: "PostgreSQL 15.0 on x", pgcdc: "pg-cdc dev"}}
	var b bytes.Buffer
	r.renderSoak(func(format string, args ...any) { fmt.Fprintf(&b, format, args...) })
	md := b.String()
	for _, want := range []string{"## Soak", "**Verdict: PASS**", "| `public.soak_01` | 3 | 2 files, 3 rows | 0 | ✅ equal | 3 | ✅ equal |", "DuckDB (independent)", "![Flush duration", "BENCHMARKS-soak/flush.svg", "| 10:0"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "NaN") || strings.Contains(md, "%!") {
		t.Errorf("report has a NaN or a format error:\n%s", md)
	}
	if strings.Contains(md, "Kill mode") {
		t.Errorf("the default soak's report has a kill-mode section:\n%s", md)
	}
}

// killSoak is syntheticSoak in kill mode: two kills, the first inside a
// minor merge, and a clean LSN sampler.
func killSoak() *soakResult {
	res := syntheticSoak(nil)
	res.kill = &soakKillResult{every: 2 * time.Minute, restarts: 2, minor: 80, major: 3, cpu: time.Minute,
		logs: []string{"start.log", "start-2.log", "start-3.log"},
		lsn:  soakLSNResult{samples: 12_000},
		kills: []soakKill{
			{at: 2*time.Minute + 7*time.Second, pid: 100, uptime: 127 * time.Second, aimed: true, aimedAt: "public.soak_03 (minor)", inFlight: []string{"public.soak_03 (minor)"}},
			{at: 4*time.Minute + 7*time.Second, pid: 200, uptime: 120 * time.Second},
		}}
	// The second process's samples, and a growth that would fail the
	// default soak.
	for k := range res.samples {
		if res.samples[k].at > 2*time.Minute {
			res.samples[k].life = 1
			res.samples[k].rss = 200 << 20
		}
	}
	return res
}

func TestSoakKillVerdict(t *testing.T) {
	res := killSoak()
	if !res.verdict() {
		t.Error("kill mode: verdict FAIL, want PASS (growth is informational)")
	}
	if res.kill.landed() != 1 || res.kill.aimed() != 1 {
		t.Errorf("landed %d, aimed %d", res.kill.landed(), res.kill.aimed())
	}
	for name, spoil := range map[string]func(*soakResult){
		"a violation":      func(r *soakResult) { r.kill.lsn.violations = 1 },
		"no sample":        func(r *soakResult) { r.kill.lsn.samples = 0 },
		"no kill":          func(r *soakResult) { r.kill.kills, r.kill.restarts = nil, 0 },
		"a missed restart": func(r *soakResult) { r.kill.restarts = 1 },
		"a table unequal":  func(r *soakResult) { r.verify[0].duckEqual = false },
		"an unclean stop":  func(r *soakResult) { r.stopErr = "exit 1" },
	} {
		r := killSoak()
		spoil(r)
		if r.verdict() {
			t.Errorf("%s: verdict PASS", name)
		}
	}
	// CPU per change is not computed across a restart.
	i := 0
	for res.samples[i+1].life == 0 {
		i++
	}
	if in := res.interval(i, i+1); finite(in.cpuPerChange) {
		t.Errorf("CPU per change over a restart: %v", in.cpuPerChange)
	}
	if in := res.interval(i+1, i+2); !finite(in.cpuPerChange) {
		t.Error("CPU per change inside one life is missing")
	}
}

func TestRenderSoakKill(t *testing.T) {
	res := killSoak()
	res.kill.lsn = soakLSNResult{samples: 5, violations: 1, first: []string{"12:00:00.000 slot confirmed at 0/20, past the manifest's end LSN 0/10 (version 3)"}, errors: 2, lastErr: "read the slot: boom"}
	r := &report{soak: res, machine: machine{nproc: 2, postgres: "PostgreSQL 15.0 on x", pgcdc: "pg-cdc dev"}}
	var b bytes.Buffer
	r.renderSoak(func(format string, args ...any) { fmt.Fprintf(&b, format, args...) })
	md := b.String()
	for _, want := range []string{"## Soak (issue 29), kill mode", "--soak-kill 2m0s", "**Verdict: FAIL**", "### Kill mode", "**2 kills, 2 restarts**",
		"**1 of 2 kills landed inside a compaction**", "**5 samples, 1 violations**", "- violation: 12:00:00.000 slot confirmed at 0/20",
		"| 1 | 2:07 | 2m7s | yes: saw public.soak_03 (minor) start | public.soak_03 (minor) |", "| 2 | 4:07 | 2m0s | no | none |",
		"80 minor, 3 major", "≤ 1.5× (informational in kill mode)"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "NaN") || strings.Contains(md, "%!") {
		t.Errorf("report has a NaN or a format error:\n%s", md)
	}
}

func TestSoakCompactionsInFlight(t *testing.T) {
	names := []string{"public.soak_02.minor.pid41", "public.soak_01.pid41", "public.soak_03.pid4", "public.soak_04.minor.pid412", "public.soak_05", "public.soak_06.minor", ".pid41"}
	got := compactionsInFlight(names, 41)
	want := []string{"public.soak_01 (major)", "public.soak_02 (minor)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := compactionsInFlight(names, 7); len(got) != 0 {
		t.Errorf("another pid: %q", got)
	}
}

func TestSoakCountCompactionLogs(t *testing.T) {
	log := `time=2026-01-01T00:00:00Z level=INFO msg="merged deltas" component=compaction table=public.soak_01 from_epoch=1 epoch=8
time=2026-01-01T00:00:01Z level=INFO msg="compacted table" component=compaction table=public.soak_01 epoch=9
time=2026-01-01T00:00:02Z level=INFO msg="the table was compacted concurrently; compacting it again from the new base" table=public.soak_02
{"time":"2026-01-01T00:00:03Z","level":"INFO","msg":"merged deltas","table":"public.soak_02"}
time=2026-01-01T00:00:04Z level=ERROR msg="minor compaction failed; the table keeps its deltas" err="merged deltas: boom"
`
	if minor, major := countCompactionLogs(log); minor != 2 || major != 1 {
		t.Errorf("minor %d, major %d; want 2 and 1", minor, major)
	}
}

func TestSoakJudgeLSNSample(t *testing.T) {
	mf := func(end string) []byte {
		return []byte(fmt.Sprintf(`{"format_version":%d,"version":3,"epoch":2,"end_lsn":%q,"tables":{}}`, manifest.FormatVersion, end))
	}
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		name      string
		confirmed *string
		data      []byte
		readErr   error
		want      lsnOutcome
	}{
		{"behind", s("0/16B3748"), mf("0/16B3750"), nil, lsnOK},
		{"equal", s("0/16B3750"), mf("0/16B3750"), nil, lsnOK},
		{"past", s("0/16B3751"), mf("0/16B3750"), nil, lsnViolation},
		{"past by a segment", s("1/0"), mf("0/FFFFFFFF"), nil, lsnViolation},
		{"no position yet", nil, mf("0/1"), nil, lsnSkip},
		{"unreadable manifest", s("0/1"), mf("0/1")[:20], nil, lsnViolation},
		{"manifest not read", s("0/1"), nil, os.ErrNotExist, lsnError},
		{"bad position", s("nope"), mf("0/1"), nil, lsnError},
	} {
		got, detail := judgeLSNSample(c.confirmed, c.data, c.readErr)
		if got != c.want {
			t.Errorf("%s: outcome %d (%s), want %d", c.name, got, detail, c.want)
		}
		if got == lsnViolation && detail == "" {
			t.Errorf("%s: a violation without a detail", c.name)
		}
	}
}

func TestSoakCumulativeCounters(t *testing.T) {
	d := &soakDaemon{logs: []string{"start.log"}, seen: []daemonMetrics{{}}}
	if m := d.cumulative(0, daemonMetrics{minor: 5, major: 1, flushes: 10}); m.minor != 5 || m.flushes != 10 {
		t.Errorf("first life: %+v", m)
	}
	// A restart: the counters start again at zero and add to the first
	// life's last scrape.
	d.logs, d.seen, d.life = append(d.logs, "start-2.log"), append(d.seen, daemonMetrics{}), 1
	if m := d.cumulative(1, daemonMetrics{minor: 2, major: 0, flushes: 3}); m.minor != 7 || m.major != 1 || m.flushes != 13 {
		t.Errorf("second life: %+v", m)
	}
	// A late scrape of the first life changes nothing.
	if m := d.cumulative(0, daemonMetrics{minor: 6}); m.minor != 6 || d.seen[0].minor != 5 {
		t.Errorf("a stale life's scrape: %+v, seen %+v", m, d.seen[0])
	}
}

// TestSoakDaemonKillAndRestart drives soakDaemon and awaitCompaction with
// a stand-in for pg-cdc start (a shell that sleeps): SIGKILL, the
// inspection between the kill and the restart, the next life.
func TestSoakDaemonKillAndRestart(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-pg-cdc")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho started \"$@\" >&2\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := newSoakDaemon(bin, pgcdcRun{dir: dir, config: filepath.Join(dir, "pg-cdc.yml")})
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	defer d.kill()
	p0, life, log := d.current()
	if life != 0 || log != "start.log" {
		t.Fatalf("first life %d, log %q", life, log)
	}
	pid0 := p0.cmd.Process.Pid

	// An aimed kill sees the process's compaction start.
	compact := filepath.Join(dir, "state", "compact")
	if err := os.MkdirAll(filepath.Join(compact, "public.soak_09.minor.pid1"), 0o755); err != nil { // another process's
		t.Fatal(err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		_ = os.Mkdir(filepath.Join(compact, fmt.Sprintf("public.soak_02.minor.pid%d", pid0)), 0o755)
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	seen, err := awaitCompaction(context.Background(), compact, pid0, rng)
	if err != nil || seen != "public.soak_02 (minor)" {
		t.Fatalf("awaitCompaction: %q, %v", seen, err)
	}

	var inFlight []string
	pid, uptime, err := d.killAndRestart(func(pid int) {
		if !p0.exited() {
			t.Error("inspected before the process was gone")
		}
		names, _ := readDirNames(compact)
		inFlight = compactionsInFlight(names, pid)
	})
	if err != nil {
		t.Fatal(err)
	}
	if pid != pid0 || uptime <= 0 || len(inFlight) != 1 {
		t.Errorf("killed pid %d (want %d) after %s; in flight %q", pid, pid0, uptime, inFlight)
	}
	var ws syscall.WaitStatus
	if st, ok := p0.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		ws = st
	}
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the first process ended by %v, want SIGKILL", p0.cmd.ProcessState)
	}
	p1, life, log := d.current()
	if life != 1 || log != "start-2.log" || p1.cmd.Process.Pid == pid0 || p1.exited() {
		t.Errorf("second life %d, log %q, pid %d", life, log, p1.cmd.Process.Pid)
	}
	if exited, _ := d.exited(); exited {
		t.Error("the restarted process counts as exited")
	}
	if names := d.logNames(); len(names) != 2 {
		t.Errorf("logs %q", names)
	}
	time.Sleep(50 * time.Millisecond) // the shell's line reaches its log
	if b, _ := os.ReadFile(filepath.Join(dir, "start-2.log")); !strings.Contains(string(b), "started -c "+filepath.Join(dir, "pg-cdc.yml")+" start") {
		t.Errorf("the restart's arguments: %q", b)
	}

	// No compaction in time: an aimed kill gives up and kills anyway.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if seen, err := awaitCompaction(ctx, compact, p1.cmd.Process.Pid, rng); seen != "" || err == nil {
		t.Errorf("a cancelled wait: %q, %v", seen, err)
	}
}
