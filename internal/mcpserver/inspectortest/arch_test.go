package inspectortest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoEngine: the test support runs under any build (nodb included): it
// links neither DuckDB nor internal/query.
func TestNoEngine(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/pg-cdc/pg-cdc/internal/mcpserver/inspectortest").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "duckdb") || dep == "github.com/pg-cdc/pg-cdc/internal/query" {
			t.Errorf("inspectortest depends on %s", dep)
		}
	}
}
