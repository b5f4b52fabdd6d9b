package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/health"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/metrics"
	"github.com/pg-cdc/pg-cdc/internal/replicate"
	"github.com/pg-cdc/pg-cdc/internal/runs"
	"github.com/pg-cdc/pg-cdc/internal/server"
)

// stateInterval is how often state.json is refreshed while start runs.
const stateInterval = time.Minute

// observer is what the process reports about itself, and to whom: the
// metrics, the health tracker (/livez, /readyz, the systemd watchdog),
// systemd, and the run artifacts under state.path/runs/<run_id>/ (run.json,
// events.ndjson, state.json, summary.md). The stream's parts report to it
// from their own goroutines; it never stops the stream.
type observer struct {
	log     *slog.Logger
	scrub   func(string) string
	reg     *prometheus.Registry
	metrics *metrics.Metrics
	health  *health.Tracker
	systemd *systemd
	run     *runs.Run // nil when the artifacts could not be opened (never: Run fails then)

	// What state.json reports beyond health. The stream's gauges are teed
	// here; the manifest's tables come from the post-commit seam.
	received, confirmed, lagBytes, bufEvents, bufBytes, spilled floatValue
	mu                                                          sync.Mutex
	durableLSN                                                  cdc.LSN
	epoch                                                       uint64
	tables                                                      map[string]runs.TableState
	sessions, reconnects                                        int
	warnArtifacts                                               sync.Once
	deltaWarned                                                 map[string]bool // tables warned of past deltaWarnFiles
}

// newObserver builds the metrics and health and opens this run's
// artifacts.
func newObserver(o Options) (*observer, error) {
	reg := prometheus.NewRegistry()
	obs := &observer{
		log: o.Log, scrub: o.Scrub, reg: reg,
		metrics: metrics.New(reg, o.Version),
		health:  health.New(time.Now, o.LivenessTimeout, o.ReadinessMaxLag),
		systemd: newSystemd(o.Log),
		tables:  map[string]runs.TableState{},
	}
	host, _ := os.Hostname()
	r, err := runs.Start(filepath.Join(o.Stream.StateDir, "runs"), runs.Info{
		RunID: o.RunID, Version: o.Version, Command: "start", Args: o.Args, PID: os.Getpid(),
		Host: host, User: o.User, StartedAt: time.Now(), Config: o.Settings,
	}, runs.Options{Redact: o.Scrub})
	if err != nil {
		return nil, fmt.Errorf("run artifacts: %w", err)
	}
	obs.run = r
	o.Log.Info("writing run artifacts", "run_id", r.ID(), "dir", r.Dir())
	return obs, nil
}

// listen binds the metrics and health endpoint at once, so a taken port
// fails start before it touches the source.
func (o *observer) listen(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := server.Listen(addr)
	if err != nil {
		return nil, cdc.Usage(fmt.Errorf("metrics.listen: %w (set metrics.listen to a free host:port, or to \"\" to turn the endpoint off)", err))
	}
	o.log.Info("serving metrics and health", "metrics_addr", ln.Addr().String())
	return ln, nil
}

// serve serves /metrics, /livez and /readyz on ln until ctx is done.
func (o *observer) serve(ctx context.Context, ln net.Listener) {
	if err := server.Serve(ctx, ln, server.Handler(o.reg, o.health), o.log); err != nil {
		o.log.Error("metrics endpoint stopped", "err", err)
	}
}

// stream feeds the stream's gauges to metrics and health, and its flushes
// to the run artifacts.
func (o *observer) stream() replicate.Observer {
	obs := o.metrics.Replicate(o.health.Beat, o.durable)
	obs.LagSeconds = lagGauge{o.metrics.LagSeconds, o.health}
	obs.ReceivedLSN = teeGauge{obs.ReceivedLSN, &o.received}
	obs.ConfirmedLSN = teeGauge{obs.ConfirmedLSN, &o.confirmed}
	obs.LagBytes = teeGauge{obs.LagBytes, &o.lagBytes}
	obs.BufferEvents = teeGauge{obs.BufferEvents, &o.bufEvents}
	obs.BufferBytes = teeGauge{obs.BufferBytes, &o.bufBytes}
	obs.SpilledBytes = teeGauge{obs.SpilledBytes, &o.spilled}
	flushed := obs.Flushed
	obs.Flushed = func(f replicate.FlushStats) {
		flushed(f)
		o.emit(runs.Flushed{Epoch: f.Epoch, LSN: f.EndLSN, Reason: f.Reason, Txns: f.Txns, Rows: f.Rows,
			Tables: f.Tables, Bytes: f.Bytes, DurationMS: f.Duration.Milliseconds()})
	}
	return obs
}

