package pgcdc_test

import (
	"go/build"
	"os/exec"
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
		{pkg: "internal/flush", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/", "net/http"}},
		{pkg: "internal/manifest", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/", "net/http"}},
		{pkg: "internal/txn", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/pgx", "net/http"}},
		{pkg: "internal/pgoutput", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/pgx/v5/pgconn", "net/http"}},
		{pkg: "internal/replicate", forbidden: []string{"github.com/prometheus/", mod + "internal/postgres", mod + "internal/config", "github.com/jackc/pgx", "net/http"}},
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
