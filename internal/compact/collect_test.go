package compact_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/compact"
)

// TestCollectKeepsAGenerationBeingBuilt: files of a generation after the
// table's current one (a rebuild copying it, not yet named by the manifest)
// are not orphans, however old; unreferenced files of the current
// generation, and of a table the manifest does not hold, are.
func TestCollectKeepsAGenerationBeingBuilt(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	newManifest(t, store)
	keys := map[string]bool{ // key → kept
		"public/t/g0002/base/00000000/part-00000.parquet":    true,
		"public/t/g0010/base/00000000/part-00000.parquet":    true,
		"public/t/g0001/delta/00000007/part-00000.parquet":   false,
		"public/gone/g0002/base/00000000/part-00000.parquet": false,
	}
	for k := range keys {
		if err := store.Put(ctx, k, strings.NewReader("PAR1")); err != nil {
			t.Fatal(err)
		}
	}
	later := func() time.Time { return time.Now().Add(48 * time.Hour) }
	res, err := compact.Collect(ctx, store, openCommitter(t, store), time.Hour, later)
	if err != nil {
		t.Fatal(err)
	}
	if res.Orphans != 2 || res.Waiting != 2 {
		t.Errorf("collect: %+v; want 2 orphans deleted and 2 files waiting", res)
	}
	for k, kept := range keys {
		_, err := store.Get(ctx, k)
		if (err == nil) != kept {
			t.Errorf("%s: present %v, want %v", k, err == nil, kept)
		}
	}
}
