package compact_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
)

// TestMajorsKeepTheManifestFlat: a table compacted again and again lists
// none of the files it retired; one fold stands for them, so the manifest
// stays the same size however many majors ran (it listed every folded file
// for the history's retention). Past the retention the fold's files are
// deleted, the fold dropped, and the table reads the same.
func TestMajorsKeepTheManifestFlat(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	newManifest(t, store)
	const retention = 7 * 24 * time.Hour
	t0 := time.Now()
	var (
		sizes  []int
		at     time.Time
		pinned uint64 // a version in the middle, which a branch pins below
	)
	for i := range 40 {
		writeDelta(t, store, []change{
			{op: cdc.OpInsert, lsn: int64(100*i + 10), seq: 1, id: int64(i), a: int64(i), big: "x"},
			{op: cdc.OpUpdate, lsn: int64(100*i + 20), seq: 1, id: 0, a: int64(i), big: "y"},
		})
		at = t0.Add(time.Duration(i) * 10 * time.Minute)
		compactNow(t, store, compact.Options{Retention: retention, Now: func() time.Time { return at }})
		sizes = append(sizes, openCommitter(t, store).Current().EncodedBytes())
		if i == 20 {
			pinned = openCommitter(t, store).Current().Version
		}
	}
	m := openCommitter(t, store).Current()
	if len(m.Garbage) != 0 || len(m.Folds) != 1 {
		t.Fatalf("after 40 majors: %d garbage entries, folds %+v; want one fold and no entry", len(m.Garbage), m.Folds)
	}
	if f := m.Folds[0]; f.From != 0 || f.Through != 40 || !f.RetiredAt.Equal(at.UTC()) || !f.Since.Equal(t0.UTC()) {
		t.Fatalf("fold %+v: want epochs 0 to 40, since the first major, retired at the last", f)
	}
	// A manifest's size varies by a few bytes with its numbers' digits.
	if sizes[39] > sizes[1]+32 {
		t.Fatalf("manifest bytes after each major: %v; want them flat", sizes)
	}

	objects := func() (n int) {
		list, err := store.List(ctx, "public/")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list {
			if strings.HasSuffix(o.Key, ".parquet") {
				n++
			}
		}
		return n
	}
	want := mergedState(t, store, t.TempDir())
	collect := func(now time.Time, pins ...uint64) compact.CollectResult {
		t.Helper()
		res, err := compact.Collect(ctx, store, openCommitter(t, store), compact.CollectOptions{Grace: time.Hour, Retention: retention, Now: func() time.Time { return now },
			Pinned: func(context.Context) ([]uint64, error) { return pins, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	before := objects()
	if res := collect(at.Add(retention - time.Hour)); res.Retired != 0 || res.Orphans != 0 || objects() != before {
		t.Fatalf("inside the retention: %+v, %d of %d files left", res, objects(), before)
	}
	if n := len(openCommitter(t, store).Current().Folds); n != 1 {
		t.Fatalf("a fold inside the retention was dropped (%d left)", n)
	}
	live := len(openCommitter(t, store).Current().Tables[testTable.ID.String()].Files())
	// A pinned version names files of the fold: they stay, and so does
	// the fold, so they are still retired files, not orphans.
	if res := collect(at.Add(retention+time.Hour), pinned); res.Waiting == 0 || objects() == live {
		t.Fatalf("past the retention with version %d pinned: %+v, %d files left", pinned, res, objects())
	}
	if n := len(openCommitter(t, store).Current().Folds); n != 1 {
		t.Fatalf("the fold was dropped while a pinned version names its files (%d folds left)", n)
	}
	if res := collect(at.Add(retention + time.Hour)); objects() != live || res.Orphans != 0 {
		t.Fatalf("past the retention: %+v; %d files left, want the %d live ones", res, objects(), live)
	}
	if m := openCommitter(t, store).Current(); len(m.Folds) != 0 {
		t.Fatalf("folds %+v kept past the retention", m.Folds)
	}
	if got := mergedState(t, store, t.TempDir()); len(got) != len(want) || got[0] != want[0] {
		t.Fatalf("after collection the table reads %v, before %v", got, want)
	}
}
