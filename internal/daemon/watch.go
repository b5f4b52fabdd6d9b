package daemon

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/metrics"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/runs"
)

// sourcePollTimeout bounds one source health query (connection included),
// so a saturated source leaves the gauges stale and source_up at 0 instead
// of freezing the poller.
const sourcePollTimeout = 5 * time.Second

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

// sourceConn is the poller's and the heartbeat's own connection to the
// source, opened when needed (through spec, so rotated credentials apply)
// and dropped after a failure.
type sourceConn struct {
	spec postgres.ConnSpec
	db   *postgres.DB
}

func (c *sourceConn) get(ctx context.Context) (*postgres.DB, error) {
	if c.db == nil {
		db, err := postgres.Connect(ctx, c.spec)
		if err != nil {
			return nil, err
		}
		c.db = db
	}
	return c.db, nil
}

func (c *sourceConn) drop() {
	if c.db != nil {
		c.db.Close()
		c.db = nil
	}
}

// sourcePoller reads the slot and server gauges, and forecasts when the
// slot would be invalidated at the current WAL rate. A failed poll sets
// source_up to 0 and is logged once per outage; it never stops the stream.
type sourcePoller struct {
	log         *slog.Logger
	m           *metrics.Metrics
	conn        sourceConn
	slot        string
	maxRetained int64
	event       func(runs.Event) // the run's events: guardrail crossings

	down     bool // the last poll failed (logged once per outage)
	exceeded bool // the guardrail is crossed (logged once per crossing)
	lastLSN  cdc.LSN
	lastAt   time.Time
	rate     float64 // WAL bytes per second, smoothed
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
		p.conn.drop()
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
	p.walRate(h)
	p.guardrail(h)
}

func (p *sourcePoller) read(ctx context.Context) (postgres.SourceHealth, error) {
	db, err := p.conn.get(ctx)
	if err != nil {
		return postgres.SourceHealth{}, err
	}
	return db.SourceHealth(ctx, p.slot)
}

// walRate smooths the source's WAL rate and forecasts the invalidation.
func (p *sourcePoller) walRate(h postgres.SourceHealth) {
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
	p.m.SlotInvalidationETA.Set(capture.InvalidationETA(h.SafeWALSize, p.rate))
}

// guardrail warns, once per crossing, when the slot retains more WAL than
// guardrail.max_retained_wal_bytes.
func (p *sourcePoller) guardrail(h postgres.SourceHealth) {
	if p.maxRetained <= 0 {
		return
	}
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

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// heartbeat emits a control.Heartbeat on the source now and then
// (replication.heartbeat_interval_sec): its position moves an idle slot.
type heartbeat struct {
	log  *slog.Logger
	m    *metrics.Metrics
	conn sourceConn
	down bool
}

func (h *heartbeat) beat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, sourcePollTimeout)
	defer cancel()
	err := func() error {
		db, err := h.conn.get(ctx)
		if err != nil {
			return err
		}
		prefix, content, err := control.Encode(control.Heartbeat{At: time.Now().UTC().Format(time.RFC3339Nano)})
		if err != nil {
			return err
		}
		_, err = db.EmitMarker(ctx, prefix, content)
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
		h.conn.drop()
		return
	}
	h.down = false
	h.m.Heartbeats.WithLabelValues("ok").Inc()
}
