package main

import (
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestHistogramQuantileFromDeltas(t *testing.T) {
	bounds := []float64{0.01, 0.02, 0.04, 0.08}
	prev := histogram{bounds: bounds, cum: []float64{1, 2, 2, 2}, count: 2}
	cur := histogram{bounds: bounds, cum: []float64{1, 2, 12, 12}, count: 12}
	d := cur.since(prev)
	if d.count != 10 || d.cum[0] != 0 || d.cum[1] != 0 || d.cum[2] != 10 || d.cum[3] != 10 {
		t.Fatalf("delta %+v", d)
	}
	// All ten in (0.02, 0.04]: rank 5 is half-way, rank 9.9 near the top.
	if q := d.quantile(0.5); !near(q, 0.03) {
		t.Errorf("p50 = %v, want 0.03", q)
	}
	if q := d.quantile(0.99); !near(q, 0.02+0.02*0.99) {
		t.Errorf("p99 = %v, want %v", q, 0.02+0.02*0.99)
	}
	// The whole cumulative histogram: the two early ones pull p50 down
	// (rank 6: the 4th of 10 in (0.02, 0.04]).
	if q := cur.quantile(0.5); !near(q, 0.02+0.02*4/10) {
		t.Errorf("cumulative p50 = %v", q)
	}
	// The lowest bucket starts at 0.
	low := histogram{bounds: bounds, cum: []float64{4, 4, 4, 4}, count: 4}
	if q := low.quantile(0.5); !near(q, 0.005) {
		t.Errorf("p50 in the first bucket = %v, want 0.005", q)
	}
	// A rank in +Inf: the highest finite bound, as histogram_quantile.
	inf := histogram{bounds: bounds, cum: []float64{0, 0, 0, 1}, count: 10}
	if q := inf.quantile(0.99); q != 0.08 {
		t.Errorf("p99 in +Inf = %v, want 0.08", q)
	}
	// Nothing observed in the interval.
	if q := cur.since(cur).quantile(0.5); !math.IsNaN(q) {
		t.Errorf("empty interval p50 = %v, want NaN", q)
	}
	if q := (histogram{}).quantile(0.5); !math.IsNaN(q) {
		t.Errorf("no histogram p50 = %v, want NaN", q)
	}
	// A reset (the process restarted): the new histogram whole.
	if d := prev.since(cur); d.count != prev.count {
		t.Errorf("after a reset: count %v, want %v", d.count, prev.count)
	}
	// From nothing (the first scrape): the histogram whole.
	if d := cur.since(histogram{}); d.count != cur.count || d.cum[2] != 12 {
		t.Errorf("since nothing: %+v", d)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP pgcdc_flush_duration_seconds Time of one flush.
# TYPE pgcdc_flush_duration_seconds histogram
pgcdc_flush_duration_seconds_bucket{le="0.01"} 1
pgcdc_flush_duration_seconds_bucket{le="0.02"} 5
pgcdc_flush_duration_seconds_bucket{le="0.04"} 9
pgcdc_flush_duration_seconds_bucket{le="+Inf"} 10
pgcdc_flush_duration_seconds_sum 0.2
pgcdc_flush_duration_seconds_count 10
# TYPE pgcdc_flushes_total counter
pgcdc_flushes_total 10
# TYPE pgcdc_manifest_bytes gauge
pgcdc_manifest_bytes 12345
# TYPE pgcdc_replication_lag_seconds gauge
pgcdc_replication_lag_seconds 0.5
# TYPE pgcdc_table_delta_files gauge
pgcdc_table_delta_files{table="public.a"} 3
pgcdc_table_delta_files{table="public.b"} 9
# TYPE pgcdc_compactions_total counter
pgcdc_compactions_total{kind="major"} 2
pgcdc_compactions_total{kind="minor"} 7
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.flush.bounds) != 3 || m.flush.count != 10 || m.flush.cum[2] != 9 {
		t.Errorf("flush histogram %+v", m.flush)
	}
	if m.flushes != 10 || m.manifestBytes != 12345 || m.lag != 0.5 || m.minor != 7 || m.major != 2 {
		t.Errorf("scalars %+v", m)
	}
	if m.deltaFiles["public.a"] != 3 || m.deltaFiles["public.b"] != 9 || len(m.deltaFiles) != 2 {
		t.Errorf("delta files %v", m.deltaFiles)
	}
	// A missing gauge is NaN, not 0.
	m, err = parseMetrics(strings.NewReader("# TYPE other gauge\nother 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(m.manifestBytes) {
		t.Errorf("absent manifest bytes = %v", m.manifestBytes)
	}
}
