// Package metrics owns pg-cdc's Prometheus collectors. Everything is
// registered on a registry the caller injects (no package globals), so a test
// reads a fresh one. Names carry the pgcdc_ prefix and base units (seconds,
// bytes); labels are bounded: a table label takes only captured tables, an
// op label the four change kinds. docs/metrics.md lists every metric with
// example alert rules.
//
// The domain packages do not import this one: they declare the instruments
// they update (replicate.Observer, manifest.Observer) and this package fills
// them in.
package metrics

import (
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/replicate"
)

const ns = "pgcdc"

// Metrics holds every collector of one pg-cdc process.
type Metrics struct {
	// Stream positions and lag.
	LagSeconds   prometheus.Gauge
	LagBytes     prometheus.Gauge
	ReceivedLSN  prometheus.Gauge
	DurableLSN   prometheus.Gauge
	ConfirmedLSN prometheus.Gauge

	// Source health, from the slot and the server (see Poller).
	SlotActive                prometheus.Gauge
	SlotRetainedWALBytes      prometheus.Gauge
	SlotSafeWALSizeBytes      prometheus.Gauge
	SlotInvalidationETA       prometheus.Gauge
	SourceOldestXactAge       prometheus.Gauge
	SourceUp                  prometheus.Gauge
	SourceWALRate             prometheus.Gauge
	GuardrailRetainedExceeded prometheus.Gauge

	Events        *prometheus.CounterVec
	Flushes       prometheus.Counter
	FlushDuration prometheus.Histogram
	FlushRows     prometheus.Histogram
	FlushBytes    prometheus.Histogram

	BufferEvents prometheus.Gauge
	BufferBytes  prometheus.Gauge
	SpilledBytes prometheus.Gauge

	SinkErrors        *prometheus.CounterVec
	ConflictsResolved prometheus.Counter
	BreakerTripped    prometheus.Gauge

	EventChannelFull           prometheus.Counter
	EventChannelBlockedSeconds prometheus.Counter
	Reconnects                 prometheus.Counter
	Heartbeats                 *prometheus.CounterVec
	ValueCoercions             prometheus.Counter
	SchemaEvolutions           *prometheus.CounterVec

	CompactionRuns        *prometheus.CounterVec
	CompactionDuration    prometheus.Histogram
	CompactionInputRows   prometheus.Counter
	CompactionOutputRows  prometheus.Counter
	CompactionLastSuccess prometheus.Gauge
	Compactions           *prometheus.CounterVec
	TableLastCompaction   *prometheus.GaugeVec

	// The sink's shape, from each committed manifest version (SinkShape):
	// what compaction has to fold, and what every flush rewrites.
	TableDeltaFiles *prometheus.GaugeVec
	TableDeltaBytes *prometheus.GaugeVec
	ManifestBytes   prometheus.Gauge
	shapeMu         sync.Mutex
	shapeTables     map[string]bool // the tables SinkShape last set
	GCDeletedFiles  prometheus.Counter

	CatalogPublishedVersion *prometheus.GaugeVec
	CatalogCommits          *prometheus.CounterVec
	CatalogFailures         *prometheus.CounterVec
	CatalogLagVersions      prometheus.Gauge
	CatalogLagSeconds       prometheus.Gauge

	BuildInfo *prometheus.GaugeVec
}

