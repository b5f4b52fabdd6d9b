// Package health decides whether the streamer is alive and ready, from
// signals the loops send it. It is pure: the clock is injected and it starts
// nothing.
//
// Alive means the loop is turning: the replication loop beats on every turn
// (at least every 200 ms), and the retry loop announces how long it will
// wait. A source outage that the retry loop is riding out is alive; a loop
// stuck in a call that never returns is not. Liveness must not flap with the
// source, or a supervisor would restart a healthy process into a storm.
//
// Ready means the daemon is doing its job now: a replication session is
// streaming and the oldest received change that is not yet durable is
// younger than a bound.
package health

import (
	"sync"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Tracker holds the signals. Its methods are safe for concurrent use.
type Tracker struct {
	now         func() time.Time
	liveTimeout time.Duration
	maxLag      time.Duration

	mu        sync.Mutex
	lastBeat  time.Time
	waitUntil time.Time
	connected bool
	lag       time.Duration
	durable   cdc.LSN
	durableAt time.Time
	lastErr   string
	lastErrAt time.Time
	sessions  int
	startedAt time.Time
	upSince   time.Time
}

// New returns a tracker. liveTimeout is how long the loop may go without a
// beat before it counts as stuck; maxLag is the readiness bound on lag.
func New(now func() time.Time, liveTimeout, maxLag time.Duration) *Tracker {
	t := now()
	return &Tracker{now: now, liveTimeout: liveTimeout, maxLag: maxLag, lastBeat: t, startedAt: t}
}

// Beat says the loop turned.
func (t *Tracker) Beat() {
	t.mu.Lock()
	t.lastBeat = t.now()
	t.mu.Unlock()
}

// Waiting says the loop is about to wait until the given time on purpose
// (a retry backoff): alive until then, plus the usual timeout.
func (t *Tracker) Waiting(until time.Time) {
	t.mu.Lock()
	t.lastBeat = t.now()
	t.waitUntil = until
	t.mu.Unlock()
}

// Connected reports whether a replication session is streaming.
func (t *Tracker) Connected(up bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastBeat = t.now()
	if up && !t.connected {
		t.sessions++
		t.upSince = t.now()
	}
	t.connected = up
	if !up {
		t.lag = 0
	}
}

// Lag records the current replication lag in seconds.
func (t *Tracker) Lag(d time.Duration) {
	t.mu.Lock()
	t.lag = d
	t.mu.Unlock()
}

// Durable records a new durable LSN.
func (t *Tracker) Durable(lsn cdc.LSN, at time.Time) {
	t.mu.Lock()
	if lsn > t.durable || t.durableAt.IsZero() {
		t.durable, t.durableAt = lsn, at
	}
	t.mu.Unlock()
}

// Failed records the error a session ended with.
func (t *Tracker) Failed(err error) {
	if err == nil {
		return
	}
	t.mu.Lock()
	t.lastErr, t.lastErrAt = err.Error(), t.now()
	t.mu.Unlock()
}

// Status is a point-in-time view, for /readyz and run artifacts.
type Status struct {
	Alive      bool      `json:"alive"`
	Ready      bool      `json:"ready"`
	Reason     string    `json:"reason,omitempty"` // why not ready (or not alive)
	Connected  bool      `json:"connected"`
	UpSince    time.Time `json:"connected_since,omitzero"` // start of the streaming session
	StartedAt  time.Time `json:"started_at"`
	LagSeconds float64   `json:"lag_seconds"`
	DurableLSN string    `json:"durable_lsn,omitempty"`
	DurableAt  time.Time `json:"durable_at,omitzero"`
	Sessions   int       `json:"sessions"`
	LastError  string    `json:"last_error,omitempty"`
	LastErrAt  time.Time `json:"last_error_at,omitzero"`
	LastBeat   time.Time `json:"last_beat"`
}

// Status evaluates liveness and readiness now.
func (t *Tracker) Status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	s := Status{
		Connected: t.connected, LagSeconds: t.lag.Seconds(), DurableAt: t.durableAt,
		Sessions: t.sessions, LastError: t.lastErr, LastErrAt: t.lastErrAt, LastBeat: t.lastBeat,
		StartedAt: t.startedAt,
	}
	if t.connected {
		s.UpSince = t.upSince
	}
	if t.durable != 0 {
		s.DurableLSN = t.durable.String()
	}
	deadline := t.lastBeat.Add(t.liveTimeout)
	if w := t.waitUntil.Add(t.liveTimeout); w.After(deadline) {
		deadline = w
	}
	s.Alive = now.Before(deadline)
	switch {
	case !s.Alive:
		s.Reason = "the replication loop has not turned since " + t.lastBeat.UTC().Format(time.RFC3339)
	case !t.connected:
		s.Reason = "no replication session is streaming"
		if t.lastErr != "" {
			s.Reason += ": " + t.lastErr
		}
	case t.lag > t.maxLag:
		s.Reason = "replication lag " + t.lag.Round(time.Second).String() + " exceeds " + t.maxLag.String()
	default:
		s.Ready = true
	}
	return s
}
