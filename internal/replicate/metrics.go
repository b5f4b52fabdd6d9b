package replicate

import (
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Gauge and Counter are the instruments the service updates. Prometheus'
// gauges and counters satisfy them; the service does not import a metrics
// library.
type (
	Gauge   interface{ Set(float64) }
	Counter interface{ Add(float64) }
)

// Observer receives what the service reports about itself. Every field may be
// nil. It is owned by the caller and outlives sessions, so counters keep
// counting across reconnects.
type Observer struct {
	// Positions: the last commit received, the manifest's end LSN, and the
	// position last sent to PostgreSQL as flushed.
	ReceivedLSN, DurableLSN, ConfirmedLSN Gauge
	// LagBytes is the server's WAL end (from keepalives) minus the durable
	// LSN; LagSeconds is the age of the oldest received commit that is not
	// yet durable (0 when everything received is durable).
	LagBytes, LagSeconds Gauge
	// Events returns the counter of rows of one table and operation. It is
	// called once per table and op per session, never per row.
	Events func(table cdc.TableID, op cdc.Op) Counter
	// Flushed is called after each durable flush.
	Flushed func(f FlushStats)
	// Buffer: rows and bytes in the open epoch, spilled bytes of streamed
	// transactions.
	BufferEvents, BufferBytes, SpilledBytes Gauge
	// Stalled is called with the time the receive loop spent in a flush
	// while the server had more WAL to send (reception paused: backpressure
	// onto the walsender).
	Stalled func(d time.Duration)
	// Beat is called on every turn of the loop (at least every 200 ms):
	// liveness.
	Beat func()
	// Durable is called whenever the durable LSN moves (a flush or an idle
	// advance), with the time: readiness.
	Durable func(lsn cdc.LSN, at time.Time)
	// SchemaChanged is called once per new schema version of a table, when
	// the flush that records it in the manifest is durable.
	SchemaChanged func(table cdc.TableID)
}

// FlushStats describes one durable flush.
type FlushStats struct {
	Rows, Bytes, Adjusted int64
	Duration              time.Duration
	// Epoch is the new epoch and EndLSN the manifest's new end LSN.
	Epoch  uint64
	EndLSN cdc.LSN
	// Txns and Tables count the transactions and the tables written;
	// Reason is what triggered the flush (flush.Reason).
	Txns, Tables int
	Reason       string
}

type nopGauge struct{}

func (nopGauge) Set(float64) {}

type nopCounter struct{}

func (nopCounter) Add(float64) {}

// withDefaults fills every nil field with a no-op, so the hot path never
// tests for nil.
func (o Observer) withDefaults() Observer {
	for _, g := range []*Gauge{&o.ReceivedLSN, &o.DurableLSN, &o.ConfirmedLSN, &o.LagBytes, &o.LagSeconds,
		&o.BufferEvents, &o.BufferBytes, &o.SpilledBytes} {
		if *g == nil {
			*g = nopGauge{}
		}
	}
	if o.Events == nil {
		o.Events = func(cdc.TableID, cdc.Op) Counter { return nopCounter{} }
	}
	if o.Flushed == nil {
		o.Flushed = func(FlushStats) {}
	}
	if o.SchemaChanged == nil {
		o.SchemaChanged = func(cdc.TableID) {}
	}
	if o.Stalled == nil {
		o.Stalled = func(time.Duration) {}
	}
	if o.Beat == nil {
		o.Beat = func() {}
	}
	if o.Durable == nil {
		o.Durable = func(cdc.LSN, time.Time) {}
	}
	return o
}

// eventKey names one events counter.
type eventKey struct {
	table *cdc.Table
	op    cdc.Op
}

func (s *Service) countEvent(t *cdc.Table, op cdc.Op) {
	k := eventKey{t, op}
	c, ok := s.events[k]
	if !ok {
		c = s.obs.Events(t.ID, op)
		s.events[k] = c
	}
	c.Add(1)
}

// report updates the gauges that describe the loop's state; it runs once
// per turn of the loop, so it must stay cheap.
func (s *Service) report() {
	o := &s.obs
	o.Beat()
	o.DurableLSN.Set(float64(s.durable))
	o.ReceivedLSN.Set(float64(s.receivedLSN))
	o.ConfirmedLSN.Set(float64(s.confirmed))
	head := max(s.serverEnd, s.receivedLSN)
	o.LagBytes.Set(float64(head - min(head, s.durable)))
	lag := 0.0 // nothing received waits to become durable
	if !s.oldestPending.IsZero() {
		// Commit times are the source's clock: a skew shows as lag, never
		// below zero.
		lag = max(0, s.now().Sub(s.oldestPending).Seconds())
	}
	o.LagSeconds.Set(lag)
	if s.epoch != nil {
		p := s.epoch.Pending()
		o.BufferEvents.Set(float64(p.Rows))
		o.BufferBytes.Set(float64(p.Bytes))
	} else {
		o.BufferEvents.Set(0)
		o.BufferBytes.Set(0)
	}
	o.SpilledBytes.Set(float64(s.asm.SpilledBytes()))
}
