package backfill

import (
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

func snap(t *testing.T, text string) cdc.Snapshot {
	t.Helper()
	s, err := cdc.ParseSnapshot(text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPlaceStraggler: transactions whose commit LSN order and visibility in
// the chunk's snapshot disagree. The snapshot 100:104:101,103 sees 100 and
// 102 but not 101 and 103, although 101 committed (at LSN 0x10) before 102
// (0x20), and 103 (0x30) before the marker (0x40). 105 is past xmax.
func TestPlaceStraggler(t *testing.T) {
	tr := NewTracker()
	tr.Change("a", 100, 0x08) // visible, older: chunk row after it
	tr.Change("b", 101, 0x10) // straggler: invisible though before a visible commit
	tr.Change("b", 102, 0x20) // visible: the chunk reflects it but not 101's
	tr.Change("c", 102, 0x20) // visible
	tr.Change("c", 103, 0x30) // invisible (in xip)
	tr.Change("d", 105, 0x38) // invisible (≥ xmax)
	tr.Change("d", 103, 0x30) // earlier invisible change of the same key
	s := snap(t, "100:104:101,103")
	const marker = cdc.LSN(0x40)
	c := tr.Chunk(s, marker)
	for _, tc := range []struct {
		key  string
		want cdc.LSN
	}{
		{"a", marker}, // only a visible change: after it, at the marker
		{"b", 0x10},   // before the straggler 101
		{"c", 0x30},   // after the visible 102, before the invisible 103
		{"d", 0x30},   // before the earliest invisible change
		{"e", marker}, // untouched key
	} {
		got := c.Place(tc.key, 1, 5)
		if got.LSN != tc.want || got.Seq != -4 {
			t.Errorf("Place(%q) = %s/%d, want %s/-4", tc.key, got.LSN, got.Seq, tc.want)
		}
	}
	// A visible change never moves a row, whatever its LSN.
	if got := c.Place("a", 4, 5); got.LSN != marker || got.Seq != -1 {
		t.Errorf("Place(a, last) = %s/%d", got.LSN, got.Seq)
	}

	// After the chunk, the changes its snapshot sees are forgotten.
	tr.Prune(s)
	if tr.Len() != 4 {
		t.Fatalf("after prune: %d changes kept, want 4 (101, 103 twice, 105)", tr.Len())
	}
	// The next snapshot sees them all but 105, still running.
	s2 := snap(t, "105:106:105")
	c2 := tr.Chunk(s2, 0x50)
	if got := c2.Place("b", 0, 1); got.LSN != 0x50 {
		t.Errorf("next chunk: b at %s, want the marker", got.LSN)
	}
	if got := c2.Place("d", 0, 1); got.LSN != 0x38 {
		t.Errorf("next chunk: d at %s, want before 105 at 0/38", got.LSN)
	}
	tr.Prune(s2)
	if tr.Len() != 1 {
		t.Fatalf("after second prune: %d kept, want 1", tr.Len())
	}
	tr.Prune(snap(t, "106:106:"))
	if tr.Len() != 0 || len(tr.byKey) != 0 {
		t.Fatalf("after third prune: %d kept", tr.Len())
	}
}

// TestPlaceTruncate: a TRUNCATE the snapshot does not see puts the whole
// chunk before it (its rows are gone); one it sees changes nothing.
func TestPlaceTruncate(t *testing.T) {
	tr := NewTracker()
	tr.Truncate(100, 0x10) // visible
	s := snap(t, "101:102:101")
	if got := tr.Chunk(s, 0x40).Place("x", 0, 1); got.LSN != 0x40 {
		t.Fatalf("visible truncate moved the row to %s", got.LSN)
	}
	tr.Truncate(101, 0x20) // invisible
	tr.Change("x", 101, 0x30)
	c := tr.Chunk(s, 0x40)
	for _, k := range []string{"x", "y"} {
		if got := c.Place(k, 0, 1); got.LSN != 0x20 {
			t.Errorf("Place(%q) = %s, want before the truncate at 0/20", k, got.LSN)
		}
	}
	tr.Prune(s)
	if tr.Len() != 2 {
		t.Fatalf("kept %d, want the invisible truncate and change", tr.Len())
	}
}

func TestAdvance(t *testing.T) {
	now := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	// A pending table whose init copy was interrupted: its count is reset.
	s := manifest.Snapshot{State: manifest.SnapshotPending, RowsCopied: 1234}
	s = Advance(s, ChunkResult{Rows: 3, Limit: 3, LastKey: []string{"3"}, Marker: 0x10}, now)
	if s.State != manifest.SnapshotBackfilling || s.RowsCopied != 3 || s.Chunks != 1 || s.LastKey[0] != "3" || s.StartedAt == nil {
		t.Fatalf("after a full chunk: %+v", s)
	}
	s = Advance(s, ChunkResult{Rows: 0, Limit: 3, Marker: 0x20}, now.Add(time.Second))
	if s.State != manifest.SnapshotComplete || s.LSN != 0x20 || s.LastKey[0] != "3" || s.RowsCopied != 3 || s.CompletedAt == nil || !s.StartedAt.Equal(now) {
		t.Fatalf("after the short chunk: %+v", s)
	}
}
