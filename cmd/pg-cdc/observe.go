package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/health"
	"github.com/pg-cdc/pg-cdc/internal/logging"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/metrics"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/replicate"
	"github.com/pg-cdc/pg-cdc/internal/runs"
	"github.com/pg-cdc/pg-cdc/internal/server"
)

// sourcePollTimeout bounds one source health query (connection included),
// so a saturated source leaves the gauges stale and source_up at 0 instead
// of freezing the poller.
const sourcePollTimeout = 5 * time.Second

// observability is what start runs beside the stream to be watched: the
// metrics, the health tracker, the HTTP endpoint, the source health poller
// and the heartbeat. Every goroutine it starts runs on its own context,
// which outlives the stop request (the endpoint keeps answering while the
// stream drains) and is cancelled and waited for by stop.
type observability struct {
	log     *slog.Logger
	metrics *metrics.Metrics
	health  *health.Tracker
	systemd *systemd
	scrub   *logging.Scrubber
	// run is this run's artifacts (state.path/runs/<run_id>/).
	run *runs.Run

	// What state.json reports beyond health. The stream's gauges are
	// teed here (received, confirmed, ...); the rest is set by the stream's
	// goroutine (recordManifest, durable) and start's loop.
	received, confirmed, lagBytes, bufEvents, bufBytes, spilled floatValue
	mu                                                          sync.Mutex
	durableLSN                                                  cdc.LSN
	epoch                                                       uint64
	tables                                                      map[string]runs.TableState
	sessions, reconnects                                        int
	warnArtifacts                                               sync.Once

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// stateInterval is how often state.json is refreshed while start runs.
const stateInterval = time.Minute

// startObservability builds the metrics and health and binds the HTTP
// endpoint (metrics.listen) at once, so a taken port fails start before it
// touches the source.
func startObservability(ctx context.Context, cfg config.Config, log *slog.Logger) (*observability, error) {
	reg := prometheus.NewRegistry()
	o := &observability{
		log:     log,
		metrics: metrics.New(reg, version),
		health:  health.New(time.Now, cfg.Metrics.LivenessTimeout, cfg.Metrics.ReadinessMaxLag),
		systemd: newSystemd(log),
		scrub:   scrubberFor(cfg),
		tables:  map[string]runs.TableState{},
	}
	// The run first: every goroutine below may report to it.
	run, err := startRun(ctx, cfg, o.scrub)
	if err != nil {
		return nil, err
	}
	o.run = run
	log.Info("writing run artifacts", "run_id", run.ID(), "dir", run.Dir())
	o.ctx, o.cancel = context.WithCancel(context.WithoutCancel(ctx))
	o.wg.Go(func() { o.systemd.RunWatchdog(o.ctx, func() bool { return o.health.Status().Alive }) })
	o.wg.Go(func() {
		select {
		case <-ctx.Done(): // the stop request: the drain begins
			o.systemd.Stopping()
			auditFrom(ctx).event("stop_requested")
			o.emit(runs.StopRequested{})
		case <-o.ctx.Done():
		}
	})
	if cfg.Metrics.Listen != "" {
		ln, err := server.Listen(cfg.Metrics.Listen)
		if err != nil {
			err = usageError{fmt.Errorf("metrics.listen: %w (set metrics.listen to a free host:port, or to \"\" to turn the endpoint off)", err)}
			o.stop()
			o.finish(err, nil)
			return nil, err
		}
		log.Info("serving metrics and health", "metrics_addr", ln.Addr().String())
		o.wg.Go(func() {
			if err := server.Serve(o.ctx, ln, server.Handler(reg, o.health), log); err != nil {
				log.Error("metrics endpoint stopped", "err", err)
			}
		})
	}
	o.wg.Go(func() { tick(o.ctx, stateInterval, func(context.Context) { o.writeState() }) })
	return o, nil
}

// stop cancels and waits for every goroutine observability started.
func (o *observability) stop() {
	o.cancel()
	o.wg.Wait()
}

// replicateObserver feeds the stream's gauges to metrics and health, and
// its flushes to the run artifacts. current is the stream's manifest; it is
// read only from the stream's own goroutine (in Flushed), which owns it.
func (o *observability) replicateObserver(current func() *manifest.Manifest) replicate.Observer {
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
		o.recordManifest(current())
		o.emit(runs.Flushed{Epoch: f.Epoch, LSN: f.EndLSN, Reason: f.Reason, Txns: f.Txns, Rows: f.Rows,
			Tables: f.Tables, Bytes: f.Bytes, DurationMS: f.Duration.Milliseconds()})
	}
	return obs
}

