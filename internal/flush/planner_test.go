package flush

import (
	"testing"
	"time"
)

func TestDue(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	l := Limits{Interval: 10 * time.Second, MaxRows: 100, MaxBytes: 1000}
	for _, tc := range []struct {
		name string
		p    Pending
		now  time.Time
		want Reason
	}{
		{"empty epoch is never due", Pending{}, t0.Add(time.Hour), NotDue},
		{"young epoch", Pending{Txns: 1, Rows: 1, Bytes: 10, Since: t0}, t0.Add(9 * time.Second), NotDue},
		{"interval", Pending{Txns: 1, Rows: 1, Bytes: 10, Since: t0}, t0.Add(10 * time.Second), DueInterval},
		{"rows", Pending{Txns: 3, Rows: 100, Bytes: 10, Since: t0}, t0, DueRows},
		{"bytes", Pending{Txns: 1, Rows: 1, Bytes: 1000, Since: t0}, t0, DueBytes},
		{"transaction with no rows still flushes on interval", Pending{Txns: 1, Since: t0}, t0.Add(11 * time.Second), DueInterval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Due(l, tc.p, tc.now); got != tc.want {
				t.Fatalf("Due = %q, want %q", got, tc.want)
			}
		})
	}
	if d := Deadline(l, Pending{}); !d.IsZero() {
		t.Errorf("deadline of an empty epoch: %v", d)
	}
	if d := Deadline(l, Pending{Txns: 1, Since: t0}); !d.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("deadline: %v", d)
	}
}

func TestIdleAdvance(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    IdleState
		want bool
	}{
		{"quiet and behind", IdleState{Durable: 100, ServerEnd: 200, Quiet: true}, true},
		{"something buffered", IdleState{Durable: 100, ServerEnd: 200, Quiet: false}, false},
		{"already there", IdleState{Durable: 200, ServerEnd: 200, Quiet: true}, false},
		{"server end behind (older keepalive)", IdleState{Durable: 300, ServerEnd: 200, Quiet: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pos, ok := IdleAdvance(tc.s)
			if ok != tc.want || (ok && pos != tc.s.ServerEnd) {
				t.Fatalf("IdleAdvance = %v, %v", pos, ok)
			}
		})
	}
}
