package health

import (
	"errors"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time             { return c.t }
func (c *clock) advance(d time.Duration)    { c.t = c.t.Add(d) }
func newTracker(c *clock) *Tracker          { return New(c.now, time.Minute, 30*time.Second) }
func status(t *Tracker) (alive, ready bool) { s := t.Status(); return s.Alive, s.Ready }

func TestLivenessFollowsTheLoop(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	h := newTracker(c)
	if alive, _ := status(h); !alive {
		t.Fatal("a fresh tracker is not alive")
	}
	c.advance(59 * time.Second)
	h.Beat()
	c.advance(59 * time.Second)
	if alive, _ := status(h); !alive {
		t.Fatal("not alive 59 s after a beat")
	}
	c.advance(2 * time.Second)
	s := h.Status()
	if s.Alive || !strings.Contains(s.Reason, "not turned") {
		t.Fatalf("alive 61 s after the last beat: %+v", s)
	}
}

func TestRetryWaitIsAlive(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	h := newTracker(c)
	h.Connected(true)
	h.Connected(false)
	h.Failed(errors.New("connection refused"))
	h.Waiting(c.t.Add(5 * time.Minute)) // a long backoff
	c.advance(5*time.Minute + 30*time.Second)
	s := h.Status()
	if !s.Alive {
		t.Fatalf("not alive during a planned retry wait: %+v", s)
	}
	if s.Ready || !strings.Contains(s.Reason, "connection refused") {
		t.Fatalf("ready while no session streams, or the reason hides the error: %+v", s)
	}
	c.advance(time.Minute)
	if alive, _ := status(h); alive {
		t.Fatal("still alive a timeout after the wait ended without a beat")
	}
}

func TestReadinessNeedsASessionAndBoundedLag(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	h := newTracker(c)
	if _, ready := status(h); ready {
		t.Fatal("ready before any session")
	}
	h.Connected(true)
	if _, ready := status(h); !ready {
		t.Fatalf("not ready while streaming: %+v", h.Status())
	}
	h.Lag(31 * time.Second)
	if s := h.Status(); s.Ready || !strings.Contains(s.Reason, "lag") {
		t.Fatalf("ready with lag above the bound: %+v", s)
	}
	h.Lag(0)
	if _, ready := status(h); !ready {
		t.Fatal("not ready once lag is back")
	}
	if s := h.Status(); s.Sessions != 1 {
		t.Fatalf("sessions = %d", s.Sessions)
	}
}
