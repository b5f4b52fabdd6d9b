package flush

import (
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Limits are the flush triggers; whichever is reached first cuts the epoch.
type Limits struct {
	Interval time.Duration
	MaxRows  int64
	MaxBytes int64
}

// Pending summarises what an epoch holds.
type Pending struct {
	Txns  int
	Rows  int64
	Bytes int64
	// Since is when the epoch received its first committed transaction.
	Since time.Time
}

// Reason names why an epoch is due.
type Reason string

const (
	NotDue      Reason = ""
	DueInterval Reason = "interval"
	DueRows     Reason = "rows"
	DueBytes    Reason = "bytes"
	// DueCaughtUp: the stream has reached the server's position at start-up
	// (the caller decides; see replicate.Config.CatchUp).
	DueCaughtUp Reason = "caught-up"
)

// Due reports whether an epoch holding p should be flushed at now. An empty
// epoch is never due. The caller asks only at a transaction boundary.
func Due(l Limits, p Pending, now time.Time) Reason {
	switch {
	case p.Txns == 0:
		return NotDue
	case l.MaxRows > 0 && p.Rows >= l.MaxRows:
		return DueRows
	case l.MaxBytes > 0 && p.Bytes >= l.MaxBytes:
		return DueBytes
	case !now.Before(p.Since.Add(l.Interval)):
		return DueInterval
	}
	return NotDue
}

// Deadline is when an epoch holding p becomes due by interval, or the zero
// time for an empty epoch.
func Deadline(l Limits, p Pending) time.Time {
	if p.Txns == 0 {
		return time.Time{}
	}
	return p.Since.Add(l.Interval)
}

// IdleState is what the idle-advance rule needs to know.
type IdleState struct {
	// Durable is the end LSN the manifest holds.
	Durable cdc.LSN
	// ServerEnd is the WAL position the server last reported in a keepalive:
	// every transaction that committed before it has been sent already.
	ServerEnd cdc.LSN
	// Quiet is true when nothing is buffered, spilled or in flight: no
	// transaction is open, the epoch is empty and no streamed transaction is
	// pending.
	Quiet bool
}

// IdleAdvance returns the position an idle slot may be advanced to, and
// whether there is one (design.md §1 "Idle advance"). The caller records it in
// the manifest before confirming it, so the slot is never confirmed past the
// manifest's end LSN and a restart can tell idle advance from a slot that
// another consumer moved.
func IdleAdvance(s IdleState) (cdc.LSN, bool) {
	if !s.Quiet || s.ServerEnd <= s.Durable {
		return 0, false
	}
	return s.ServerEnd, true
}
