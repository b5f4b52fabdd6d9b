package manifest

import (
	"context"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestFlushes: on a history where every third version only compacts (it
// keeps the flush before it), a flush's tag time finds the flush's own
// version, never the compaction after it nor the version before it (whose
// committed_at is the nearer one); a time between flushes finds nothing;
// Flushes lists one header per flush, newest first.
func TestFlushes(t *testing.T) {
	store := memory.New()
	var steps []step
	epoch, lsn, mct := uint64(0), cdc.LSN(0x1000), simStart
	for i := 2; i <= 300; i++ {
		if i%3 != 0 {
			epoch, lsn, mct = epoch+1, lsn+0x100, mct.Add(time.Second)
		}
		steps = append(steps, step{epoch, lsn, mct})
	}
	s := scripted(t, store, steps)
	hs := s.headers()
	h := NewHistory(store)
	ctx := context.Background()

	var flushes []Header // oldest first: the first version of each flushed_at
	for v := 1; v < len(hs); v++ {
		if v == 1 || !hs[v].FlushedAt.Equal(hs[v-1].FlushedAt) {
			flushes = append(flushes, hs[v])
		}
	}
	if len(flushes) < 150 {
		t.Fatalf("the script made %d flushes", len(flushes))
	}
	for _, f := range flushes {
		hd, ok, err := h.FlushVersion(ctx, f.FlushedAt)
		if err != nil || !ok || hd != f {
			t.Fatalf("FlushVersion(%s) = version %d, %v, %v; want version %d", f.FlushedAt, hd.Version, ok, err, f.Version)
		}
		if _, ok, err := h.FlushVersion(ctx, f.FlushedAt.Add(time.Millisecond)); ok || err != nil {
			t.Fatalf("FlushVersion(a time just after the flush at %s) found one (%v)", f.FlushedAt, err)
		}
	}
	if _, ok, _ := h.FlushVersion(ctx, flushes[len(flushes)-1].FlushedAt.Add(time.Hour)); ok {
		t.Error("a time after the newest flush found a version")
	}

	got, err := h.Flushes(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 {
		t.Fatalf("Flushes(10) returned %d", len(got))
	}
	for i, hd := range got {
		if want := flushes[len(flushes)-1-i]; hd != want {
			t.Errorf("Flushes[%d] = version %d (flushed %s), want version %d", i, hd.Version, hd.FlushedAt, want.Version)
		}
	}
	all, err := h.Flushes(ctx, 1<<20)
	if err != nil || len(all) != len(flushes) {
		t.Fatalf("Flushes(all) = %d headers, %v; want %d", len(all), err, len(flushes))
	}
	if all[len(all)-1] != flushes[0] {
		t.Errorf("the oldest flush listed is version %d, want %d", all[len(all)-1].Version, flushes[0].Version)
	}
}
