package compact_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/merge"
)

func openCommitter(t *testing.T, store *memory.Store) *manifest.Committer {
	t.Helper()
	mc, err := compact.NewCommitter(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

func compactNow(t *testing.T, store *memory.Store, opts compact.Options) compact.Result {
	t.Helper()
	if opts.ScratchDir == "" {
		opts.ScratchDir = t.TempDir()
	}
	opts.Log = quiet
	res, err := compact.Table(context.Background(), store, openCommitter(t, store), testTable.ID, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// The fold's corner cases, each against the state PostgreSQL would hold.
func TestMergeRules(t *testing.T) {
	cases := []struct {
		name    string
		deltas  [][]change
		compact []bool // compact after delta i
		want    map[int64]stateRow
	}{{
		name: "unchanged value comes from the newest older version",
		deltas: [][]change{
			{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}},
			{{op: cdc.OpUpdate, lsn: 20, seq: 1, id: 1, a: 2, big: "y"}},
			{{op: cdc.OpUpdate, lsn: 30, seq: 1, id: 1, a: 3, bigUnset: true}},
		},
		want: map[int64]stateRow{1: {a: 3, big: "y"}},
	}, {
		name: "a key change into a deleted key does not inherit the deleted row's value",
		deltas: [][]change{
			{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 2, a: 1, big: "old row of 2"}, {op: cdc.OpInsert, lsn: 10, seq: 2, id: 1, a: 1, big: "x"}},
			{{op: cdc.OpDelete, lsn: 20, seq: 1, id: 2, keyOnly: true}},
			{{op: cdc.OpDelete, lsn: 30, seq: 1, id: 1, keyOnly: true}, {op: cdc.OpUpdate, lsn: 30, seq: 2, id: 2, a: 5, bigUnset: true}},
		},
		want: map[int64]stateRow{2: {a: 5, bigNull: true, bigUnset: true}},
	}, {
		name: "a truncate removes older versions, also once compaction folded it",
		deltas: [][]change{
			{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}, {op: cdc.OpInsert, lsn: 10, seq: 2, id: 2, a: 1, big: "x"}},
			{{op: cdc.OpTruncate, lsn: 20, seq: 1}, {op: cdc.OpInsert, lsn: 20, seq: 2, id: 2, a: 9, big: "z"}},
			// A replay of the first transaction after the truncate was
			// folded away: still older than it.
			{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}},
		},
		compact: []bool{false, true, false},
		want:    map[int64]stateRow{2: {a: 9, big: "z"}},
	}, {
		name: "a tombstone keeps a folded delete from resurrecting under a replay",
		deltas: [][]change{
			{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}},
			{{op: cdc.OpDelete, lsn: 20, seq: 1, id: 1, keyOnly: true}},
			{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}},
		},
		compact: []bool{false, true, false},
		want:    map[int64]stateRow{},
	}, {
		name: "duplicates count once",
		deltas: [][]change{
			{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}, {op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}},
			{{op: cdc.OpUpdate, lsn: 20, seq: 1, id: 1, a: 2, bigUnset: true}},
			{{op: cdc.OpUpdate, lsn: 20, seq: 1, id: 1, a: 2, bigUnset: true}},
		},
		compact: []bool{true, true, true},
		want:    map[int64]stateRow{1: {a: 2, big: "x"}},
	}, {
		// The property test's seed: the base's row of a version (its
		// unchanged value filled) and a replayed copy of that version
		// (still unchanged) tie in the merge order. The fold keeps the
		// base's whichever comes first (merge.TestFoldBaseRowAgainstReplays
		// tries both orders).
		name: "a base row counts rather than a replayed copy of its version",
		deltas: [][]change{
			{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}},
			{{op: cdc.OpUpdate, lsn: 20, seq: 1, id: 1, a: 2, bigUnset: true}},
			{{op: cdc.OpInsert, lsn: 30, seq: 1, id: 0, a: 3, big: "z"}, {op: cdc.OpUpdate, lsn: 20, seq: 1, id: 1, a: 2, bigUnset: true}},
		},
		compact: []bool{false, true, false},
		want:    map[int64]stateRow{0: {a: 3, big: "z"}, 1: {a: 2, big: "x"}},
	}, {
		// The base holds key 1's key change, its big lost, but no longer
		// the delete before it: a replayed insert from before the delete
		// must not fill it.
		name: "a value a base row lost is not filled from a replay older than it",
		deltas: [][]change{
			{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}, {op: cdc.OpInsert, lsn: 10, seq: 2, id: 2, a: 1, big: "y"}},
			{{op: cdc.OpDelete, lsn: 20, seq: 1, id: 1, keyOnly: true}},
			{{op: cdc.OpDelete, lsn: 30, seq: 1, id: 2, keyOnly: true}, {op: cdc.OpUpdate, lsn: 30, seq: 2, id: 1, a: 5, bigUnset: true}},
			{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}, {op: cdc.OpInsert, lsn: 10, seq: 2, id: 2, a: 1, big: "y"}},
		},
		compact: []bool{false, false, true, false},
		want:    map[int64]stateRow{1: {a: 5, bigNull: true, bigUnset: true}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := memory.New()
			newManifest(t, store)
			for i, d := range tc.deltas {
				writeDelta(t, store, d)
				if i < len(tc.compact) && tc.compact[i] {
					compactNow(t, store, compact.Options{})
				}
			}
			if got := mergedState(t, store, t.TempDir()); !maps.Equal(got, tc.want) {
				t.Fatalf("merged state %v, want %v", got, tc.want)
			}
			compactNow(t, store, compact.Options{})
			if got := mergedState(t, store, t.TempDir()); !maps.Equal(got, tc.want) {
				t.Fatalf("after a final compaction: %v, want %v", got, tc.want)
			}
		})
	}
}

