// Package readpath is the read path's vocabulary (design.md §11): a
// resolved point, a query's result, a table's description, the refs
// listing, and the errors callers branch on. The engine (internal/query,
// the one package that imports DuckDB) produces them; the transports (the
// CLI, REST, MCP, server-sent events) consume them and import no DuckDB,
// reaching the engine through ports they define over these types.
package readpath

import (
	"errors"
	"fmt"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

// At is a point of the sink's history, resolved: the manifest version
// that holds it, and the bound inside it.
type At struct {
	// Name is the point as asked ("" for the newest version).
	Name     string
	Manifest *manifest.Manifest
	Bound    mergesql.Bound
}

// Version is the manifest version At reads.
func (a At) Version() uint64 { return a.Manifest.Version }

// Column is one result column: its name and DuckDB's name for its type
// (BIGINT, VARCHAR, DECIMAL(12,3), TIMESTAMP WITH TIME ZONE, INTEGER[], …).
type Column struct {
	Name string
	Type string
}

// Result is one request's answer.
//
// Values in Rows are standard Go types, never the driver's: nil, bool,
// int8…int64, uint8…uint64, float32, float64, string, []byte, time.Time,
// Infinity (a DATE's or TIMESTAMP's ±infinity, at any depth), *big.Int
// (HUGEINT, UHUGEINT, BIGNUM), []any (LIST, ARRAY), map[string]any
// (STRUCT; a UNION as {tag: value}), []MapEntry (MAP, in key order),
// Interval, and string for DECIMAL (exact, with the type's scale: "1.500")
// and UUID (canonical form) at the top level of a row. JSON values arrive
// decoded by encoding/json (the driver's choice); cast to VARCHAR in SQL to
// get the text exactly.
type Result struct {
	Columns []Column
	Rows    [][]any
	// Truncated is set when rows were left out because of MaxRows or
	// MaxBytes; a result that fits exactly is not truncated.
	Truncated bool
	// Bytes is the estimated size of Rows: strings and blobs by length,
	// numbers by width, nested values by their parts (see estimateSize).
	Bytes int64
	// Elapsed is the request's wall time, the connection's wait included.
	Elapsed time.Duration
}

// Interval is DuckDB's INTERVAL, in PostgreSQL's three parts.
type Interval struct {
	Months int32
	Days   int32
	Micros int64
}

// Infinity is the infinity or -infinity of a date or a timestamp, which
// PostgreSQL and DuckDB have and time.Time has not. The engine returns it
// in place of the instant the driver makes of it (the type's reserved
// extreme count read as a date: 294247-01-10 04:00:54.775807 for a
// TIMESTAMP's infinity), so that no caller prints that as a date.
//
// Its text is PostgreSQL's, "infinity" or "-infinity", in every output: the
// read path's (Text, JSONValue, WireValue), fmt's (String) and
// encoding/json's and gob's (MarshalText), so that a caller that knows
// nothing of it still prints it right.
type Infinity struct {
	Negative bool
}

func (i Infinity) String() string {
	if i.Negative {
		return "-infinity"
	}
	return "infinity"
}

// MarshalText returns i.String().
func (i Infinity) MarshalText() ([]byte, error) { return []byte(i.String()), nil }

// UnmarshalText reads "infinity" (or "+infinity") and "-infinity".
func (i *Infinity) UnmarshalText(b []byte) error {
	switch string(b) {
	case "infinity", "+infinity":
		*i = Infinity{}
	case "-infinity":
		*i = Infinity{Negative: true}
	default:
		return fmt.Errorf("infinity: %q is neither infinity nor -infinity", b)
	}
	return nil
}

// MapEntry is one key and value of a MAP.
type MapEntry struct {
	Key   any
	Value any
}

// Table describes one captured table at a point: `pg-cdc query --tables`.
type Table struct {
	Name string `json:"name"` // schema.table
	// View is the name a query reads it by when that is not Name: two
	// tables whose names differ only in case (DuckDB matches names without
	// regard to case) are read by aliases (query.ViewNames).
	View          string `json:"view,omitempty"`
	Rows          int64  `json:"rows"` // live rows of its current state
	SchemaVersion int    `json:"schema_version"`
	Generation    string `json:"generation"`
	// Snapshot is the table's snapshot state: until it is complete, its
	// state is part of the table only.
	Snapshot string `json:"snapshot"`
	// FreshAsOf: the sink holds every transaction the source committed up
	// to this time (the version's newest commit); zero before any flush.
	FreshAsOf time.Time `json:"fresh_as_of"`
}

// RefList is what pg-cdc refs shows: the branches, the newest tags and
// the window of versions the history holds.
type RefList struct {
	Branches map[string]refs.Branch `json:"branches"`
	Tags     []Tag                  `json:"tags"`
	Oldest   manifest.Header        `json:"oldest"`
	Newest   manifest.Header        `json:"newest"`
}

// Tag is one flush's tag: its epoch, which a tag reads whole (the last
// version that has it), and the version the flush wrote.
type Tag struct {
	Name          string    `json:"name"`
	FlushVersion  uint64    `json:"flush_version"`
	Epoch         uint64    `json:"epoch"`
	EndLSN        cdc.LSN   `json:"end_lsn"`
	MaxCommitTime time.Time `json:"max_commit_time,omitzero"`
}

// ErrPoint is the class of an error for a point that names nothing: not a
// branch, a tag of a flush the history holds, nor a point's syntax. A point
// outside the history's window is manifest.ErrOutsideRetention instead.
var ErrPoint = errors.New("unknown point")

// Errors callers branch on. A request's error matches exactly one of
// ErrRefused (the request broke a rule: 400), ErrInvalid (DuckDB rejected
// the SQL: parse, bind, catalog, types, arguments: 400) and ErrLimit (the
// request ran past a limit: timeout, memory); any other error is the
// engine's (500). A caller's own cancellation comes back as its context
// error.
var (
	ErrRefused  = errors.New("query refused")
	ErrInvalid  = errors.New("invalid query")
	ErrLimit    = errors.New("query limit exceeded")
	ErrClosed   = errors.New("query engine closed")
	ErrNoEngine = errors.New("this build of pg-cdc has no query engine (built with -tags nodb); " +
		"use the full build: a normal `go build` with cgo (CGO_ENABLED=1), which links DuckDB")
)

// The rules a RefusedError names.
const (
	RuleOneStatement = "only one statement"
	RuleOnlyQueries  = "only queries"
	RuleSandbox      = "only the data directories"
	// RuleNotAllowed: the statement names something outside what a
	// request may name (the views, ordinary functions); Detail names it.
	RuleNotAllowed = "only the views and ordinary functions"
)

// RefusedError is a request the engine would not run, or that DuckDB's
// sandbox stopped. Rule is one of the Rule constants; Detail says what was
// found ("this is a COPY", DuckDB's permission message).
type RefusedError struct {
	Rule   string
	Detail string
	// Err is DuckDB's error when the sandbox refused, else nil.
	Err error
}

func (e *RefusedError) Error() string {
	if e.Detail == "" {
		return "query refused: " + e.Rule
	}
	return "query refused: " + e.Rule + ": " + e.Detail
}

func (e *RefusedError) Is(target error) bool { return target == ErrRefused }
func (e *RefusedError) Unwrap() error        { return e.Err }

// The limits a LimitError names.
const (
	LimitTimeout = "timeout"
	LimitMemory  = "memory"
)

// LimitError is a request stopped by a limit: LimitTimeout (interrupted at
// Limits.Timeout) or LimitMemory (memory_limit, or the spill cap).
type LimitError struct {
	Limit string
	// Value is the limit in force, for the message ("2s", "1.0 GiB").
	Value string
	Err   error
}

func (e *LimitError) Error() string {
	msg := "query stopped at its " + e.Limit + " limit"
	if e.Value != "" {
		msg += " (" + e.Value + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *LimitError) Is(target error) bool { return target == ErrLimit }
func (e *LimitError) Unwrap() error        { return e.Err }

// ErrCollected is the class of a query that failed because garbage
// collection deleted files of its version (CollectedError). Asking again
// resolves the point anew: inside history.retention it is read again,
// outside it is an error naming the window.
var ErrCollected = errors.New("files of the version were collected")

// CollectedError names the version and one of its files that is gone.
type CollectedError struct {
	Version uint64
	File    string
	Err     error
}

func (e *CollectedError) Error() string {
	return fmt.Sprintf("version %d: its file %s was collected while the query ran (the version left history.retention); ask again: %v", e.Version, e.File, e.Err)
}

func (e *CollectedError) Is(target error) bool { return target == ErrCollected }
func (e *CollectedError) Unwrap() error        { return e.Err }
