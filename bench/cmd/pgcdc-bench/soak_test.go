package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// syntheticSoak is a 10-minute soak sampled every 10 s (each sample 0.4 s
// late, as the queries make them): 200 changes/s, ten flushes of 30 ms per
// interval, a flat manifest, RSS and query latency; rss, when set, gives
// the RSS at each sample instead.
func syntheticSoak(rss func(at time.Duration) int64) *soakResult {
	res := &soakResult{duration: 10 * time.Minute, tables: 2, seedRows: 100, rate: 200, caughtUp: true,
		verify: []soakVerified{{table: "public.soak_01", pgRows: 3, sinkRows: 3, equal: true}, {table: "public.soak_02", pgRows: 3, sinkRows: 3, equal: true}}}
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
	// A table that differs fails the verdict on its own.
	res = syntheticSoak(nil)
	res.verify[1].equal = false
	if res.verdict() {
		t.Error("verdict PASS with a table not equal")
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
	for _, want := range []string{"## Soak", "**Verdict: PASS**", "| `public.soak_01` | 3 | 3 | ✅ equal |", "![Flush duration", "BENCHMARKS-soak/flush.svg", "| 10:0"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "NaN") || strings.Contains(md, "%!") {
		t.Errorf("report has a NaN or a format error:\n%s", md)
	}
}
