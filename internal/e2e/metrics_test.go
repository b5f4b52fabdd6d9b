package e2e

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

// TestMetricsAndHealth scrapes a running daemon: the stream's metrics move
// with a workload (events, flushes, durable LSN, lag), the source gauges
// fill in, and /readyz flips to 503 while PostgreSQL is down and back
// afterwards, while /livez stays 200 throughout (a source outage the daemon
// rides out must not get it restarted). Nothing is lost across the outage.
func TestMetricsAndHealth(t *testing.T) {
	cluster := pgtest.New(t)
	e := newEnv(t, envOptions{cluster: cluster, flushInterval: 2})
	seed(t, e, 20, 20)
	e.mustRun("init")
	d := e.start("PGCDC_REPLICATION_HEARTBEAT_INTERVAL_SEC=1")
	addr := metricsAddr(t, d)
	base := "http://" + addr

	waitHTTP(t, base+"/readyz", http.StatusOK, 60*time.Second)
	first := scrape(t, base)
	startDurable := gauge(first, "pgcdc_durable_lsn", nil)

	// While the workload runs, lag must show (a change waits for its flush).
	w := runWorkloadFor(e.url, 7, 4*time.Second)
	var maxLagSeconds, maxLagBytes float64
	for running := true; running; {
		fams := scrape(t, base)
		maxLagSeconds = max(maxLagSeconds, gauge(fams, "pgcdc_replication_lag_seconds", nil))
		maxLagBytes = max(maxLagBytes, gauge(fams, "pgcdc_replication_lag_bytes", nil))
		select {
		case <-w.done:
			running = false
		case <-time.After(100 * time.Millisecond):
		}
	}
	w.wait(t)
	e.waitCaughtUp(60 * time.Second)
	if maxLagSeconds <= 0 || maxLagBytes <= 0 {
		t.Errorf("lag never showed under load: max lag %.3f s, %.0f bytes", maxLagSeconds, maxLagBytes)
	}

	m := e.manifest()
	var fams map[string]*dto.MetricFamily
	e.waitFor("metrics to show the manifest's end LSN", 10*time.Second, func() bool {
		fams = scrape(t, base)
		return uint64(gauge(fams, "pgcdc_durable_lsn", nil)) >= uint64(m.EndLSN)
	})
	if got := gauge(fams, "pgcdc_durable_lsn", nil); got <= startDurable {
		t.Errorf("pgcdc_durable_lsn did not move: %v → %v", startDurable, got)
	}
	if c, d := gauge(fams, "pgcdc_confirmed_lsn", nil), gauge(fams, "pgcdc_durable_lsn", nil); c > d {
		t.Errorf("confirmed LSN %v is past the durable LSN %v", c, d)
	}
	if lag := gauge(fams, "pgcdc_replication_lag_seconds", nil); lag != 0 {
		t.Errorf("caught up, yet pgcdc_replication_lag_seconds = %v", lag)
	}

	// Events: every inserted order row shows under its table and op.
	var orders int64
	if err := e.conn.QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE id > 20`).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	inserted := counter(fams, "pgcdc_events_total", map[string]string{"table": "public.orders", "op": "I"})
	if inserted < float64(orders) {
		t.Errorf("pgcdc_events_total{table=public.orders,op=I} = %v, yet %d orders were inserted after the snapshot and still exist", inserted, orders)
	}
	if counter(fams, "pgcdc_events_total", map[string]string{"table": "public.orders", "op": "U"}) == 0 {
		t.Errorf("no update events counted")
	}
	if n := counter(fams, "pgcdc_flushes_total", nil); n < 1 {
		t.Errorf("pgcdc_flushes_total = %v", n)
	}
	if h := fams["pgcdc_flush_duration_seconds"]; h == nil || h.Metric[0].GetHistogram().GetSampleCount() < 1 {
		t.Errorf("pgcdc_flush_duration_seconds has no samples")
	}
	if h := fams["pgcdc_flush_rows"]; h == nil || h.Metric[0].GetHistogram().GetSampleSum() < float64(orders) {
		t.Errorf("pgcdc_flush_rows sums to less than the inserted orders")
	}
	for name, want := range map[string]float64{"pgcdc_slot_active": 1, "pgcdc_source_up": 1} {
		if got := gauge(fams, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if counter(fams, "pgcdc_heartbeats_total", map[string]string{"result": "ok"}) < 1 {
		t.Errorf("no heartbeat was emitted")
	}
	if fams["pgcdc_build_info"] == nil || fams["pgcdc_sink_errors_total"] != nil && counter(fams, "pgcdc_sink_errors_total", nil) != 0 {
		t.Errorf("build_info missing or sink errors counted on a healthy sink")
	}
	if _, ok := fams["pgcdc_slot_retained_wal_bytes"]; !ok {
		t.Errorf("pgcdc_slot_retained_wal_bytes missing")
	}

	// PostgreSQL goes away: not ready (and says why), still alive.
	ctx := context.Background()
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	body := waitHTTP(t, base+"/readyz", http.StatusServiceUnavailable, 30*time.Second)
	if !strings.Contains(body, "no replication session") {
		t.Errorf("/readyz while PostgreSQL is down does not say why: %s", body)
	}
	// Through several retry waits the loop counts as alive.
	for range 5 {
		if code, body := get(t, base+"/livez"); code != http.StatusOK {
			t.Fatalf("/livez = %d while the daemon rides out a source outage: %s", code, body)
		}
		time.Sleep(time.Second)
	}
	fams = scrape(t, base)
	if gauge(fams, "pgcdc_source_up", nil) != 0 {
		t.Errorf("pgcdc_source_up is still 1 with PostgreSQL down")
	}
	if err := cluster.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.reconnect()
	waitHTTP(t, base+"/readyz", http.StatusOK, 90*time.Second)
	if n := counter(scrape(t, base), "pgcdc_reconnects_total", nil); n < 1 {
		t.Errorf("pgcdc_reconnects_total = %v after an outage", n)
	}
	w = runWorkloadFor(e.url, 8, 2*time.Second)
	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
}

var metricsAddrRE = regexp.MustCompile(`metrics_addr=([0-9.:]+)`)

// metricsAddr waits for the daemon to log where it serves metrics.
func metricsAddr(t *testing.T, d *daemon) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := metricsAddrRE.FindStringSubmatch(d.out.String()); m != nil {
			return m[1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the daemon never logged metrics_addr:\n%s", lines(d.out.String(), 20))
	return ""
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// waitHTTP polls url until it answers with code and returns the body.
func waitHTTP(t *testing.T, url string, code int, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got int
	var body string
	for time.Now().Before(deadline) {
		if got, body = get(t, url); got == code {
			return body
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GET %s: still %d after %s, want %d: %s", url, got, timeout, code, body)
	return ""
}

func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// find returns the metric of a family whose labels include want, or nil.
func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

func gauge(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	if m := find(fams, name, labels); m != nil {
		return m.GetGauge().GetValue()
	}
	return -1
}

// counter sums the counters of a family whose labels include want (0 when
// none has been created yet).
func counter(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	sum := 0.0
	for _, m := range f.Metric {
		ok := true
		for k, v := range want {
			match := false
			for _, l := range m.Label {
				match = match || l.GetName() == k && l.GetValue() == v
			}
			ok = ok && match
		}
		if ok {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
