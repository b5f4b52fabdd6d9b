//go:build !nodb && !linux

package query

// restrictLandlock: Landlock is Linux's; elsewhere IsolationLandlock
// cannot hold, and says so.
func restrictLandlock(data []string, scratch string) (int, error) {
	return 0, &SandboxError{Setting: "landlock", Got: "not available on this OS",
		Want: "Linux with Landlock; or set query.isolation: process to accept the risk"}
}
