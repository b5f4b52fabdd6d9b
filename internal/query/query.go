package query

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Options configure an Engine. DataDirs and TempDir are required.
type Options struct {
	// DataDirs are the only directories SQL may read: the sink's files, a
	// local cache of object-store files. Each must exist; symlinks in the
	// given paths are resolved once, at Open, and the resolved paths are
	// what DuckDB allows. The root directory is refused.
	DataDirs []string
	// TempDir holds the engine's private directories (DuckDB's spill
	// files, the sandbox canary). It is created 0700 if missing and must
	// not be readable or writable by group or others, nor lie inside a
	// data dir or contain one. Each Engine works in its own subdirectory,
	// removed by Close, so engines opened one after another (a new manifest
	// version) may share it.
	TempDir string
	Limits  Limits
}

// Limits bound what one engine and one request may use. A zero field takes
// its default (DefaultLimits); a negative one is an error.
type Limits struct {
	// MemoryBytes is DuckDB's memory_limit for the whole database (all
	// concurrent requests together).
	MemoryBytes int64
	// SpillBytes is max_temp_directory_size: how much may spill to the
	// TempDir when memory runs short.
	SpillBytes int64
	// Threads is DuckDB's worker pool, shared by concurrent requests.
	Threads int
	// Timeout is the wall-clock budget of one request, from Query's call
	// to its last row.
	Timeout time.Duration
	// MaxRows and MaxBytes cap one result; past either the result is cut
	// and Truncated is set. Bytes are estimated (see Result.Bytes).
	MaxRows  int
	MaxBytes int64
}

// DefaultLimits are the limits of a zero Limits.
var DefaultLimits = Limits{
	MemoryBytes: 1 << 30,
	SpillBytes:  4 << 30,
	Threads:     min(4, runtime.NumCPU()),
	Timeout:     30 * time.Second,
	MaxRows:     10_000,
	MaxBytes:    32 << 20,
}

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
// *big.Int (HUGEINT, UHUGEINT, BIGNUM), []any (LIST, ARRAY), map[string]any
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

// MapEntry is one key and value of a MAP.
type MapEntry struct {
	Key   any
	Value any
}

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

// SandboxError is an Open that would not serve: a sandbox setting read back
// other than it was set, or a canary read that DuckDB allowed.
type SandboxError struct {
	Setting string
	Got     string
	Want    string
}

func (e *SandboxError) Error() string {
	return fmt.Sprintf("sandbox not in force: %s is %q, want %q; refusing to serve", e.Setting, e.Got, e.Want)
}

// withDefaults fills zero limits and refuses negative ones.
func (l Limits) withDefaults() (Limits, error) {
	if l.MemoryBytes < 0 || l.SpillBytes < 0 || l.Threads < 0 || l.Timeout < 0 || l.MaxRows < 0 || l.MaxBytes < 0 {
		return l, fmt.Errorf("query limits: negative value in %+v", l)
	}
	d := DefaultLimits
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.SpillBytes == 0 {
		l.SpillBytes = d.SpillBytes
	}
	if l.Threads == 0 {
		l.Threads = d.Threads
	}
	if l.Timeout == 0 {
		l.Timeout = d.Timeout
	}
	if l.MaxRows == 0 {
		l.MaxRows = d.MaxRows
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = d.MaxBytes
	}
	return l, nil
}

// paths are the checked, resolved directories of an Options.
type paths struct {
	data []string // absolute, symlinks resolved, no trailing slash
	temp string   // the shared TempDir, resolved
}

// resolvePaths checks o's directories and resolves them. It creates TempDir
// (0700) when missing and nothing else.
func resolvePaths(o Options) (paths, error) {
	var p paths
	if len(o.DataDirs) == 0 {
		return p, errors.New("query options: no data directories")
	}
	for _, d := range o.DataDirs {
		r, err := resolveDir(d)
		if err != nil {
			return p, fmt.Errorf("query options: data directory: %w", err)
		}
		if r == "/" {
			return p, fmt.Errorf("query options: data directory %s is the root directory: it would allow every file", d)
		}
		p.data = append(p.data, r)
	}
	if o.TempDir == "" {
		return p, errors.New("query options: no temp directory")
	}
	abs, err := filepath.Abs(o.TempDir)
	if err != nil {
		return p, fmt.Errorf("query options: temp directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return p, fmt.Errorf("query options: temp directory: %w", err)
	}
	if p.temp, err = resolveDir(abs); err != nil {
		return p, fmt.Errorf("query options: temp directory: %w", err)
	}
	fi, err := os.Stat(p.temp)
	if err != nil {
		return p, fmt.Errorf("query options: temp directory: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return p, fmt.Errorf("query options: temp directory %s has mode %v; it must be private (chmod 0700)", p.temp, fi.Mode().Perm())
	}
	for _, d := range p.data {
		if within(p.temp, d) || within(d, p.temp) {
			return p, fmt.Errorf("query options: temp directory %s and data directory %s overlap; the temp directory must lie outside the data", p.temp, d)
		}
	}
	return p, nil
}

func resolveDir(d string) (string, error) {
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", err
	}
	r, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(r)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", d)
	}
	return r, nil
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
