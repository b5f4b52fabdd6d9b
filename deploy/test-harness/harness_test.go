// Package testharness runs every script of the test harness
// (docs/test-harness.md) with --self-test, so the scripts cannot rot: each
// starts its own throwaway PostgreSQL, runs its scenario with small counts
// against a pg-cdc built from this tree, and exits non-zero on any failure.
package testharness

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// scripts are the harness's entry points; lib.sh is sourced by each.
var scripts = []string{
	"load-gen.sh",
	"sigterm-loop.sh",
	"kill-loop.sh",
	"inject-sink-failure.sh",
	"inject-slot-full.sh",
}

// postgresMissing says why the scripts cannot run here, or "" when they can
// (the same needs as internal/pgtest, plus psql).
func postgresMissing() string {
	if _, err := exec.LookPath("psql"); err != nil {
		return "psql not found"
	}
	_, onPath := exec.LookPath("pg_ctl")
	installed, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if onPath != nil && len(installed) == 0 {
		return "PostgreSQL server binaries not found (run 'make postgres')"
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return "running as root without a postgres OS user"
		}
	}
	return ""
}

func TestSelfTests(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL per script")
	}
	if why := postgresMissing(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	bin := filepath.Join(t.TempDir(), "pg-cdc")
	build := exec.Command("go", "build", "-o", bin, "./cmd/pg-cdc")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build pg-cdc: %v\n%s", err, out)
	}
	for _, script := range scripts {
		t.Run(strings.TrimSuffix(script, ".sh"), func(t *testing.T) {
			t.Parallel()
			runSelfTest(t, script, bin)
		})
	}
}

func runSelfTest(t *testing.T, script, bin string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "--self-test", "--bin", bin)
	// On a timeout, SIGTERM: the script's trap then stops what it started
	// and undoes its mounts, which a SIGKILL would leave behind.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s --self-test: %v\n%s", script, time.Since(start).Round(time.Millisecond), lastLines(out.String(), 40))
	if err != nil {
		t.Fatalf("%s --self-test: %v", script, err)
	}
	if s := out.String(); strings.Contains(s, ": SKIP: ") {
		t.Skip(strings.TrimSpace(s[strings.Index(s, ": SKIP: ")+2:]))
	}
	if !strings.Contains(out.String(), "passed") && !strings.Contains(out.String(), ": PASS: ") {
		t.Fatalf("%s --self-test exited 0 without a PASS line", script)
	}
}

// TestShellcheck lints the scripts (.shellcheckrc beside them holds the
// settings). make test installs shellcheck (scripts/ensure-shellcheck.sh);
// in CI (CI=true) a missing shellcheck is a failure, elsewhere a skip.
func TestShellcheck(t *testing.T) {
	t.Parallel()
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("shellcheck not installed (make test installs Debian's shellcheck package)")
		}
		t.Skip("shellcheck not installed")
	}
	out, err := exec.Command(sc, append([]string{"lib.sh"}, scripts...)...).CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