// A table whose versions exceed the sort budget several times over is
// merged from spilled runs; the base comes out sorted by key, split into
// files near the target size, and equal to the model.
func TestCompactSpillsAndSorts(t *testing.T) {
	store := memory.New()
	newManifest(t, store)
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[int64]stateRow{}
	lsn := int64(100)
	for range 3 {
		var d []change
		for _, id := range rng.Perm(20000) {
			lsn++
			k := int64(id)
			switch r, ok := want[k]; {
			case !ok:
				big := fmt.Sprintf("value %d at %d %s", k, lsn, "padding-padding-padding-padding")
				want[k] = stateRow{a: lsn % 1000, big: big}
				d = append(d, change{op: cdc.OpInsert, lsn: lsn, seq: 1, id: k, a: lsn % 1000, big: big})
			case id%7 == 0:
				delete(want, k)
				d = append(d, change{op: cdc.OpDelete, lsn: lsn, seq: 1, id: k, keyOnly: true})
			default:
				r.a = lsn % 1000
				want[k] = r
				d = append(d, change{op: cdc.OpUpdate, lsn: lsn, seq: 1, id: k, a: lsn % 1000, bigUnset: true})
			}
		}
		writeDelta(t, store, d)
	}
	res := compactNow(t, store, compact.Options{MemoryBytes: 1 << 20, TargetFileBytes: 256 << 10})
	if res.Runs < 3 {
		t.Errorf("the merge spilled %d runs; the test wants several", res.Runs)
	}
	if res.Files < 2 {
		t.Errorf("base written as %d files; want it split near the target size", res.Files)
	}
	wantTomb := int64(20000 - len(want))
	if res.Rows != int64(20000) || res.Tombstones != wantTomb || res.Versions != 60000 {
		t.Errorf("result %+v: want 20000 rows, %d tombstones, 60000 versions", res, wantTomb)
	}
	if got := mergedState(t, store, t.TempDir()); !maps.Equal(got, want) {
		t.Fatalf("merged state differs from the model (%d rows, want %d)", len(got), len(want))
	}
	// Base files in manifest order are sorted by key, across files too.
	mt := openCommitter(t, store).Current().Tables[testTable.ID.String()]
	order := merge.NewOrder([]int{0})
	var prev parquet.Row
	n := 0
	for _, f := range mt.Base.Files {
		for _, row := range readRows(t, store, f.Path) {
			if prev != nil && order.Compare(prev, row) >= 0 {
				t.Fatalf("base out of order at row %d of %s", n, f.Path)
			}
			prev = row
			n++
		}
	}
	if n != 20000 {
		t.Fatalf("base files hold %d rows, want 20000", n)
	}
}

