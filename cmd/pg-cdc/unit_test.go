package main

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/config"
)

const unitPath = "../../deploy/systemd/pg-cdc.service"

// unitDirectives reads a systemd unit: every directive's values, in order
// (a directive may be given more than once).
func unitDirectives(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not a directive: %q", path, line)
		}
		d[k] = append(d[k], v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// exitConstants parses exitcode.go for every Exit* constant, so that a code
// added there is seen here without editing this test.
func exitConstants(t *testing.T) map[string]int {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "exitcode.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int{}
	ast.Inspect(file, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if !strings.HasPrefix(name.Name, "Exit") || i >= len(spec.Values) {
				continue
			}
			lit, ok := spec.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.INT {
				t.Fatalf("exitcode.go: %s is not an integer literal", name.Name)
			}
			v, err := strconv.Atoi(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			codes[name.Name] = v
		}
		return false
	})
	if len(codes) == 0 {
		t.Fatal("no Exit* constants in exitcode.go")
	}
	return codes
}

// TestUnitRestartPreventExitStatus: the shipped unit never restarts a
// terminal code (10 and above, docs/exit-codes.md) or a configuration
// error, and restarts everything else.
func TestUnitRestartPreventExitStatus(t *testing.T) {
	d := unitDirectives(t, unitPath)
	var want []int
	for name, code := range exitConstants(t) {
		if code >= 10 || name == "ExitUsage" {
			want = append(want, code)
		}
	}
	slices.Sort(want)
	if want[0] != ExitUsage || !slices.Contains(want, ExitSlotLost) || slices.Contains(want, ExitRetriesExhausted) {
		t.Fatalf("parsed codes %v do not match the package's constants", want)
	}
	var got []int
	for _, v := range d["RestartPreventExitStatus"] {
		for _, f := range strings.Fields(v) {
			code, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("RestartPreventExitStatus: %q is not an exit code", f)
			}
			got = append(got, code)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("RestartPreventExitStatus=%v, want %v (ExitUsage and every code >= 10 in exitcode.go)", got, want)
	}
	if r := d["Restart"]; !slices.Equal(r, []string{"on-failure"}) {
		t.Errorf("Restart=%v, want on-failure (exit 1, 3, crashes and watchdog kills are restarted)", r)
	}
}

// TestUnitSettings checks the unit's other contracts with the code: a
// notify service with a watchdog, a stop timeout above two drains, and a
// Go memory limit under the cgroup's.
func TestUnitSettings(t *testing.T) {
	d := unitDirectives(t, unitPath)
	one := func(k string) string {
		t.Helper()
		if len(d[k]) != 1 {
			t.Fatalf("%s= given %d times, want once", k, len(d[k]))
		}
		return d[k][0]
	}
	if v := one("Type"); v != "notify" {
		t.Errorf("Type=%s, want notify (start sends READY=1 and watchdog pings)", v)
	}
	if v := one("NotifyAccess"); v != "main" {
		t.Errorf("NotifyAccess=%s, want main", v)
	}
	if v := one("User"); v != "pg-cdc" {
		t.Errorf("User=%s, want pg-cdc", v)
	}
	watchdog, err := time.ParseDuration(strings.Replace(one("WatchdogSec"), "min", "m", 1))
	if err != nil || watchdog < 10*time.Second {
		t.Errorf("WatchdogSec=%s: want a duration of at least 10s (%v)", one("WatchdogSec"), err)
	}
	stop, err := time.ParseDuration(one("TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v", err)
	}
	drain := config.Default().Flush.DrainTimeout
	if stop <= 2*drain {
		t.Errorf("TimeoutStopSec=%v, want above twice flush.drain_timeout_sec's default (%v): the drain may take one timeout to finish the transaction and one to flush", stop, drain)
	}
	env := map[string]string{}
	for _, v := range d["Environment"] {
		k, val, _ := strings.Cut(v, "=")
		env[k] = val
	}
	if env["GOTRACEBACK"] != "crash" {
		t.Errorf("GOTRACEBACK=%q, want crash: Go exits 2 on a panic, which RestartPreventExitStatus treats as a configuration error", env["GOTRACEBACK"])
	}
	limit, ok := parseBytes(env["GOMEMLIMIT"])
	memMax, ok2 := parseBytes(one("MemoryMax"))
	if !ok || !ok2 || limit >= memMax || limit < memMax/2 {
		t.Errorf("GOMEMLIMIT=%s, MemoryMax=%s: want the Go limit below the cgroup's, and not far below", env["GOMEMLIMIT"], one("MemoryMax"))
	}
	if rw := d["ReadWritePaths"]; !slices.Contains(rw, "/var/lib/pg-cdc") {
		t.Errorf("ReadWritePaths=%v, want /var/lib/pg-cdc (storage.path and state.path live there)", rw)
	}
}

// parseBytes reads GOMEMLIMIT's (1024-based suffixes: MiB) and systemd's
// (K, M, G: also 1024-based) sizes.
func parseBytes(s string) (int64, bool) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.mult, err == nil && v > 0
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v > 0
}

// TestUnitsVerify runs systemd-analyze verify on every shipped unit, with
// ExecStart pointed at an existing binary (verify checks that it is
// executable). Skipped where systemd-analyze is missing.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	units, err := filepath.Glob("../../deploy/systemd/*")
	if err != nil || len(units) == 0 {
		t.Fatalf("no units found: %v", err)
	}
	dir := t.TempDir()
	var args []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/pg-cdc", self)), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	cmd := exec.Command(analyze, append([]string{"verify"}, args...)...)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=notice")
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