// durable records a new durable LSN for health and the run's state.
func (o *observer) durable(lsn cdc.LSN, at time.Time) {
	o.health.Durable(lsn, at)
	o.mu.Lock()
	o.durableLSN = max(o.durableLSN, lsn)
	o.mu.Unlock()
}

// floatValue is a gauge's last value, safe for concurrent use.
type floatValue struct{ bits atomic.Uint64 }

func (f *floatValue) Set(v float64) { f.bits.Store(math.Float64bits(v)) }
func (f *floatValue) Get() float64  { return math.Float64frombits(f.bits.Load()) }

// teeGauge sets a gauge and keeps its value for state.json.
type teeGauge struct {
	g replicate.Gauge
	v *floatValue
}

func (t teeGauge) Set(v float64) {
	t.g.Set(v)
	t.v.Set(v)
}

// lagGauge sets the lag metric and tells readiness.
type lagGauge struct {
	g prometheus.Gauge
	h *health.Tracker
}

func (l lagGauge) Set(v float64) {
	l.g.Set(v)
	l.h.Lag(time.Duration(v * float64(time.Second)))
}

// streaming records a session that streams from m's end LSN.
func (o *observer) streaming(slot string, m *manifest.Manifest, provider string) {
	o.health.Connected(true)
	o.systemd.Status(fmt.Sprintf("streaming slot %s from %s", slot, m.EndLSN))
	o.recordManifest(m)
	o.mu.Lock()
	o.sessions++
	n := o.sessions
	o.mu.Unlock()
	o.emit(runs.SessionStarted{Session: n, Slot: slot, LSN: m.EndLSN, Epoch: m.Epoch, Tables: len(m.Tables), Provider: provider})
}

// sessionEnded records a failed session that the retry loop retries after
// wait; attempt counts the failures in a row.
func (o *observer) sessionEnded(err error, wait time.Duration, attempt int) {
	msg := o.scrub(err.Error())
	o.systemd.Status(o.scrub(fmt.Sprintf("retrying in %s after: %v", wait, err)))
	// /readyz and /livez show it, so it is scrubbed like the log.
	o.health.Failed(errors.New(msg))
	o.health.Waiting(time.Now().Add(wait))
	o.metrics.Reconnects.Inc()
	o.mu.Lock()
	o.reconnects++
	o.mu.Unlock()
	o.emit(runs.SessionFailed{Attempt: attempt, Err: msg, WaitMS: wait.Milliseconds()})
}

// compacted records a compaction pass that ran inside start.
func (o *observer) compacted(p compactionPass) {
	e := runs.Compacted{Merges: len(p.Minor), DurationMS: p.Took.Milliseconds()}
	for _, r := range p.Minor {
		e.MergedDeltas += r.Merged
	}
	for _, r := range p.Major {
		e.Tables++
		e.Rows += r.Rows
		e.FoldedDeltas += r.FoldedDeltas
	}
	if p.GC != nil {
		e.GCDeleted = p.GC.Retired + p.GC.Orphans
	}
	if p.Err != nil {
		e.Err = o.scrub(p.Err.Error())
	}
	o.emit(e)
}

