package replicate

import (
	"errors"
	"testing"
	"time"
)

// TestSilentConnectionEndsTheSession: a connection on which nothing
// arrives, not even the reply to a ping, ends the session with ErrSilent
// (start then reconnects); the ping was sent half-way.
func TestSilentConnectionEndsTheSession(t *testing.T) {
	h := start(t, options{receiveTimeout: 300 * time.Millisecond, standby: time.Hour})
	started := time.Now()
	err := h.wait()
	if !errors.Is(err, ErrSilent) {
		t.Fatalf("Run = %v, want ErrSilent", err)
	}
	if took := time.Since(started); took < 300*time.Millisecond {
		t.Errorf("gave up after %s, before the timeout", took)
	}
	pinged := false
	for _, s := range h.statuses() {
		pinged = pinged || s.reply
	}
	if !pinged {
		t.Error("no reply was requested before giving up")
	}
}

// TestAnsweredPingsKeepTheSession: an idle but live server answers the
// ping, so an idle stream is never mistaken for a dead one.
func TestAnsweredPingsKeepTheSession(t *testing.T) {
	h := start(t, options{receiveTimeout: 200 * time.Millisecond, standby: time.Hour, answerPings: true})
	time.Sleep(time.Second)
	if !h.running() {
		t.Fatalf("Run ended on an idle, answering server: %v", h.wait())
	}
	pings := 0
	for _, s := range h.statuses() {
		if s.reply {
			pings++
		}
	}
	if pings < 3 {
		t.Errorf("%d pings in 1 s with a 200 ms timeout; want one per half-timeout of silence", pings)
	}
}