// durable records a new durable LSN for health and the run's state.
func (o *observability) durable(lsn cdc.LSN, at time.Time) {
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

// ready tells systemd that start-up is done: the sink and the manifest
// checked out. It does not wait for PostgreSQL, so a source outage at boot
// is retried under a started unit rather than timing the start out.
func (o *observability) ready() { o.systemd.Ready() }

// streaming records a session that streams from m's end LSN.
func (o *observability) streaming(slot string, m *manifest.Manifest, provider string) {
	o.health.Connected(true)
	o.systemd.Status(fmt.Sprintf("streaming slot %s from %s", slot, m.EndLSN))
	o.recordManifest(m)
	o.mu.Lock()
	o.sessions++
	n := o.sessions
	o.mu.Unlock()
	o.emit(runs.SessionStarted{Session: n, Slot: slot, LSN: m.EndLSN, Epoch: m.Epoch, Tables: len(m.Tables), Provider: provider})
}

// sessionEnded records a failed session that start will retry after wait;
// attempt counts the failures in a row.
func (o *observability) sessionEnded(err error, wait time.Duration, attempt int) {
	o.systemd.Status(o.scrub.Scrub(fmt.Sprintf("retrying in %s after: %v", wait, err)))
	// /readyz and /livez show it, so it is scrubbed like the log.
	o.health.Failed(errors.New(o.scrub.Scrub(err.Error())))
	o.health.Waiting(time.Now().Add(wait))
	o.metrics.Reconnects.Inc()
	o.mu.Lock()
	o.reconnects++
	o.mu.Unlock()
	o.emit(runs.SessionFailed{Attempt: attempt, Err: o.scrub.Scrub(err.Error()), WaitMS: wait.Milliseconds()})
}

// compacted records a compaction pass that ran inside start.
func (o *observability) compacted(results []compact.Result, gc compact.CollectResult, took time.Duration, err error) {
	e := runs.Compacted{GCDeleted: gc.Retired + gc.Orphans, DurationMS: took.Milliseconds()}
	for _, r := range results {
		if r.Skipped == "" {
			e.Tables++
			e.Rows += r.Rows
			e.FoldedDeltas += r.FoldedDeltas
		}
	}
	if err != nil {
		e.Err = o.scrub.Scrub(err.Error())
	}
	o.emit(e)
}

// recordManifest takes the epoch, the end LSN and the tables of m for
// state.json. The caller must own m: start's loop, or the stream's
// goroutine, never another one.
func (o *observability) recordManifest(m *manifest.Manifest) {
	if m == nil {
		return
	}
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
func (o *observability) emit(e runs.Event) {
	if o.run == nil {
		return
	}
	if err := o.run.Emit(e); err != nil {
		o.artifactFailed(err)
	}
}

// artifactFailed logs, once, that the run artifacts could not be written.
// It does not stop the stream: the artifacts describe it, and the same
// disk trouble stops the stream on its own (its epochs spool to
// state.path) with a proper error and exit code.
func (o *observability) artifactFailed(err error) {
	o.warnArtifacts.Do(func() {
		o.log.Warn("run artifacts could not be written; streaming goes on", "dir", o.run.Dir(), "err", err)
	})
}

// state is what state.json holds now.
func (o *observability) state() runs.State {
	h := o.health.Status()
	lsn := func(f *floatValue) cdc.LSN { return cdc.LSN(uint64(f.Get())) } // exact below 2^53 (8 PiB of WAL)
	o.mu.Lock()
	defer o.mu.Unlock()
	return runs.State{
		StartedAt: h.StartedAt, Connected: h.Connected, Sessions: o.sessions, Reconnects: o.reconnects,
		ReceivedLSN: lsn(&o.received), DurableLSN: o.durableLSN, ConfirmedLSN: lsn(&o.confirmed), DurableAt: h.DurableAt,
		Epoch: o.epoch, LagSeconds: h.LagSeconds, LagBytes: int64(o.lagBytes.Get()),
		BufferEvents: int64(o.bufEvents.Get()), BufferBytes: int64(o.bufBytes.Get()), SpilledBytes: int64(o.spilled.Get()),
		Tables: maps.Clone(o.tables), LastError: o.scrub.Scrub(h.LastError), LastErrorAt: h.LastErrAt,
	}
}

// writeState refreshes state.json.
func (o *observability) writeState() {
	if o.run == nil {
		return
	}
	if err := o.run.WriteState(o.state()); err != nil {
		o.artifactFailed(err)
	}
}

// finish closes the run artifacts once start is over: the final state, the
// exit code and error runErr maps to, the summary. m is the stream's last
// manifest (nil when start stopped before reading one). Call it after stop.
func (o *observability) finish(runErr error, m *manifest.Manifest) {
	if o.run == nil {
		return
	}
	o.recordManifest(m)
	stop := runs.Stop{ExitCode: ExitOK}
	if runErr != nil {
		stop.ExitCode, stop.Err = exitCode(runErr), o.scrub.Scrub(runErr.Error())
	}
	o.mu.Lock()
	stop.DurableLSN = o.durableLSN
	o.mu.Unlock()
	if err := o.run.Finish(o.state(), stop); err != nil {
		o.log.Warn("run artifacts could not be written", "dir", o.run.Dir(), "err", err)
	}
}

// startRun creates this run's artifacts under state.path/runs.
func startRun(ctx context.Context, cfg config.Config, scrub *logging.Scrubber) (*runs.Run, error) {
	settings := cfg.Redacted().Settings()
	conf := make(map[string]any, len(settings))
	for _, s := range settings {
		switch v := s.Value.(type) {
		case time.Duration:
			conf[s.Key] = config.FormatDuration(v)
		case string:
			conf[s.Key] = scrub.Scrub(v)
		default:
			conf[s.Key] = v
		}
	}
	args := make([]string, 0, len(os.Args))
	for _, a := range os.Args[1:] {
		args = append(args, scrub.Scrub(a))
	}
	host, _ := os.Hostname()
	r, err := runs.Start(filepath.Join(cfg.State.Path, "runs"), runs.Info{
		RunID: runIDFrom(ctx), Version: version, Command: "start", Args: args, PID: os.Getpid(),
		Host: host, User: currentUser(), StartedAt: time.Now(), Config: conf,
	}, runs.Options{Redact: scrub.Scrub})
	if err != nil {
		return nil, fmt.Errorf("run artifacts: %w", err)
	}
	return r, nil
}

// watchSource starts the source health poller and, when configured, the
// heartbeat. They use their own connections (opened per poll through spec,
// so rotated credentials apply) and never stop the stream: a failed poll
// sets source_up to 0 and is logged once per outage.
func (o *observability) watchSource(cfg config.Config, spec postgres.ConnSpec, slot string) {
	every := max(time.Second, min(cfg.Replication.StandbyInterval, 15*time.Second))
	o.wg.Go(func() {
		p := &sourcePoller{log: o.log, m: o.metrics, spec: spec, slot: slot,
			maxRetained: cfg.Guardrail.MaxRetainedWALBytes, event: o.emit}
		defer p.close()
		tick(o.ctx, every, p.poll)
	})
	if hb := cfg.Replication.HeartbeatInterval; hb > 0 {
		o.wg.Go(func() {
			h := &heartbeat{log: o.log, m: o.metrics, spec: spec}
			defer h.close()
			tick(o.ctx, hb, h.beat)
		})
	}
}

// tick runs fn now and then every interval until ctx is done.
func tick(ctx context.Context, every time.Duration, fn func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sourcePoller reads the slot and server gauges, and forecasts when the
// slot would be invalidated at the current WAL rate.
type sourcePoller struct {
	log         *slog.Logger
	m           *metrics.Metrics
	spec        postgres.ConnSpec
	slot        string
	maxRetained int64
	event       func(runs.Event) // the run's events: guardrail crossings

	db       *postgres.DB
	down     bool // the last poll failed (logged once per outage)
	exceeded bool // the guardrail is crossed (logged once per crossing)
	lastLSN  cdc.LSN
	lastAt   time.Time
	rate     float64 // WAL bytes per second, smoothed
}

func (p *sourcePoller) close() {
	if p.db != nil {
		p.db.Close()
	}
}

func (p *sourcePoller) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, sourcePollTimeout)
	defer cancel()
	h, err := p.read(ctx)
	if err != nil {
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
			return // stopping
		}
		p.m.SourceUp.Set(0)
		if !p.down {
			p.log.Warn("source health query failed; gauges are stale until it answers", "err", err)
			p.down = true
		}
		if p.db != nil {
			p.db.Close()
			p.db = nil
		}
		return
	}
	if p.down {
		p.log.Info("source health query answers again")
		p.down = false
	}
	p.m.SourceUp.Set(1)
	p.m.SourceOldestXactAge.Set(h.OldestXactAge)
	p.m.SlotActive.Set(boolGauge(h.Slot.Active))
	p.m.SlotRetainedWALBytes.Set(float64(h.Slot.RetainedBytes))
	p.m.SlotSafeWALSizeBytes.Set(float64(h.SafeWALSize))

	now := time.Now()
	if !p.lastAt.IsZero() && h.CurrentLSN >= p.lastLSN {
		r := float64(h.CurrentLSN-p.lastLSN) / now.Sub(p.lastAt).Seconds()
		if p.rate == 0 {
			p.rate = r
		} else {
			p.rate = 0.7*p.rate + 0.3*r // smooth bursts; a trend shows within a few polls
		}
		p.m.SourceWALRate.Set(p.rate)
	}
	p.lastLSN, p.lastAt = h.CurrentLSN, now
	p.m.SlotInvalidationETA.Set(invalidationETA(h.SafeWALSize, p.rate))

	if p.maxRetained > 0 {
		over := h.Slot.RetainedBytes > p.maxRetained
		p.m.GuardrailRetainedExceeded.Set(boolGauge(over))
		if over && !p.exceeded {
			p.log.Warn("replication slot retains more WAL than guardrail.max_retained_wal_bytes",
				"slot", p.slot, "retained_bytes", h.Slot.RetainedBytes, "limit_bytes", p.maxRetained,
				"safe_wal_size_bytes", h.SafeWALSize)
		}
		if over != p.exceeded && p.event != nil {
			p.event(runs.Guardrail{Slot: p.slot, RetainedBytes: h.Slot.RetainedBytes, LimitBytes: p.maxRetained, Exceeded: over})
		}
		p.exceeded = over
	}
}

