//go:build !nodb

package query

import (
	"database/sql"
	"encoding/gob"
	"errors"
	"math/big"
	"time"
)

// The worker protocol (worker.go, workerproc.go): over a pipe pair,
// messages framed by a 4-byte length, each one gob value encoded on its
// own (a fresh encoder per message costs a few hundred bytes of type
// descriptors, and a value that fails to encode leaves the stream whole).
// The parent sends workerRequests, the first a reqOpen; the worker answers
// each with a workerResponse of the same ID, in any order (queries run
// concurrently). Both ends are the same executable (/proc/self/exe), so
// the protocol needs no negotiation.

// The kinds of workerRequest.
const (
	reqOpen   = "open"   // Options and Setup: open the engine (once, first)
	reqQuery  = "query"  // SQL and Args
	reqCancel = "cancel" // ID names the query to interrupt
	reqRaw    = "raw"    // tests only (rawForTest): SQL run with no check
)

type workerRequest struct {
	ID    uint64
	Kind  string
	Open  *workerOpen
	SQL   string
	Args  []wireArg
	Limit Limits
}

// workerOpen is what the engine is opened with inside the worker.
type workerOpen struct {
	Isolation string
	DataDirs  []string
	TempDir   string
	Limits    Limits
	Setup     []string
}

// wireArg is one query parameter; sql.NamedArg does not cross gob as an
// interface (its fields are fine, the type is not registered by callers).
type wireArg struct {
	Name  string
	Value any
}

type workerResponse struct {
	ID     uint64
	Result *Result
	Err    *wireError
	// Answering reqOpen: the engine's limits and how the worker is
	// confined.
	Limits      Limits
	Confinement Confinement
}

// wireError carries an error across the pipe with its class, so that the
// parent's callers branch on it as on the engine's own (errors.Is/As).
type wireError struct {
	Kind    string // refused, limit, invalid, closed, sandbox, canceled, deadline, other
	Rule    string // RefusedError.Rule, SandboxError.Setting
	Detail  string // RefusedError.Detail, SandboxError.Got
	Limit   string // LimitError.Limit, SandboxError.Want
	Value   string // LimitError.Value
	Message string // the whole message, or the wrapped error's
}

// wireTypes registers the concrete types a Result's values and a query's
// arguments hold (readpath.Result): gob sends an interface's value only
// for a registered type (the basic types it registers itself). A variable,
// not an init: variables are set before any init runs, and the worker's
// init (workerproc.go) needs them.
var wireTypes = registerWireTypes()

func registerWireTypes() bool {
	gob.Register(time.Time{})
	gob.Register(time.Duration(0))
	gob.Register(&big.Int{})
	gob.Register([]any{})
	gob.Register(map[string]any{})
	gob.Register(Interval{})
	gob.Register(Infinity{})
	gob.Register([]MapEntry{})
	return true
}

// encodeError turns an engine error into its wire form.
func encodeError(err error) *wireError {
	if err == nil {
		return nil
	}
	var re *RefusedError
	var le *LimitError
	var se *SandboxError
	w := &wireError{Kind: "other", Message: err.Error()}
	switch {
	case errors.As(err, &re):
		w.Kind, w.Rule, w.Detail = "refused", re.Rule, re.Detail
		w.Message = ""
		if re.Err != nil {
			w.Message = re.Err.Error()
		}
	case errors.As(err, &le):
		w.Kind, w.Limit, w.Value = "limit", le.Limit, le.Value
		w.Message = ""
		if le.Err != nil {
			w.Message = le.Err.Error()
		}
	case errors.As(err, &se):
		w.Kind, w.Rule, w.Detail, w.Limit = "sandbox", se.Setting, se.Got, se.Want
	case errors.Is(err, ErrInvalid):
		w.Kind = "invalid"
	case errors.Is(err, ErrClosed):
		w.Kind = "closed"
	}
	return w
}

// decode rebuilds the error encodeError sent: the same message, the same
// class.
func (w *wireError) decode() error {
	if w == nil {
		return nil
	}
	var inner error
	if w.Message != "" {
		inner = errors.New(w.Message)
	}
	switch w.Kind {
	case "refused":
		return &RefusedError{Rule: w.Rule, Detail: w.Detail, Err: inner}
	case "limit":
		return &LimitError{Limit: w.Limit, Value: w.Value, Err: inner}
	case "sandbox":
		return &SandboxError{Setting: w.Rule, Got: w.Detail, Want: w.Limit}
	case "invalid":
		return &classedError{msg: w.Message, class: ErrInvalid}
	case "closed":
		return &classedError{msg: w.Message, class: ErrClosed}
	}
	return errors.New(w.Message)
}

// classedError is an error of a class (errors.Is) with the message it had
// in the worker.
type classedError struct {
	msg   string
	class error
}

func (e *classedError) Error() string        { return e.msg }
func (e *classedError) Is(target error) bool { return target == e.class }

// encodeArgs turns a query's arguments into their wire form.
func encodeArgs(args []any) []wireArg {
	out := make([]wireArg, len(args))
	for i, a := range args {
		if na, ok := a.(sql.NamedArg); ok {
			out[i] = wireArg{Name: na.Name, Value: na.Value}
			continue
		}
		out[i] = wireArg{Value: a}
	}
	return out
}

// decodeArgs is encodeArgs undone.
func decodeArgs(in []wireArg) []any {
	out := make([]any, len(in))
	for i, a := range in {
		if a.Name != "" {
			out[i] = sql.Named(a.Name, a.Value)
			continue
		}
		out[i] = a.Value
	}
	return out
}