// New creates the collectors and registers them, with the Go runtime and
// process collectors, on reg.
func New(reg prometheus.Registerer, version string) *Metrics {
	f := factory{reg}
	m := &Metrics{
		LagSeconds: f.gauge("replication_lag_seconds",
			"Age of the oldest committed change received but not yet durable in the sink (0 when everything received is durable)."),
		LagBytes: f.gauge("replication_lag_bytes",
			"WAL the server has (as far as this process knows) past the durable LSN."),
		ReceivedLSN:  f.gauge("received_lsn", "End LSN of the last committed transaction received, as a number."),
		DurableLSN:   f.gauge("durable_lsn", "The manifest's end LSN: everything before it is durable in the sink."),
		ConfirmedLSN: f.gauge("confirmed_lsn", "The last position sent to PostgreSQL as flushed (never past durable_lsn)."),

		SlotActive: f.gauge("slot_active", "1 when the replication slot is active (a walsender streams from it), as PostgreSQL reports it."),
		SlotRetainedWALBytes: f.gauge("slot_retained_wal_bytes",
			"WAL the slot keeps on the source: pg_current_wal_lsn() - restart_lsn."),
		SlotSafeWALSizeBytes: f.gauge("slot_safe_wal_size_bytes",
			"WAL that can still be written before the slot is invalidated by max_slot_wal_keep_size; -1 when unlimited."),
		SlotInvalidationETA: f.gauge("slot_invalidation_forecast_seconds",
			"At the current WAL rate, seconds until the slot would be invalidated; -1 when unlimited or WAL is not growing."),
		SourceOldestXactAge: f.gauge("source_oldest_xact_age_seconds",
			"Age of the oldest open transaction on the source (it holds back what logical decoding can send)."),
		SourceUp:      f.gauge("source_up", "1 when the last source health query succeeded within its timeout."),
		SourceWALRate: f.gauge("source_wal_bytes_per_second", "WAL written on the source per second, between the last two health polls."),
		GuardrailRetainedExceeded: f.gauge("guardrail_retained_wal_exceeded",
			"1 when slot_retained_wal_bytes is above guardrail.max_retained_wal_bytes."),

		Events:  f.counterVec("events_total", "Change rows written to the sink, by table and operation (I, U, D, T).", "table", "op"),
		Flushes: f.counter("flushes_total", "Epochs made durable (delta files and a manifest write)."),
		FlushDuration: f.histogram("flush_duration_seconds", "Time of one flush: files, upload, manifest.",
			prometheus.ExponentialBuckets(0.01, 2, 14)),
		FlushRows: f.histogram("flush_rows", "Rows per flush.", prometheus.ExponentialBuckets(1, 4, 12)),
		FlushBytes: f.histogram("flush_bytes", "Parquet bytes per flush.",
			prometheus.ExponentialBuckets(1024, 4, 12)),

		BufferEvents: f.gauge("buffer_events", "Rows of the open epoch, not yet durable."),
		BufferBytes:  f.gauge("buffer_bytes", "Encoded bytes of the open epoch, spooled on local disk, not yet durable."),
		SpilledBytes: f.gauge("spilled_bytes", "Bytes of in-progress (streamed) transactions spilled to state.path."),

		SinkErrors: f.counterVec("sink_errors_total",
			"Sink requests that failed (after the store's own retries for kind=request; each failed attempt for kind=attempt), by operation.",
			"op", "kind"),
		ConflictsResolved: f.counter("manifest_conflicts_resolved_total",
			"Manifest writes that lost a compare-and-swap, re-read the manifest and applied the change again."),
		BreakerTripped: f.gauge("cas_breaker_tripped",
			"1 once the manifest conflict breaker tripped or another writer took the stream over; the process stops."),

		EventChannelFull: f.counter("event_channel_full_total",
			"Times reception paused for a flush while the server had more WAL to send (pg-cdc reads and writes in one loop; backpressure goes to the walsender)."),
		EventChannelBlockedSeconds: f.counter("event_channel_blocked_seconds_total",
			"Seconds reception was paused for a flush while the server had more WAL to send."),
		Reconnects: f.counter("reconnects_total", "Replication sessions started again after a transient failure."),
		Heartbeats: f.counterVec("heartbeats_total", "Heartbeat messages emitted on the source, by result.", "result"),
		SchemaEvolutions: f.counterVec("schema_evolutions_total",
			"New schema versions followed from the stream (a column added, dropped, renamed or retyped), by table.", "table"),
		ValueCoercions: f.counter("value_coercions_total",
			"Values written by a documented type rule (docs/types.md), e.g. infinity as an extreme value."),

		CompactionRuns: f.counterVec("compaction_runs_total", "Compaction passes run inside start, by result (ok, error).", "result"),
		CompactionDuration: f.histogram("compaction_duration_seconds", "Time of one compaction pass, garbage collection included.",
			prometheus.ExponentialBuckets(0.1, 2, 14)),
		CompactionInputRows:   f.counter("compaction_input_rows_total", "Row versions (base and deltas) read by compactions."),
		CompactionOutputRows:  f.counter("compaction_output_rows_total", "Rows written to new bases, tombstones included."),
		CompactionLastSuccess: f.gauge("compaction_last_success_timestamp_seconds", "Unix time of the last compaction pass that succeeded."),
		Compactions:           f.counterVec("compactions_total", "Table compactions committed inside start, by kind: minor (deltas merged into one) or major (a new base).", "kind"),
		TableLastCompaction:   f.gaugeVec("table_last_compaction_timestamp_seconds", "Unix time of the table's newest compaction of each kind (minor, major) that the manifest still shows; absent before the first.", "table", "kind"),
		TableDeltaFiles:       f.gaugeVec("table_delta_files", "Delta files of the table's current generation not yet folded into a base by compaction.", "table"),
		TableDeltaBytes:       f.gaugeVec("table_delta_bytes", "Bytes of those delta files: what awaits compaction.", "table"),
		ManifestBytes:         f.gauge("manifest_bytes", "Size of the newest committed manifest, which every flush rewrites whole."),
		GCDeletedFiles:        f.counter("gc_deleted_files_total", "Data files deleted by garbage collection (retired and orphaned)."),

		CatalogPublishedVersion: f.gaugeVec("catalog_published_version", "The manifest version each captured table's Iceberg tables were last brought to.", "table"),
		CatalogCommits:          f.counterVec("catalog_commits_total", "Iceberg commits the publisher made, per captured table.", "table"),
		CatalogFailures:         f.counterVec("catalog_failures_total", "Failed publications of a captured table to the catalog (each is retried).", "table"),
		CatalogLagVersions:      f.gauge("catalog_lag_versions", "Manifest versions committed but not yet published to the catalog, after the last attempt."),
		CatalogLagSeconds:       f.gauge("catalog_lag_seconds", "Age of the newest commit the catalog holds, after the last attempt (now - its commit time)."),

		BuildInfo: f.gaugeVec("build_info", "Always 1; labels name the build.", "version", "goversion"),
	}
	m.BuildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	m.SlotSafeWALSizeBytes.Set(-1)
	m.SlotInvalidationETA.Set(-1)
	// The known label sets start at 0, so an alert on the first increase
	// sees it (a series born at 1 has no increase).
	for _, op := range sinkOps {
		m.SinkErrors.WithLabelValues(op, "request")
	}
	m.SinkErrors.WithLabelValues(attemptOp, "attempt")
	for _, r := range []string{"ok", "error"} {
		m.Heartbeats.WithLabelValues(r)
		m.CompactionRuns.WithLabelValues(r)
	}
	for _, k := range []string{"minor", "major"} {
		m.Compactions.WithLabelValues(k)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Replicate returns the streaming service's observer. beat and durable feed
// health (may be nil).
func (m *Metrics) Replicate(beat func(), durable func(cdc.LSN, time.Time)) replicate.Observer {
	return replicate.Observer{
		ReceivedLSN: m.ReceivedLSN, DurableLSN: m.DurableLSN, ConfirmedLSN: m.ConfirmedLSN,
		LagBytes: m.LagBytes, LagSeconds: m.LagSeconds,
		Events: func(t cdc.TableID, op cdc.Op) replicate.Counter {
			return m.Events.WithLabelValues(t.String(), op.String())
		},
		Flushed: func(f replicate.FlushStats) {
			m.Flushes.Inc()
			m.FlushDuration.Observe(f.Duration.Seconds())
			m.FlushRows.Observe(float64(f.Rows))
			m.FlushBytes.Observe(float64(f.Bytes))
			m.ValueCoercions.Add(float64(f.Adjusted))
		},
		BufferEvents: m.BufferEvents, BufferBytes: m.BufferBytes, SpilledBytes: m.SpilledBytes,
		Stalled: func(d time.Duration) {
			m.EventChannelFull.Inc()
			m.EventChannelBlockedSeconds.Add(d.Seconds())
		},
		SchemaChanged: func(t cdc.TableID) { m.SchemaEvolutions.WithLabelValues(t.String()).Inc() },
		Beat:          beat,
		Durable:       durable,
	}
}

// Catalog returns the Iceberg publisher's observer (catalog.type iceberg).
func (m *Metrics) Catalog() catalog.Observer { return catalogObserver{m} }

type catalogObserver struct{ m *Metrics }

func (c catalogObserver) Published(table string, version uint64, _ time.Duration, committed bool) {
	c.m.CatalogPublishedVersion.WithLabelValues(table).Set(float64(version))
	if committed {
		c.m.CatalogCommits.WithLabelValues(table).Inc()
	}
}

func (c catalogObserver) Failed(table string) { c.m.CatalogFailures.WithLabelValues(table).Inc() }

func (c catalogObserver) Behind(versions uint64, age time.Duration) {
	c.m.CatalogLagVersions.Set(float64(versions))
	c.m.CatalogLagSeconds.Set(age.Seconds())
}

// Manifest returns the manifest committer's observer.
func (m *Metrics) Manifest() manifest.Observer {
	return manifest.Observer{
		ConflictResolved: m.ConflictsResolved.Inc,
		Tripped:          func() { m.BreakerTripped.Set(1) },
	}
}

// factory names and registers collectors.
type factory struct{ reg prometheus.Registerer }

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

// SinkShape sets the sink-shape gauges from a committed manifest version
// and its encoded size (0: not known, the gauge keeps its value); tables
// gone from the manifest lose their series.
func (m *Metrics) SinkShape(mf *manifest.Manifest, encodedBytes int) {
	if encodedBytes > 0 {
		m.ManifestBytes.Set(float64(encodedBytes))
	}
	m.shapeMu.Lock()
	defer m.shapeMu.Unlock()
	seen := make(map[string]bool, len(mf.Tables))
	for key, t := range mf.Tables {
		seen[key] = true
		files, bytes := t.DeltaFiles()
		m.TableDeltaFiles.WithLabelValues(key).Set(float64(files))
		m.TableDeltaBytes.WithLabelValues(key).Set(float64(bytes))
		if t.Base != nil && t.Base.CompactedAt != nil {
			m.TableLastCompaction.WithLabelValues(key, "major").Set(float64(t.Base.CompactedAt.Unix()))
		}
		if minor := t.LastMerged(); !minor.IsZero() {
			m.TableLastCompaction.WithLabelValues(key, "minor").Set(float64(minor.Unix()))
		}
	}
	for key := range m.shapeTables {
		if !seen[key] {
			m.TableDeltaFiles.DeleteLabelValues(key)
			m.TableDeltaBytes.DeleteLabelValues(key)
			m.TableLastCompaction.DeleteLabelValues(key, "major")
			m.TableLastCompaction.DeleteLabelValues(key, "minor")
		}
	}
	m.shapeTables = seen
}