func (p *sourcePoller) read(ctx context.Context) (postgres.SourceHealth, error) {
	if p.db == nil {
		db, err := postgres.Connect(ctx, p.spec)
		if err != nil {
			return postgres.SourceHealth{}, err
		}
		p.db = db
	}
	return p.db.SourceHealth(ctx, p.slot)
}

// invalidationETA is how long until safeSize bytes of WAL are written at
// rate bytes per second; -1 when there is no limit or WAL is not growing.
func invalidationETA(safeSize int64, rate float64) float64 {
	if safeSize < 0 || rate <= 0 {
		return -1
	}
	return float64(safeSize) / rate
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// heartbeat emits a logical message on the source now and then
// (replication.heartbeat_interval_sec).
type heartbeat struct {
	log  *slog.Logger
	m    *metrics.Metrics
	spec postgres.ConnSpec
	db   *postgres.DB
	down bool
}

func (h *heartbeat) close() {
	if h.db != nil {
		h.db.Close()
	}
}

func (h *heartbeat) beat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, sourcePollTimeout)
	defer cancel()
	err := func() error {
		if h.db == nil {
			db, err := postgres.Connect(ctx, h.spec)
			if err != nil {
				return err
			}
			h.db = db
		}
		_, err := h.db.EmitHeartbeat(ctx)
		return err
	}()
	if err != nil {
		if errors.Is(context.Cause(ctx), context.Canceled) {
			return
		}
		h.m.Heartbeats.WithLabelValues("error").Inc()
		if !h.down {
			h.log.Warn("heartbeat failed", "err", err)
			h.down = true
		}
		if h.db != nil {
			h.db.Close()
			h.db = nil
		}
		return
	}
	h.down = false
	h.m.Heartbeats.WithLabelValues("ok").Inc()
}
