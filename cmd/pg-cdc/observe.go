package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/health"
	"github.com/pg-cdc/pg-cdc/internal/metrics"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/replicate"
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

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

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
	}
	o.ctx, o.cancel = context.WithCancel(context.WithoutCancel(ctx))
	o.wg.Go(func() { o.systemd.RunWatchdog(o.ctx, func() bool { return o.health.Status().Alive }) })
	o.wg.Go(func() {
		select {
		case <-ctx.Done(): // the stop request: the drain begins
			o.systemd.Stopping()
		case <-o.ctx.Done():
		}
	})
	if cfg.Metrics.Listen == "" {
		return o, nil
	}
	ln, err := server.Listen(cfg.Metrics.Listen)
	if err != nil {
		o.cancel()
		return nil, usageError{fmt.Errorf("metrics.listen: %w (set metrics.listen to a free host:port, or to \"\" to turn the endpoint off)", err)}
	}
	log.Info("serving metrics and health", "metrics_addr", ln.Addr().String())
	o.wg.Go(func() {
		if err := server.Serve(o.ctx, ln, server.Handler(reg, o.health), log); err != nil {
			log.Error("metrics endpoint stopped", "err", err)
		}
	})
	return o, nil
}

// stop cancels and waits for every goroutine observability started.
func (o *observability) stop() {
	o.cancel()
	o.wg.Wait()
}

// replicateObserver feeds the stream's gauges to metrics and health.
func (o *observability) replicateObserver() replicate.Observer {
	obs := o.metrics.Replicate(o.health.Beat, o.health.Durable)
	obs.LagSeconds = lagGauge{o.metrics.LagSeconds, o.health}
	return obs
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

// streaming records a session that streams.
func (o *observability) streaming(slot string, from cdc.LSN) {
	o.health.Connected(true)
	o.systemd.Status(fmt.Sprintf("streaming slot %s from %s", slot, from))
}

// sessionEnded records a failed session that start will retry after wait.
func (o *observability) sessionEnded(err error, wait time.Duration) {
	o.systemd.Status(fmt.Sprintf("retrying in %s after: %v", wait, err))
	o.health.Failed(err)
	o.health.Waiting(time.Now().Add(wait))
	o.metrics.Reconnects.Inc()
}

// watchSource starts the source health poller and, when configured, the
// heartbeat. They use their own connections (opened per poll through spec,
// so rotated credentials apply) and never stop the stream: a failed poll
// sets source_up to 0 and is logged once per outage.
func (o *observability) watchSource(cfg config.Config, spec postgres.ConnSpec, slot string) {
	every := max(time.Second, min(cfg.Replication.StandbyInterval(), 15*time.Second))
	o.wg.Go(func() {
		p := &sourcePoller{log: o.log, m: o.metrics, spec: spec, slot: slot,
			maxRetained: cfg.Guardrail.MaxRetainedWALBytes}
		defer p.close()
		tick(o.ctx, every, p.poll)
	})
	if hb := cfg.Replication.HeartbeatIntervalSec; hb > 0 {
		o.wg.Go(func() {
			h := &heartbeat{log: o.log, m: o.metrics, spec: spec}
			defer h.close()
			tick(o.ctx, time.Duration(hb)*time.Second, h.beat)
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
