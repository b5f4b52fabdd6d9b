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
		// The read path never touches the source, nor the streaming
		// internals: it reads what the manifest and the history name.
		{pkg: "internal/query", forbidden: []string{mod + "internal/postgres", mod + "internal/config", "github.com/jackc/", mod + "internal/daemon",
			mod + "internal/capture", mod + "internal/replicate", mod + "internal/flush", mod + "cmd/"}},
		// The merge rules as SQL are text: no engine, no store.
		{pkg: "internal/mergesql", forbidden: []string{"github.com/duckdb/", mod + "internal/blob", mod + "internal/query", mod + "internal/config"}},
		{pkg: "internal/refs", forbidden: []string{mod + "internal/postgres", mod + "internal/config", mod + "internal/query", "github.com/duckdb/"}},
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
	// adapters it builds with an explicit switch, and the libraries it
	// runs (the daemon for start, capture for the operator actions, the
	// read path and its refs for query, diff, refs and promote, serve for
	// the servers, the catalog publisher); never the streaming internals
	// nor the read path's transports, which serve builds.
	wires := []string{"internal/config", "internal/logging", "internal/cdc", "internal/audit", "internal/capture", "internal/daemon",
		"internal/manifest", "internal/postgres", "internal/postgres/rdsiam", "internal/blob", "internal/blob/fs", "internal/blob/s3", "internal/blob/gcs",
		"internal/query", "internal/readpath", "internal/refs", "internal/serve", "internal/metrics",
		"internal/catalog", "internal/catalog/iceberg", "internal/profiling"}
	for _, d := range imports[mod+"cmd/pg-cdc"] {
		if isStd(d) || d == "github.com/spf13/cobra" {
			continue
		}
		if !slices.Contains(wires, strings.TrimPrefix(d, mod)) {
			t.Errorf("cmd/pg-cdc imports %s, which it does not wire (only %v)", d, wires)
		}
	}
	// DuckDB is imported by the query engine alone (design.md §11: one read
	// path); the test-only oracles and the benchmark may use it, and so may _test.go files,
	// whose imports .Imports leaves out.
	duckdbImporters := []string{"internal/query", "internal/sinktest", "internal/e2e", "bench/cmd/pgcdc-bench"} // the bench reads a pre-merged copy, as a user would
	for pkg, list := range imports {
		for _, d := range list {
			if strings.HasPrefix(d, "github.com/duckdb/") && !slices.Contains(duckdbImporters, strings.TrimPrefix(pkg, mod)) {
				t.Errorf("%s imports %s; only internal/query may import DuckDB (and the test-only %v)", pkg, d, duckdbImporters[1:])
			}
		}
	}
	// DuckDB (cgo) stays off the streaming path: nothing the daemon runs
	// links it, and the nodb build of the command (CGO_ENABLED=0, a static
	// streaming-only binary) links none of it.
	for _, pkg := range []string{"internal/daemon", "internal/capture", "internal/replicate", "internal/flush", "internal/compact", "internal/postgres", "internal/manifest", "internal/refs", "internal/blobcache"} {
		for _, d := range deps[mod+pkg] {
			if strings.HasPrefix(d, "github.com/duckdb/") {
				t.Errorf("%s links DuckDB (%s); it is on the streaming path", pkg, d)
			}
		}
	}
	// The transports of the read path (REST, MCP, server-sent events) and
	// its vocabulary reach the engine through ports: they link no DuckDB.
	for _, pkg := range []string{"internal/readpath", "internal/access", "internal/api", "internal/changefeed", "internal/mcpserver", "internal/serve", "internal/events"} {
		if _, ok := deps[mod+pkg]; !ok {
			t.Errorf("%s: no such package; keep this list true", pkg)
		}
		for _, d := range deps[mod+pkg] {
			if strings.HasPrefix(d, "github.com/duckdb/") || d == mod+"internal/query" {
				t.Errorf("%s links %s; the read path's transports use it through a port", pkg, d)
			}
		}
	}
	nodb := goList(t, `{{.ImportPath}} {{join .Deps " "}}`, "-tags", "nodb")
	if _, ok := nodb[mod+"cmd/pg-cdc"]; !ok {
		t.Fatal("go list -tags nodb: cmd/pg-cdc not found")
	}
	for _, d := range nodb[mod+"cmd/pg-cdc"] {
		if strings.HasPrefix(d, "github.com/duckdb/") || strings.HasPrefix(d, "go.duckdb.org/") {
			t.Errorf("the nodb build of cmd/pg-cdc links DuckDB (%s)", d)
		}
	}
	var linked bool
	for _, d := range deps[mod+"cmd/pg-cdc"] {
		linked = linked || strings.HasPrefix(d, "github.com/duckdb/duckdb-go/")
	}
	if !linked {
		t.Error("the default build of cmd/pg-cdc links no DuckDB: pg-cdc query needs it")
	}
}

func goList(t *testing.T, format string, flags ...string) map[string][]string {
	t.Helper()
	args := append(append([]string{"list"}, flags...), "-f", format, "./...")
	out, err := exec.Command("go", args...).Output()
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
