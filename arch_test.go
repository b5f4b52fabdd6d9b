package pgcdc_test

import (
	"go/build"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDependencyDirection keeps the layering of docs/architecture.md true:
// the domain core imports no adapter or SDK, and nothing on the streaming
// path links DuckDB (cgo), which belongs to the query layer and to tests.
func TestDependencyDirection(t *testing.T) {
	// Direct imports decide layering (pglogrepl's parser shares a package
	// with its connection code, so pgoutput depends on pgconn transitively
	// without using it); transitive dependencies decide what gets linked.
	imports := goList(t, `{{.ImportPath}} {{join .Imports " "}}`)
	deps := goList(t, `{{.ImportPath}} {{join .Deps " "}}`)
	const mod = "github.com/pg-cdc/pg-cdc/"
	rules := []struct {
		pkg       string
		forbidden []string
		onlyStd   bool
	}{
		{pkg: "internal/cdc", onlyStd: true},
		{pkg: "internal/failpoint", onlyStd: true},
		{pkg: "internal/sdnotify", onlyStd: true},
		{pkg: "internal/logging", onlyStd: true},
		{pkg: "internal/runs", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/", "net/http"}},
		{pkg: "internal/health", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/", "net/http"}},
		// The backfill planner is pure: no I/O adapter, no store, no SQL.
		{pkg: "internal/backfill", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", mod + "internal/blob", "github.com/jackc/", "net/http", "os"}},
		{pkg: "internal/flush", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/", "net/http",
			mod + "internal/daemon", mod + "internal/capture", mod + "internal/replicate", mod + "internal/audit", mod + "cmd/"}},
		// The control messages are a pure wire format.
		{pkg: "internal/control", forbidden: []string{"github.com/jackc/", "github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", mod + "internal/blob", "net", "os"}},
		// The process and the operator actions get their options from the
		// command, never the configuration itself.
		{pkg: "internal/daemon", forbidden: []string{mod + "internal/config", mod + "cmd/"}},
		{pkg: "internal/capture", forbidden: []string{mod + "internal/config", mod + "internal/daemon", mod + "cmd/"}},
		{pkg: "internal/manifest", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/", "net/http"}},
		{pkg: "internal/txn", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/pgx", "net/http"}},
		{pkg: "internal/pgoutput", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/pgx/v5/pgconn", "net/http"}},
		// The streaming service and the flush know nothing above them: not the
		// process that runs them, nor the operator actions.
		{pkg: "internal/replicate", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/pgx", "net/http",
			mod + "internal/daemon", mod + "internal/capture", mod + "internal/audit", mod + "cmd/"}},
		// Generations reach the source through their own port (Source).
		{pkg: "internal/generation", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/", "net/http"}},
		{pkg: "internal/snapshot", forbidden: []string{mod + "internal/postgres", mod + "internal/config", "github.com/jackc/pgx"}},
		{pkg: "internal/parquetfile", forbidden: []string{mod + "internal/postgres", mod + "internal/config", "github.com/jackc/pgx"}},
		// The source adapter is a leaf: AWS (IAM tokens) lives in postgres/rdsiam.
		{pkg: "internal/postgres", forbidden: []string{mod + "internal/config", "github.com/aws/"}},
	}
	for _, r := range rules {
		list, ok := imports[mod+r.pkg]
		if r.onlyStd {
			list = deps[mod+r.pkg]
		}
		if !ok {
			t.Errorf("package %s not found", r.pkg)
			continue
		}
		for _, d := range list {
			if r.onlyStd && !isStd(d) {
				t.Errorf("%s must import only the standard library; it depends on %s", r.pkg, d)
			}
			for _, f := range r.forbidden {
				if strings.HasPrefix(d, f) {
					t.Errorf("%s must not depend on %s (via %s)", r.pkg, f, d)
				}
			}
		}
	}
	// The command imports only what it wires: the configuration, the
	// adapters it builds with an explicit switch, and the two libraries it
	// runs (the daemon for start, capture for every other command); never
	// the streaming internals.
	wires := []string{"internal/config", "internal/logging", "internal/cdc", "internal/audit", "internal/capture", "internal/daemon",
		"internal/manifest", "internal/postgres", "internal/postgres/rdsiam", "internal/blob/fs", "internal/blob/s3", "internal/blob/gcs"}
	for _, d := range imports[mod+"cmd/pg-cdc"] {
		if isStd(d) || d == "github.com/spf13/cobra" {
			continue
		}
		if !slices.Contains(wires, strings.TrimPrefix(d, mod)) {
			t.Errorf("cmd/pg-cdc imports %s, which it does not wire (only %v)", d, wires)
		}
	}
	// DuckDB is imported by the query engine alone (design.md §11: one read
	// path); the test-only oracles may use it, and so may _test.go files,
	// whose imports .Imports leaves out.
	duckdbImporters := []string{"internal/query", "internal/sinktest", "internal/e2e"}
	for pkg, list := range imports {
		for _, d := range list {
			if strings.HasPrefix(d, "github.com/duckdb/") && !slices.Contains(duckdbImporters, strings.TrimPrefix(pkg, mod)) {
				t.Errorf("%s imports %s; only internal/query may import DuckDB (and the test-only %v)", pkg, d, duckdbImporters[1:])
			}
		}
	}
	// DuckDB (cgo) stays out of the binary that streams.
	for _, d := range deps[mod+"cmd/pg-cdc"] {
		if strings.HasPrefix(d, "github.com/duckdb/") {
			t.Errorf("cmd/pg-cdc links DuckDB (%s); keep it in the query layer and tests", d)
		}
	}
}

func goList(t *testing.T, format string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", format, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		m[fields[0]] = fields[1:]
	}
	return m
}

func isStd(path string) bool {
	p, err := build.Default.Import(path, "", build.FindOnly)
	return err == nil && p.Goroot
}
