// Package profiling writes the CPU and allocation profiles of a whole run,
// for the benchmarks (bench/cmd/pgcdc-bench), when the environment asks
// for them.
package profiling

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Start profiles the run for benchmarks (bench/cmd/pgcdc-bench), deliberately outside
// the PGCDC_ namespace, whose unknown variables are configuration errors:
//
//	PG_CDC_CPUPROFILE=file   CPU profile of the whole run, written at exit
//	PG_CDC_MEMPROFILE=file   allocation profile (alloc_space, inuse_space), written at exit
//
// Not a user-facing feature: a failure to profile is reported on stderr and
// never changes the exit code.
func Start() (stop func()) {
	cpuPath, memPath := os.Getenv("PG_CDC_CPUPROFILE"), os.Getenv("PG_CDC_MEMPROFILE")
	var cpu *os.File
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "pg-cdc: cpu profile: %v\n", err)
		} else {
			cpu = f
		}
	}
	return func() {
		if cpu != nil {
			pprof.StopCPUProfile()
			if err := cpu.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "pg-cdc: cpu profile: %v\n", err)
			}
		}
		if memPath != "" {
			runtime.GC() // up-to-date inuse figures
			f, err := os.Create(memPath)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "pg-cdc: memory profile: %v\n", err)
			}
		}
	}
}
