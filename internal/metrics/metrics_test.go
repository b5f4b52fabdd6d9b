package metrics

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/replicate"
)

// TestNamesAndLint registers everything on a fresh registry (twice, so no
// package global leaks between them) and runs Prometheus' own linter.
func TestNamesAndLint(t *testing.T) {
	for range 2 {
		reg := prometheus.NewRegistry()
		m := New(reg, "test")
		m.Events.WithLabelValues("public.t", "I").Inc()
		m.SinkErrors.WithLabelValues("put", "request").Inc()
		m.CompactionRuns.WithLabelValues("ok").Inc()
		m.Heartbeats.WithLabelValues("ok").Inc()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			name := f.GetName()
			if !strings.HasPrefix(name, "pgcdc_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
				t.Errorf("metric %s lacks the pgcdc_ prefix", name)
			}
		}
		problems, err := testutil.GatherAndLint(reg)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			if strings.HasPrefix(p.Metric, "pgcdc_") {
				t.Errorf("lint %s: %s", p.Metric, p.Text)
			}
		}
	}
}

// failing fails every request with an outage, except reads of missing
// keys, which answer ErrNotFound.
type failing struct{ *memory.Store }

func (f failing) Put(context.Context, string, io.Reader) error {
	return errors.New("503 Service Unavailable")
}

