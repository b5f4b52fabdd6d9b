// Package npmtest installs the npm tools the tests read pg-cdc's output
// with (the MCP inspector, icebird) through their setup scripts under
// scripts/, once per test binary. A tool that cannot be installed (no node
// or npm, no registry) fails the test under CI=true, where a missing
// dependency is a failure, and skips it elsewhere; in -short it is skipped
// outside CI, since every use starts node.
package npmtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// installTimeout bounds one run of a setup script (an npm install).
const installTimeout = 5 * time.Minute

// Ensure runs scripts/<script> once per test binary and returns what it
// prints on stdout (the tool's command or directory); what names the tool
// in the skip and failure messages.
func Ensure(t testing.TB, script, what string) string {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skipf("%s runs node: not in -short", what)
	}
	once, _ := installs.LoadOrStore(script, sync.OnceValues(func() (string, string) { return install(script) }))
	out, msg := once.(func() (string, string))()
	if msg != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return out
}

// installs holds one sync.OnceValues per script.
var installs sync.Map

func install(script string) (out, failure string) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", script + ": node not found (install Debian's nodejs and npm packages)"
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", "npmtest: cannot find the repository's scripts directory"
	}
	path := filepath.Join(filepath.Dir(file), "..", "..", "scripts", script)
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", path)
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Sprintf("%s: %v\n%s", script, err, stderr.String())
	}
	return strings.TrimSpace(string(b)), ""
}
