package query

import "fmt"

// The isolations of Options.Isolation: where DuckDB runs, and what holds
// it there besides its own settings (docs/security.md).
const (
	// IsolationLandlock (the default) runs DuckDB in a worker process that
	// restricts itself with Landlock before it opens DuckDB: read-only on
	// the data directories, read-write on a private scratch directory,
	// nothing else of the file system, no TCP; and bounds its own memory
	// (RLIMIT_DATA). A kernel without Landlock refuses to open.
	IsolationLandlock = "landlock"
	// IsolationProcess is the worker process with its memory bound but no
	// Landlock: for a kernel without it, by an operator's explicit choice
	// (query.isolation). DuckDB's own sandbox is what keeps it to the
	// data, reading and writing.
	IsolationProcess = "process"
	// IsolationNone runs DuckDB in the calling process (the worker itself
	// opens its engine so): DuckDB's sandbox only, and a query's memory is
	// the caller's.
	IsolationNone = "none"
)

// ValidIsolation reports whether s names an isolation ("" is the default).
func ValidIsolation(s string) bool {
	switch s {
	case "", IsolationLandlock, IsolationProcess, IsolationNone:
		return true
	}
	return false
}

// Confinement is how a worker process is held, as it reported at start.
type Confinement struct {
	// Isolation is the Options.Isolation in force.
	Isolation string
	// LandlockABI is the kernel's Landlock ABI the worker restricted
	// itself with (0: not restricted).
	LandlockABI int
	// DataLimit is the RLIMIT_DATA the worker set on itself, in bytes
	// (0: none).
	DataLimit uint64
	// PID is the worker's process id.
	PID int
}

func (c Confinement) String() string {
	if c.Isolation == IsolationNone || c.Isolation == "" {
		return "in process"
	}
	s := fmt.Sprintf("worker process %d", c.PID)
	if c.LandlockABI > 0 {
		s += fmt.Sprintf(", Landlock ABI %d", c.LandlockABI)
	}
	if c.DataLimit > 0 {
		s += fmt.Sprintf(", memory %d MiB", c.DataLimit>>20)
	}
	return s
}
