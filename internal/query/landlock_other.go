//go:build !nodb && !linux

package query

import "github.com/pg-cdc/pg-cdc/internal/cdc"

// restrictLandlock: Landlock is Linux's; elsewhere IsolationLandlock
// cannot hold, and says so.
func restrictLandlock(data []string, scratch string) (int, error) {
	return 0, &SandboxError{Setting: "landlock", Got: "not available on this OS",
		Want: "Linux with Landlock; or set query.isolation: process to accept the risk"}
}

// CheckIsolation refuses IsolationLandlock off Linux, as a configuration
// error.
func CheckIsolation(isolation string) error {
	if isolation != "" && isolation != IsolationLandlock {
		return nil
	}
	_, err := restrictLandlock(nil, "")
	return cdc.Usage(err)
}