// recordManifest takes the epoch, the end LSN and the tables of m, a
// committed version, for state.json.
func (o *observer) recordManifest(m *manifest.Manifest) {
	if m == nil {
		return
	}
	if o.metrics != nil {
		o.metrics.SinkShape(m, m.EncodedBytes())
	}
	o.warnDeltas(m)
	tables := make(map[string]runs.TableState, len(m.Tables))
	for name, t := range m.Tables {
		ts := runs.TableState{Deltas: len(t.Deltas)}
		for _, d := range t.Deltas {
			ts.LastDeltaEpoch = max(ts.LastDeltaEpoch, d.Epoch)
		}
		if t.Base != nil {
			ts.BaseEpoch = t.Base.Epoch
		}
		tables[name] = ts
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.epoch, o.tables = m.Epoch, tables
	o.durableLSN = max(o.durableLSN, m.EndLSN)
}

// emit appends an event to the run's events.ndjson.
func (o *observer) emit(e runs.Event) {
	if err := o.run.Emit(e); err != nil {
		o.artifactFailed(err)
	}
}

// artifactFailed logs, once, that the run artifacts could not be written.
// It does not stop the stream: the artifacts describe it, and the same
// disk trouble stops the stream on its own (its epochs spool to
// state.path) with a proper error and exit code.
func (o *observer) artifactFailed(err error) {
	o.warnArtifacts.Do(func() {
		o.log.Warn("run artifacts could not be written; streaming goes on", "dir", o.run.Dir(), "err", err)
	})
}

// state is what state.json holds now.
func (o *observer) state() runs.State {
	h := o.health.Status()
	lsn := func(f *floatValue) cdc.LSN { return cdc.LSN(uint64(f.Get())) } // exact below 2^53 (8 PiB of WAL)
	o.mu.Lock()
	defer o.mu.Unlock()
	return runs.State{
		StartedAt: h.StartedAt, Connected: h.Connected, Sessions: o.sessions, Reconnects: o.reconnects,
		ReceivedLSN: lsn(&o.received), DurableLSN: o.durableLSN, ConfirmedLSN: lsn(&o.confirmed), DurableAt: h.DurableAt,
		Epoch: o.epoch, LagSeconds: h.LagSeconds, LagBytes: int64(o.lagBytes.Get()),
		BufferEvents: int64(o.bufEvents.Get()), BufferBytes: int64(o.bufBytes.Get()), SpilledBytes: int64(o.spilled.Get()),
		Tables: maps.Clone(o.tables), LastError: o.scrub(h.LastError), LastErrorAt: h.LastErrAt,
	}
}

// writeState refreshes state.json.
func (o *observer) writeState(context.Context) {
	if err := o.run.WriteState(o.state()); err != nil {
		o.artifactFailed(err)
	}
}

// finish closes the run artifacts once everything else has stopped: the
// final state, the exit code and error runErr maps to, the summary. m is
// the last manifest (nil when start stopped before reading one).
func (o *observer) finish(runErr error, code int, m *manifest.Manifest) {
	o.recordManifest(m)
	stop := runs.Stop{ExitCode: code}
	if runErr != nil {
		stop.Err = o.scrub(runErr.Error())
	}
	o.mu.Lock()
	stop.DurableLSN = o.durableLSN
	o.mu.Unlock()
	if err := o.run.Finish(o.state(), stop); err != nil {
		o.log.Warn("run artifacts could not be written", "dir", o.run.Dir(), "err", err)
	}
}

// deltaWarnFiles is the delta files of one table past which the run warns
// (status too): compaction keeps a table below it unless it is off or
// failing.
const deltaWarnFiles = capture.DeltaFilesBound

// warnDeltas logs, once each time a table crosses deltaWarnFiles, that its
// deltas pile up: every read merges them all, and the manifest lists them.
func (o *observer) warnDeltas(m *manifest.Manifest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.deltaWarned == nil {
		o.deltaWarned = map[string]bool{}
	}
	for key, t := range m.Tables {
		files, _ := t.DeltaFiles()
		switch {
		case files > deltaWarnFiles && !o.deltaWarned[key]:
			o.deltaWarned[key] = true
			o.log.Warn("a table's delta files pile up: every read merges them and every flush rewrites the manifest that lists them; compaction is off (compaction.interval 0s) or failing (see its log lines), or run pg-cdc compact",
				"table", key, "delta_files", files, "bound", deltaWarnFiles)
		case files <= deltaWarnFiles:
			delete(o.deltaWarned, key)
		}
	}
}
