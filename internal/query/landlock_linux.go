//go:build !nodb && linux

package query

import (
	"fmt"

	"github.com/pg-cdc/pg-cdc/internal/cdc"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// hostFacts are the files DuckDB reads about the machine when it opens,
// readable (files only, no listing) in the worker: its random numbers, and
// the CPUs and memory it sizes itself by. Without /proc/self/cgroup
// DuckDB v2.0 aborts in duckdb_open (a NULL unique_ptr), so the list is
// what an strace of a worker's open showed refused, no more.
var hostFacts = []string{
	"/dev/urandom", "/dev/null",
	"/proc/self/cgroup", "/proc/stat", "/proc/meminfo",
	"/sys/devices/system/cpu", "/sys/fs/cgroup",
}

// restrictLandlock restricts this process, every thread of it, for good:
// the data directories read-only (files and listings, nothing executed),
// scratch read-write, the hostFacts readable, and nothing else of the
// file system; no TCP bind or connect (ABI 4+); no signals to, or abstract sockets of, processes outside the
// domain (ABI 6+). It returns the kernel's Landlock ABI, and fails on a
// kernel without Landlock: IsolationLandlock is never quietly weaker than
// its name (IsolationProcess is the explicit choice for such a kernel).
//
// The configuration is V7's, best effort: on an older kernel with Landlock
// the file system rules, which are what this isolation is for, hold from
// ABI 1; what later ABIs add is added where the kernel has it.
func restrictLandlock(data []string, scratch string) (int, error) {
	abi, err := landlockAvailable()
	if err != nil {
		return 0, err
	}
	read := landlock.PathAccess(llsyscall.AccessFSReadFile|llsyscall.AccessFSReadDir, data...)
	if err := landlock.V7.BestEffort().Restrict(
		read,
		landlock.RWDirs(scratch),
		landlock.ROFiles(hostFacts...).IgnoreIfMissing(),
	); err != nil {
		return 0, fmt.Errorf("query worker: Landlock restriction: %w", err)
	}
	return abi, nil
}

// landlockABI is the kernel's Landlock ABI (a variable: tests play a
// kernel without it).
var landlockABI = llsyscall.LandlockGetABIVersion

// landlockAvailable returns the kernel's Landlock ABI, or the
// *SandboxError that IsolationLandlock cannot hold here.
func landlockAvailable() (int, error) {
	abi, err := landlockABI()
	if err != nil || abi < 1 {
		return 0, &SandboxError{Setting: "landlock", Got: fmt.Sprintf("not available in this kernel (%v)", err),
			Want: "Landlock (Linux 5.13+, enabled in the LSM list; under systemd, the landlock_* system calls allowed); or set query.isolation: process to accept the risk"}
	}
	return abi, nil
}

// CheckIsolation refuses, as a configuration error, an isolation this host
// cannot hold, so that query, serve and mcp refuse at start rather than at
// the first request.
func CheckIsolation(isolation string) error {
	if isolation != "" && isolation != IsolationLandlock {
		return nil
	}
	_, err := landlockAvailable()
	return cdc.Usage(err)
}
