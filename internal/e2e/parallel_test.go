package e2e

import "testing"

// waitBound marks a test whose time is mostly spent waiting (an outage, a
// blackhole, retry backoff, a throttled sink) rather than computing. Such
// tests run in parallel with each other (go test's -parallel, GOMAXPROCS
// by default) once the serial tests are done, so the suite's wall time is
// not the sum of their waits. Every test has its own PostgreSQL, sink,
// proxies and ports, and none changes the process environment. CPU-bound
// tests stay serial: on 2 cores two of them would slow each other down
// towards their timeouts.
func waitBound(t *testing.T) {
	t.Helper()
	t.Parallel()
}