func readRows(t *testing.T, store *memory.Store, key string) []parquet.Row {
	t.Helper()
	rc, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "*.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	r := parquet.NewReader(pf)
	defer r.Close()
	var out []parquet.Row
	buf := make([]parquet.Row, 100)
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			out = append(out, row.Clone())
		}
		if errors.Is(err, io.EOF) || n == 0 {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Tombstones older than the TTL (counted from the newest commit among the
// inputs) are purged; younger ones stay.
func TestTombstoneTTL(t *testing.T) {
	store := memory.New()
	newManifest(t, store)
	// writeDelta stamps commit time = lsn ms.
	writeDelta(t, store, []change{
		{op: cdc.OpInsert, lsn: 1000, seq: 1, id: 1, a: 1, big: "x"},
		{op: cdc.OpInsert, lsn: 1000, seq: 2, id: 2, a: 1, big: "x"},
	})
	writeDelta(t, store, []change{{op: cdc.OpDelete, lsn: 2000, seq: 1, id: 1, keyOnly: true}})
	writeDelta(t, store, []change{{op: cdc.OpDelete, lsn: 9000, seq: 1, id: 2, keyOnly: true}})
	res := compactNow(t, store, compact.Options{TombstoneTTL: 5 * time.Second})
	if res.Purged != 1 || res.Tombstones != 1 || res.Rows != 1 {
		t.Fatalf("result %+v: want 1 purged (key 1, 7 s old), 1 kept (key 2)", res)
	}
	mt := openCommitter(t, store).Current().Tables[testTable.ID.String()]
	if mt.Base.Tombstones != 1 || mt.Base.RowCount != 1 {
		t.Fatalf("manifest base %+v", mt.Base)
	}
}

// Deltas the streamer commits while a compaction runs survive it, and the
// retired files are held by a fold for garbage collection.
func TestCompactKeepsConcurrentDeltas(t *testing.T) {
	store := memory.New()
	newManifest(t, store)
	writeDelta(t, store, []change{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}})
	mc := openCommitter(t, store)
	// The streamer commits between compaction's read and its commit: the
	// compaction's committer is stale on purpose, and Table refreshes it
	// first, so simulate the race from inside a store hook instead.
	hooked := &hookStore{Store: store, before: func() {
		writeDelta(t, store, []change{{op: cdc.OpUpdate, lsn: 20, seq: 1, id: 1, a: 2, big: "y"}})
	}}
	res, err := compact.Table(context.Background(), hooked, mc, testTable.ID, compact.Options{ScratchDir: t.TempDir(), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mt := openCommitter(t, store).Current()
	tab := mt.Tables[testTable.ID.String()]
	if res.Epoch != 1 || len(tab.Deltas) != 1 || tab.Deltas[0].Epoch != 2 || tab.Base.Epoch != 1 {
		t.Fatalf("after a compaction raced by a flush: result epoch %d, base %+v, deltas %+v", res.Epoch, tab.Base, tab.Deltas)
	}
	folded, kept := manifest.FileKey(testTable.ID, gen, manifest.KindDelta, 1, 0), manifest.FileKey(testTable.ID, gen, manifest.KindDelta, 2, 0)
	if _, ok := mt.FoldedAt(folded); !ok || len(mt.Folds) != 1 || len(mt.Garbage) != 0 {
		t.Fatalf("folds %+v, garbage %+v: want one fold holding the delta of epoch 1", mt.Folds, mt.Garbage)
	}
	if _, ok := mt.FoldedAt(kept); ok {
		t.Fatalf("folds %+v hold the delta of epoch 2 the streamer committed during the compaction", mt.Folds)
	}
	if _, ok := mt.FoldedAt(tab.Base.Files[0].Path); ok {
		t.Fatalf("folds %+v hold the new base %s", mt.Folds, tab.Base.Files[0].Path)
	}
	if got := mergedState(t, store, t.TempDir()); !maps.Equal(got, map[int64]stateRow{1: {a: 2, big: "y"}}) {
		t.Fatalf("merged state %v", got)
	}
}

// hookStore runs before once, right before the first base file is uploaded.
type hookStore struct {
	*memory.Store
	before func()
	done   bool
}

func (h *hookStore) Put(ctx context.Context, key string, r io.Reader) error {
	if !h.done {
		h.done = true
		h.before()
	}
	return h.Store.Put(ctx, key, r)
}

// A base that says it is sorted is merged as it is read, and its order is
// checked: one out of order fails the compaction instead of folding the
// wrong versions. Without sorted_by it is sorted like a delta.
func TestSortedBaseIsStreamedAndChecked(t *testing.T) {
	store := memory.New()
	newManifest(t, store)
	writeDelta(t, store, []change{
		{op: cdc.OpInsert, lsn: 10, seq: 1, id: 3, a: 3, big: "c"},
		{op: cdc.OpInsert, lsn: 10, seq: 2, id: 1, a: 1, big: "a"},
		{op: cdc.OpInsert, lsn: 10, seq: 3, id: 2, a: 2, big: "b"},
	})
	// Make that delta the base, claiming the merge order.
	mc := openCommitter(t, store)
	setBase := func(sortedBy []string) {
		t.Helper()
		if _, err := mc.Commit(context.Background(), func(m *manifest.Manifest) error {
			mt := m.Tables[testTable.ID.String()]
			if mt.Base == nil {
				d := mt.Deltas[0]
				mt.Base = &manifest.Base{Epoch: d.Epoch, MaxLSN: d.MaxLSN, RowCount: d.Rows, Files: d.Files, SchemaVersion: 1}
				mt.Deltas = mt.Deltas[1:]
			}
			mt.Base.SortedBy = sortedBy
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	setBase([]string{"id", "__lsn", "__seq"})
	writeDelta(t, store, []change{{op: cdc.OpUpdate, lsn: 20, seq: 1, id: 2, a: 20, bigUnset: true}})

	_, err := compact.Table(context.Background(), store, openCommitter(t, store), testTable.ID, compact.Options{ScratchDir: t.TempDir(), Log: quiet})
	if err == nil || !strings.Contains(err.Error(), "not sorted") {
		t.Fatalf("compacting a base out of the order it claims: err %v, want one naming the order", err)
	}

	setBase(nil)
	want := map[int64]stateRow{1: {a: 1, big: "a"}, 2: {a: 20, big: "b"}, 3: {a: 3, big: "c"}}
	res := compactNow(t, store, compact.Options{})
	if res.Versions != 4 {
		t.Fatalf("%d versions merged, want 4", res.Versions)
	}
	if got := mergedState(t, store, t.TempDir()); !maps.Equal(got, want) {
		t.Fatalf("after sorting the base: %v, want %v", got, want)
	}
	// Now the base is compaction's own, sorted: the next pass reads it as
	// it is, and the TOAST-unchanged value still comes from it.
	writeDelta(t, store, []change{{op: cdc.OpUpdate, lsn: 30, seq: 1, id: 3, a: 30, bigUnset: true}})
	res = compactNow(t, store, compact.Options{})
	if res.Versions != 4 || res.Runs != 0 {
		t.Fatalf("second pass: %d versions, %d runs; want 4 and 0", res.Versions, res.Runs)
	}
	want[3] = stateRow{a: 30, big: "c"}
	if got := mergedState(t, store, t.TempDir()); !maps.Equal(got, want) {
		t.Fatalf("after streaming the base: %v, want %v", got, want)
	}
}
