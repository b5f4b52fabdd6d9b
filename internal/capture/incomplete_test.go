package capture

import (
	"errors"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// TestIncompleteTables: dump and verify keep the complete tables (and
// manifests written before snapshot states, whose state is empty) and
// refuse the others with exit 18, naming each with its state and progress.
func TestIncompleteTables(t *testing.T) {
	m := &manifest.Manifest{Tables: map[string]*manifest.Table{
		"public.done":  {Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete}},
		"public.old":   {Snapshot: manifest.Snapshot{}},
		"public.half":  {Snapshot: manifest.Snapshot{State: manifest.SnapshotBackfilling, RowsCopied: 50, RowsEstimate: 100}},
		"public.later": {Snapshot: manifest.Snapshot{State: manifest.SnapshotPending}},
	}}
	ids := []cdc.TableID{{Schema: "public", Name: "done"}, {Schema: "public", Name: "half"}, {Schema: "public", Name: "old"}, {Schema: "public", Name: "later"}}
	complete, incomplete := Incomplete(m, ids)
	if len(complete) != 2 || complete[0].Name != "done" || complete[1].Name != "old" {
		t.Errorf("complete: %v", complete)
	}
	want := []string{"public.half (backfilling 50 / ~100 (50%))", "public.later (pending -)"}
	if strings.Join(incomplete, "|") != strings.Join(want, "|") {
		t.Errorf("incomplete: %q, want %q", incomplete, want)
	}
	err := IncompleteError(incomplete)
	if !errors.Is(err, cdc.ErrNotInitialized) {
		t.Errorf("the refusal is not cdc.ErrNotInitialized (exit 18): %v", err)
	}
	if !strings.Contains(err.Error(), "public.half (backfilling 50 / ~100 (50%))") || !strings.Contains(cdc.HintOf(err), "--allow-incomplete") {
		t.Errorf("error %q, hint %q", err, cdc.HintOf(err))
	}
}
