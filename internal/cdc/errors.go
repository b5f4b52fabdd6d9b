package cdc

import "errors"

// Error classes that callers branch on. Each terminal class maps to its own
// documented exit code (docs/exit-codes.md); a supervisor must not restart the
// process blindly after one of them.
var (
	// ErrSlotLost: the replication slot is missing or invalidated, so changes
	// needed to continue are gone.
	ErrSlotLost = errors.New("replication slot lost")
	// ErrSlotAhead: the slot is confirmed past the manifest's end LSN; the
	// changes in between were consumed elsewhere.
	ErrSlotAhead = errors.New("replication slot is ahead of the manifest")
	// ErrUpstreamMismatch: the database behind the address is not the one the
	// manifest was built from.
	ErrUpstreamMismatch = errors.New("upstream identity mismatch")
	// ErrCASBreaker: manifest conflicts came too fast: two writers on one sink.
	ErrCASBreaker = errors.New("manifest conflict breaker tripped")
	// ErrSinkUnsafe: the sink does not enforce conditional writes.
	ErrSinkUnsafe = errors.New("sink does not enforce conditional writes")
	// ErrSinkLocked: another pg-cdc process holds the sink's writer lock.
	ErrSinkLocked = errors.New("sink is locked by another writer")
	// ErrSchemaChanged: a relation's columns differ from the manifest and the
	// change cannot be followed.
	ErrSchemaChanged = errors.New("unsupported schema change")
	// ErrData: a value cannot be represented as its column's type.
	ErrData = errors.New("value cannot be represented")
	// ErrRetriesExhausted: transient failures outlasted the retry budget. A
	// supervisor may restart the process.
	ErrRetriesExhausted = errors.New("retries exhausted")
	// ErrNotInitialized: there is no manifest yet; run init first.
	ErrNotInitialized = errors.New("not initialized")
	// ErrDifferences: pg-cdc verify found rows where the sink and the source
	// differ. Not a failure of the command: its finding.
	ErrDifferences = errors.New("sink and source differ")
)

// Error is a classified error with an operator hint.
type Error struct {
	Class error  // one of the Err* sentinels
	Msg   string // what happened, naming the slot, table, column or key
	Hint  string // what the operator can do about it
}

func (e *Error) Error() string { return e.Msg + ": " + e.Class.Error() }

// Unwrap lets errors.Is match the class.
func (e *Error) Unwrap() error { return e.Class }

// HintOf returns the first operator hint found in err's chain, or "".
func HintOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Hint
	}
	return ""
}
