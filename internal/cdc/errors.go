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
	// ErrUsage: the command line or the configuration asks for something
	// that cannot be done (a table the manifest does not hold, a types:
	// override naming no column). Match it with errors.Is; Usage marks one.
	ErrUsage = errors.New("usage or configuration error")
)

// Usage marks err as a usage or configuration error (errors.Is(err,
// ErrUsage)), keeping its message as it is: the message already says what
// to correct. Nil stays nil.
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err}
}

type usageError struct{ err error }

func (e *usageError) Error() string        { return e.err.Error() }
func (e *usageError) Unwrap() error        { return e.err }
func (e *usageError) Is(target error) bool { return target == ErrUsage }
func (e *usageError) Transient() bool      { return false }

// Error is a classified error with an operator hint. It is terminal: its
// class names a condition a new session cannot fix (Transient is false).
type Error struct {
	Class error  // one of the Err* sentinels
	Msg   string // what happened, naming the slot, table, column or key
	Hint  string // what the operator can do about it
	// Cause is the error underneath, when there is one: kept for errors.Is
	// and errors.As, and said after Msg.
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Msg + ": " + e.Cause.Error() + ": " + e.Class.Error()
	}
	return e.Msg + ": " + e.Class.Error()
}

// Unwrap lets errors.Is match the class, and errors.Is and errors.As reach
// the cause.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Class, e.Cause}
	}
	return []error{e.Class}
}

// Transient is false: see Error.
func (e *Error) Transient() bool { return false }

// HintOf returns the first operator hint found in err's chain, or "".
func HintOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Hint
	}
	var h interface{ Hint() string }
	if errors.As(err, &h) {
		return h.Hint()
	}
	return ""
}

// transient is the behaviour an error has when it may say whether a new
// attempt can get past it (in the spirit of pgconn.SafeToRetry).
type transient interface{ Transient() bool }

// IsTransient reports whether a new attempt (a new replication session,
// from the manifest) may get past err: some error in its chain says so
// (Transient() true), and none says it is terminal (Transient() false,
// every *Error). An error that says nothing is terminal: retrying what
// nobody judged retryable would hide a bug behind the retry budget.
func IsTransient(err error) bool {
	says, yes := false, true
	walk(err, func(e error) {
		if t, ok := e.(transient); ok {
			says = true
			yes = yes && t.Transient()
		}
	})
	return says && yes
}

// walk calls fn for err and every error in its chain (both Unwrap forms).
func walk(err error, fn func(error)) {
	for err != nil {
		fn(err)
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e, fn)
			}
			return
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return
		}
	}
}

// NewTransient returns a sentinel error that is transient: a failure a new
// attempt may get past (a sink request that failed after its own retries,
// a silent connection). Compare it with errors.Is.
func NewTransient(msg string) error { return &transientSentinel{msg} }

type transientSentinel struct{ msg string }

func (e *transientSentinel) Error() string   { return e.msg }
func (e *transientSentinel) Transient() bool { return true }

// Transient marks err as transient, keeping it for errors.Is and errors.As:
// an adapter's verdict that a new attempt may get past it (a reset
// connection, a server restarting). Nil stays nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err}
}

type transientError struct{ err error }

func (e *transientError) Error() string   { return e.err.Error() }
func (e *transientError) Unwrap() error   { return e.err }
func (e *transientError) Transient() bool { return true }
