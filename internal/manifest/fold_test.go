package manifest

import (
	"slices"
	"testing"
	"time"
)

func TestFoldHolds(t *testing.T) {
	tab := &Table{Schema: "public", Name: "Orders", Generation: "g0001"}
	f := Fold{Prefix: FoldPrefix(tab), From: 10, Through: 20}
	if f.Prefix != "public/%4Frders/g0001/" {
		t.Fatalf("prefix %q", f.Prefix)
	}
	for key, want := range map[string]bool{
		"public/%4Frders/g0001/base/00000010/part-00000.parquet":                true,  // the base it replaced
		"public/%4Frders/g0001/base/00000020/part-00000.parquet":                false, // the base it wrote
		"public/%4Frders/g0001/base/00000009/part-00000.parquet":                false, // an earlier fold's
		"public/%4Frders/g0001/delta/00000020/part-00003.parquet":               true,
		"public/%4Frders/g0001/delta/00000020/from-00000013-part-00000.parquet": true, // a merged delta
		"public/%4Frders/g0001/delta/00000011/part-00000.parquet":               true,
		"public/%4Frders/g0001/delta/00000010/part-00000.parquet":               false, // folded into the base it replaced
		"public/%4Frders/g0001/delta/00000021/part-00000.parquet":               false, // flushed after it
		"public/%4Frders/g0002/delta/00000015/part-00000.parquet":               false, // another generation
		"public/%4Frders/g0001/delta/00000015/x/part-00000.parquet":             false,
		"public/%4Frders/g0001/delta/abc/part-00000.parquet":                    false,
		"public/%4Frders/g0001/spill/00000015/part-00000.parquet":               false,
		"public/orders/g0001/delta/00000015/part-00000.parquet":                 false,
	} {
		if got := f.Holds(key); got != want {
			t.Errorf("Holds(%s) = %v, want %v", key, got, want)
		}
	}
}

// TestAddFoldBounded: a table compacted every minute for two weeks holds
// folds for the window's multiples only, each extended by the majors that
// follow it; a major that does not continue the newest fold (its base was
// not the fold's end) starts another.
func TestAddFoldBounded(t *testing.T) {
	tab := &Table{Schema: "public", Name: "t", Generation: "g0001"}
	other := &Table{Schema: "public", Name: "u", Generation: "g0001"}
	m := &Manifest{}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const window = 24 * time.Hour
	var from uint64
	for i := range 14 * 24 * 60 {
		at := start.Add(time.Duration(i) * time.Minute)
		through := from + 7
		m.AddFold(tab, from, through, uint64(i+1), at, window, nil)
		if i%600 == 0 {
			m.AddFold(other, uint64(i), uint64(i)+1, uint64(i+1), at, window, nil)
		}
		from = through
	}
	var mine []Fold
	for _, f := range m.Folds {
		if f.Prefix == FoldPrefix(tab) {
			mine = append(mine, f)
		}
	}
	if len(mine) != 14 {
		t.Fatalf("%d folds of public.t after 14 days of a major a minute: %+v", len(mine), mine)
	}
	for i, f := range mine {
		if i > 0 && f.From != mine[i-1].Through {
			t.Errorf("fold %d starts at %d, the one before ends at %d", i, f.From, mine[i-1].Through)
		}
		if f.RetiredAt.Sub(f.Since) >= window {
			t.Errorf("fold %d spans %v ≥ the window", i, f.RetiredAt.Sub(f.Since))
		}
	}
	last := mine[len(mine)-1]
	if last.Through != from || last.Version != 14*24*60 {
		t.Errorf("newest fold %+v: want through %d, version %d", last, from, 14*24*60)
	}
	// A major after a gap in the range (its base is not the fold's end).
	n := len(m.Folds)
	m.AddFold(tab, from+100, from+107, 1, start.Add(15*24*time.Hour-time.Hour), window, nil)
	if len(m.Folds) != n+1 {
		t.Errorf("a fold that does not continue the newest one was merged into it")
	}
	at, ok := m.FoldedAt("public/t/g0001/delta/00000003/part-00000.parquet")
	if !ok || !at.Equal(mine[0].RetiredAt) {
		t.Errorf("FoldedAt = %v, %v; want %v", at, ok, mine[0].RetiredAt)
	}
}

// TestAddFoldListsWhatItCannotHold: a retired file whose key the fold
// cannot place (outside FileKey's layout) is listed in Garbage, so it is
// kept and deleted as a retired file, never taken for an orphan; the files
// the fold holds are not listed.
func TestAddFoldListsWhatItCannotHold(t *testing.T) {
	tab := &Table{Schema: "public", Name: "t", Generation: "g0001"}
	m := &Manifest{}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.AddFold(tab, 0, 9, 4, at, time.Hour, []File{
		{Path: "public/t/g0001/base/00000000/part-00000.parquet"},
		{Path: "public/t/g0001/delta/00000009/part-00000.parquet"},
		{Path: "public/t/g0001/legacy/part-00000.parquet"},
		{Path: "public/t/g0001/delta/00000012/part-00000.parquet"}, // above the range
	})
	var listed []string
	for _, g := range m.Garbage {
		listed = append(listed, g.Path)
		if !g.RetiredAt.Equal(at) {
			t.Errorf("%s retired at %v, want %v", g.Path, g.RetiredAt, at)
		}
	}
	want := []string{"public/t/g0001/legacy/part-00000.parquet", "public/t/g0001/delta/00000012/part-00000.parquet"}
	if !slices.Equal(listed, want) {
		t.Fatalf("garbage %v, want %v", listed, want)
	}
}