func TestSinkErrorsCountFailuresNotVerdicts(t *testing.T) {
	m := New(prometheus.NewRegistry(), "test")
	ctx := context.Background()
	s := m.CountSinkErrors(failing{memory.New()})
	if err := s.Put(ctx, "a", strings.NewReader("x")); err == nil {
		t.Fatal("put succeeded")
	}
	if _, err := s.Get(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
	if _, err := s.PutIf(ctx, "m", []byte("1"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIf(ctx, "m", []byte("2"), ""); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("stale put: %v", err)
	}
	if got := testutil.ToFloat64(m.SinkErrors.WithLabelValues("put", "request")); got != 1 {
		t.Errorf("put errors = %v, want 1", got)
	}
	// Not-found and precondition are answers: their series stay at 0.
	for _, op := range []string{"get", "put_if", "read_version", "list", "delete"} {
		if got := testutil.ToFloat64(m.SinkErrors.WithLabelValues(op, "request")); got != 0 {
			t.Errorf("%s errors = %v, want 0", op, got)
		}
	}
	if got := testutil.CollectAndCount(m.SinkErrors); got != len(sinkOps)+1 {
		t.Errorf("%d series of sink errors, want the %d known ones", got, len(sinkOps)+1)
	}
	if _, ok := s.(blob.Locker); !ok {
		t.Error("the wrapper hides the memory store's writer lock")
	}
	if _, ok := m.CountSinkErrors(struct{ Sink }{memory.New()}).(blob.Locker); ok {
		t.Error("the wrapper claims a writer lock the store does not have")
	}
}

func TestManifestConflictsAreCounted(t *testing.T) {
	m := New(prometheus.NewRegistry(), "test")
	ctx := context.Background()
	store := memory.New()
	base := &manifest.Manifest{FormatVersion: manifest.FormatVersion, Tables: map[string]*manifest.Table{}}
	a, err := manifest.Create(ctx, store, base, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	a.SetObserver(m.Manifest())
	b, err := manifest.Open(ctx, store, manifest.DefaultBreaker)
	if err != nil {
		t.Fatal(err)
	}
	// b (say, compaction) changes the manifest without moving the stream;
	// a's next commit conflicts, re-reads and lands.
	if _, err := b.Commit(ctx, func(m *manifest.Manifest) error {
		m.Garbage = append(m.Garbage, manifest.RetiredFile{Path: "x"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctx, func(m *manifest.Manifest) error { m.EndLSN = max(m.EndLSN, 5); return nil }); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.ConflictsResolved); got != 1 {
		t.Errorf("conflicts resolved = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.BreakerTripped); got != 0 {
		t.Errorf("breaker tripped = %v on one conflict", got)
	}
}

func TestReplicateObserverFeedsMetrics(t *testing.T) {
	m := New(prometheus.NewRegistry(), "test")
	beats := 0
	obs := m.Replicate(func() { beats++ }, nil)
	c := obs.Events(cdc.TableID{Schema: "public", Name: "t"}, cdc.OpDelete)
	c.Add(1)
	c.Add(1)
	obs.Flushed(replicate.FlushStats{Rows: 10, Bytes: 2048, Adjusted: 3})
	obs.Beat()
	obs.SchemaChanged(cdc.TableID{Schema: "public", Name: "t"})
	if got := testutil.ToFloat64(m.SchemaEvolutions.WithLabelValues("public.t")); got != 1 {
		t.Errorf("schema evolutions = %v", got)
	}
	if got := testutil.ToFloat64(m.Events.WithLabelValues("public.t", "D")); got != 2 {
		t.Errorf("events = %v", got)
	}
	if testutil.ToFloat64(m.Flushes) != 1 || testutil.ToFloat64(m.ValueCoercions) != 3 || beats != 1 {
		t.Errorf("flushes %v, coercions %v, beats %d", testutil.ToFloat64(m.Flushes), testutil.ToFloat64(m.ValueCoercions), beats)
	}
}

func TestTakeoverTripsTheBreakerGauge(t *testing.T) {
	m := New(prometheus.NewRegistry(), "test")
	ctx := context.Background()
	store := memory.New()
	a, err := manifest.Create(ctx, store, &manifest.Manifest{FormatVersion: manifest.FormatVersion, Tables: map[string]*manifest.Table{}}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	a.SetObserver(m.Manifest())
	b, err := manifest.Open(ctx, store, manifest.DefaultBreaker)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit(ctx, func(m *manifest.Manifest) error { m.EndLSN = 10; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctx, func(m *manifest.Manifest) error { m.EndLSN = max(m.EndLSN, 5); return nil }); !errors.Is(err, cdc.ErrCASBreaker) {
		t.Fatalf("commit after a takeover: %v", err)
	}
	if got := testutil.ToFloat64(m.BreakerTripped); got != 1 {
		t.Errorf("cas_breaker_tripped = %v after a takeover", got)
	}
}

// The counters with known label sets have every series from the start, at
// 0: an alert on increase() sees the first error.
func TestKnownSeriesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg, "test")
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"pgcdc_sink_errors_total": 7, "pgcdc_heartbeats_total": 2, "pgcdc_compaction_runs_total": 2}
	for _, f := range fams {
		n, ok := want[f.GetName()]
		if !ok {
			continue
		}
		delete(want, f.GetName())
		if len(f.GetMetric()) != n {
			t.Errorf("%s: %d series at start, want %d", f.GetName(), len(f.GetMetric()), n)
		}
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s%v = %v at start", f.GetName(), m.GetLabel(), v)
			}
		}
	}
	for name := range want {
		t.Errorf("%s has no series at start", name)
	}
}

// TestServeRefusals: the refusal counter has every surface × code series
// from the start, at 0, and counts by the exact code.
func TestServeRefusals(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := NewServe(reg)
	if n := testutil.CollectAndCount(s.refusals); n != 20 {
		t.Errorf("%d refusal series at start, want 4 surfaces × 5 codes", n)
	}
	s.Refused("rest", 401)
	s.Refused("rest", 401)
	s.Refused("mcp", 429)
	for _, c := range []struct {
		surface, code string
		want          float64
	}{{"rest", "401", 2}, {"mcp", "429", 1}, {"rest", "429", 0}, {"sse", "503", 0}} {
		if got := testutil.ToFloat64(s.refusals.WithLabelValues(c.surface, c.code)); got != c.want {
			t.Errorf("refusals{surface=%s,code=%s} = %v, want %v", c.surface, c.code, got, c.want)
		}
	}
	problems, err := testutil.GatherAndLint(reg, "pgcdc_serve_refusals_total")
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestSinkShape: the delta files and bytes of each table, the time of its
// newest compaction of each kind, and the manifest's size follow the
// committed versions; a table gone from the manifest loses its series.
func TestSinkShape(t *testing.T) {
	m := New(prometheus.NewRegistry(), "test")
	delta := func(sizes ...int64) manifest.Delta {
		d := manifest.Delta{}
		for _, s := range sizes {
			d.Files = append(d.Files, manifest.File{Bytes: s})
		}
		return d
	}
	compacted, merged := time.Unix(1_800_000_000, 0), time.Unix(1_800_000_060, 0)
	mf := &manifest.Manifest{Tables: map[string]*manifest.Table{
		"public.a": {Base: &manifest.Base{CompactedAt: &compacted}, Deltas: []manifest.Delta{delta(100, 50), delta(25)}},
		"public.b": {},
	}}
	mf.Tables["public.a"].Deltas[1].MergedAt = &merged
	m.SinkShape(mf, 4096)
	if got := testutil.ToFloat64(m.TableLastCompaction.WithLabelValues("public.a", "major")); got != 1_800_000_000 {
		t.Errorf("last major compaction of a = %v, want its base's time", got)
	}
	if got := testutil.ToFloat64(m.TableLastCompaction.WithLabelValues("public.a", "minor")); got != 1_800_000_060 {
		t.Errorf("last minor compaction of a = %v, want its merged delta's time", got)
	}
	if got := testutil.ToFloat64(m.TableDeltaFiles.WithLabelValues("public.a")); got != 3 {
		t.Errorf("delta files of a = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.TableDeltaBytes.WithLabelValues("public.a")); got != 175 {
		t.Errorf("delta bytes of a = %v, want 175", got)
	}
	if got := testutil.ToFloat64(m.ManifestBytes); got != 4096 {
		t.Errorf("manifest bytes = %v", got)
	}
	delete(mf.Tables, "public.a")
	m.SinkShape(mf, 1024)
	if n := testutil.CollectAndCount(m.TableDeltaFiles); n != 1 {
		t.Errorf("%d delta-file series after public.a left the manifest, want 1 (public.b)", n)
	}
	if n := testutil.CollectAndCount(m.TableLastCompaction); n != 0 {
		t.Errorf("%d last-compaction series after public.a left the manifest, want 0", n)
	}
}
