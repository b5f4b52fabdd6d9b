package query

import (
	"errors"
	"fmt"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
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
	// Isolation is where DuckDB runs: IsolationLandlock ("", the
	// default), IsolationProcess or IsolationNone (isolation.go).
	Isolation string
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

// The result types are the read path's vocabulary (internal/readpath),
// shared with the transports, which import no DuckDB.
type (
	Column   = readpath.Column
	Result   = readpath.Result
	Interval = readpath.Interval
	Infinity = readpath.Infinity
	MapEntry = readpath.MapEntry
)

// Errors callers branch on (readpath has their contract).
var (
	ErrRefused  = readpath.ErrRefused
	ErrInvalid  = readpath.ErrInvalid
	ErrLimit    = readpath.ErrLimit
	ErrClosed   = readpath.ErrClosed
	ErrNoEngine = readpath.ErrNoEngine
)

// The rules a RefusedError names, and the limits a LimitError names.
const (
	RuleOneStatement = readpath.RuleOneStatement
	RuleOnlyQueries  = readpath.RuleOnlyQueries
	RuleSandbox      = readpath.RuleSandbox
	RuleNotAllowed   = readpath.RuleNotAllowed
	LimitTimeout     = readpath.LimitTimeout
	LimitMemory      = readpath.LimitMemory
)

// Formats of Result.Write.
const (
	FormatTable = readpath.FormatTable
	FormatCSV   = readpath.FormatCSV
	FormatJSON  = readpath.FormatJSON
)

// ValidFormat reports whether f names a format of Result.Write.
func ValidFormat(f string) bool { return readpath.ValidFormat(f) }

// Text renders one value as the table format shows it (readpath.Text).
func Text(v any, t string) string { return readpath.Text(v, t) }

type (
	RefusedError = readpath.RefusedError
	LimitError   = readpath.LimitError
)

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
