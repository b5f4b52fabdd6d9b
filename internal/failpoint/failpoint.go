// Package failpoint lets crash tests stop the process at a named step, the
// way a power cut or kill -9 would, so that every step of the durability
// path (design.md §1) is exercised by a real crash rather than a mock.
//
// Failpoints are armed only through the PGCDC_FAILPOINTS environment variable,
// read once at start: a comma-separated list of name=action, where action is
// "kill" (SIGKILL the process at once) or "kill@N" (at the N-th hit), or
// "stop" / "stop@N" (SIGSTOP the process there, so a test can let another
// process take over before it sends SIGCONT). Unarmed, Inject costs one map
// lookup on an empty map.
package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// EnvVar arms failpoints.
const EnvVar = "PGCDC_FAILPOINTS"

type point struct {
	killAt int // hit count at which to act
	hits   int
	stop   bool // SIGSTOP instead of SIGKILL
}

var (
	mu     sync.Mutex
	points = parse(os.Getenv(EnvVar))
)

func parse(spec string) map[string]*point {
	m := map[string]*point{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, action, _ := strings.Cut(item, "=")
		p := &point{killAt: 1, stop: strings.HasPrefix(action, "stop")}
		_, n, ok := strings.Cut(action, "@")
		if ok {
			if v, err := strconv.Atoi(n); err == nil && v > 0 {
				p.killAt = v
			}
		}
		m[name] = p
	}
	return m
}

// Inject kills the process if the named failpoint is armed and due.
func Inject(name string) {
	if len(points) == 0 {
		return
	}
	mu.Lock()
	p, ok := points[name]
	if ok {
		p.hits++
	}
	due := ok && p.hits == p.killAt
	mu.Unlock()
	if due && p.stop {
		fmt.Fprintf(os.Stderr, "failpoint %s: stopping the process\n", name)
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) // returns after SIGCONT
		return
	}
	if due {
		fmt.Fprintf(os.Stderr, "failpoint %s: killing the process\n", name)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is delivered asynchronously; never run past the point
	}
}
