package api

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoEngine: the API reaches the engine through its port only; it
// links neither DuckDB nor internal/query.
func TestNoEngine(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/pg-cdc/pg-cdc/internal/api").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "duckdb") || dep == "github.com/pg-cdc/pg-cdc/internal/query" {
			t.Errorf("internal/api depends on %s", dep)
		}
	}
}
