package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Reading the daemon's /metrics (internal/metrics names them): what the
// soak section samples every 10 s.

// histogram is a Prometheus histogram as scraped: the cumulative count at
// each finite upper bound, and the total (the +Inf bucket).
type histogram struct {
	bounds []float64
	cum    []float64
	count  float64
}

// since is the histogram of the observations made between prev and h, two
// scrapes of one cumulative histogram. A counter reset (the process
// restarted) or other buckets give h whole.
func (h histogram) since(prev histogram) histogram {
	if len(prev.bounds) != len(h.bounds) || prev.count > h.count {
		return h
	}
	d := histogram{bounds: h.bounds, cum: make([]float64, len(h.cum)), count: h.count - prev.count}
	for i := range h.bounds {
		if h.bounds[i] != prev.bounds[i] || prev.cum[i] > h.cum[i] {
			return h
		}
		d.cum[i] = h.cum[i] - prev.cum[i]
	}
	return d
}

// quantile estimates the q-quantile as PromQL's histogram_quantile does:
// the bucket holding rank q×count, linear interpolation inside it, the
// lowest bucket starting at 0, and the highest finite bound for a rank
// that falls in +Inf. NaN when the histogram is empty.
func (h histogram) quantile(q float64) float64 {
	if h.count <= 0 || len(h.bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.count
	i := sort.Search(len(h.cum), func(i int) bool { return h.cum[i] >= rank })
	if i == len(h.bounds) {
		return h.bounds[len(h.bounds)-1]
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = h.bounds[i-1], h.cum[i-1]
	}
	in := h.cum[i] - below
	if in <= 0 {
		return h.bounds[i]
	}
	return lo + (h.bounds[i]-lo)*(rank-below)/in
}

// daemonMetrics is one scrape of what the soak section follows.
type daemonMetrics struct {
	flush         histogram // pgcdc_flush_duration_seconds
	flushes       float64   // pgcdc_flushes_total
	manifestBytes float64   // pgcdc_manifest_bytes
	deltaFiles    map[string]float64
	minor, major  float64 // pgcdc_compactions_total{kind}
	lag           float64 // pgcdc_replication_lag_seconds
}

func scrapeMetrics(ctx context.Context, c *http.Client, url string) (daemonMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return daemonMetrics{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return daemonMetrics{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return daemonMetrics{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the text exposition format.
func parseMetrics(r io.Reader) (daemonMetrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return daemonMetrics{}, fmt.Errorf("parse /metrics: %w", err)
	}
	m := daemonMetrics{deltaFiles: map[string]float64{}}
	if f := fams["pgcdc_flush_duration_seconds"]; f != nil && len(f.Metric) > 0 {
		m.flush = histogramOf(f.Metric[0])
	}
	m.flushes = single(fams["pgcdc_flushes_total"])
	m.manifestBytes = single(fams["pgcdc_manifest_bytes"])
	m.lag = single(fams["pgcdc_replication_lag_seconds"])
	if f := fams["pgcdc_table_delta_files"]; f != nil {
		for _, x := range f.Metric {
			m.deltaFiles[label(x, "table")] = x.GetGauge().GetValue()
		}
	}
	if f := fams["pgcdc_compactions_total"]; f != nil {
		for _, x := range f.Metric {
			switch label(x, "kind") {
			case "minor":
				m.minor = x.GetCounter().GetValue()
			case "major":
				m.major = x.GetCounter().GetValue()
			}
		}
	}
	return m, nil
}

func histogramOf(x *dto.Metric) histogram {
	hg := x.GetHistogram()
	var h histogram
	for _, b := range hg.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		h.bounds = append(h.bounds, b.GetUpperBound())
		h.cum = append(h.cum, float64(b.GetCumulativeCount()))
	}
	h.count = float64(hg.GetSampleCount())
	return h
}

// single is the value of an unlabelled gauge or counter; NaN when absent.
func single(f *dto.MetricFamily) float64 {
	if f == nil || len(f.Metric) == 0 {
		return math.NaN()
	}
	x := f.Metric[0]
	switch {
	case x.Gauge != nil:
		return x.GetGauge().GetValue()
	case x.Counter != nil:
		return x.GetCounter().GetValue()
	case x.Untyped != nil:
		return x.GetUntyped().GetValue()
	}
	return math.NaN()
}

func label(x *dto.Metric, name string) string {
	for _, l := range x.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
