// Package failpoint lets crash tests stop the process at a named step, the
// way a power cut or kill -9 would, so that every step of the durability
// path (DESIGN §1) is exercised by a real crash rather than a mock.
//
// Failpoints are armed only through the PGCDC_FAILPOINTS environment variable,
// read once at start: a comma-separated list of name=action, where action is
// "kill" (SIGKILL the process at once) or "kill@N" (at the N-th hit). Unarmed,
// Inject costs one map lookup on an empty map.
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
	killAt int // hit count at which to kill
	hits   int
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
		p := &point{killAt: 1}
		if n, ok := strings.CutPrefix(action, "kill@"); ok {
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
	if due {
		fmt.Fprintf(os.Stderr, "failpoint %s: killing the process\n", name)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is delivered asynchronously; never run past the point
	}
}
