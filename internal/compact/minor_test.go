package compact_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"pgregory.net/rapid"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/merge"
)

// TestMinorMatchesUnmerged: random inserts, updates leaving big unchanged
// (TOAST markers), deletes, key changes and truncates, flushed as deltas
// with replayed duplicates, sometimes folded by a major compaction, then
// merged by minor compactions of random fanout until none is due. The
// merge changes neither the merged state nor a single change row (order
// tokens, ops, markers, values, in order), each level keeps fewer than
// fanout deltas, and no merge adds to the manifest's garbage list.
func TestMinorMatchesUnmerged(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		store := memory.New()
		newManifest(t, store)
		scratch := t.TempDir()
		want := model{}
		lsn := int64(1000)
		var written [][]change
		for range rapid.IntRange(1, 60).Draw(rt, "txns") {
			lsn += 10
			var pending []change
			seq := int64(0)
			for range rapid.IntRange(1, 3).Draw(rt, "ops") {
				seq++
				pending = append(pending, drawChange(rt, want, lsn, seq)...)
				seq += 2
			}
			written = append(written, flushDelta(t, rt, store, pending, written))
			if rapid.IntRange(0, 15).Draw(rt, "major") == 0 {
				runCompaction(t, rt, store, scratch)
			}
		}
		before := mergedState(t, store, scratch)
		rowsBefore := changeRows(t, store, scratch)
		tiers := compact.Tiers{Fanout: rapid.IntRange(2, 5).Draw(rt, "fanout")}
		mc := openCommitter(t, store)
		garbageBefore := len(mc.Current().Garbage)
		merges := 0
		for {
			results, err := compact.Minor(context.Background(), store, mc, tiers, compact.Options{ScratchDir: scratch, Log: quiet})
			if err != nil {
				rt.Fatalf("minor: %v", err)
			}
			if len(results) == 0 {
				break
			}
			for _, res := range results {
				merges++
				if res.Merged != tiers.Fanout || res.Level < 1 {
					rt.Fatalf("merge %+v: want %d deltas into a level ≥ 1", res, tiers.Fanout)
				}
			}
		}
		if got := mergedState(t, store, scratch); !maps.Equal(got, before) {
			rt.Fatalf("minor compaction changed the merged state\nbefore %v\n after %v", before, got)
		}
		if got := changeRows(t, store, scratch); !slices.Equal(got, rowsBefore) {
			rt.Fatalf("minor compaction changed the change rows\nbefore %q\n after %q", rowsBefore, got)
		}
		if !maps.Equal(before, map[int64]stateRow(want)) {
			rt.Fatalf("merged state differs from the model\n got %v\nwant %v", before, want)
		}
		m := openCommitter(t, store).Current()
		deltas := m.Tables[testTable.ID.String()].Deltas
		perLevel := map[int]int{}
		for _, d := range deltas {
			perLevel[d.Level]++
		}
		for level, n := range perLevel {
			if n >= tiers.Fanout {
				rt.Fatalf("level %d still holds %d deltas after merging with fanout %d: %+v", level, n, tiers.Fanout, deltas)
			}
		}
		if len(m.Garbage) != garbageBefore {
			rt.Fatalf("%d merges grew the garbage list from %d to %d entries; the merged deltas retire their inputs", merges, garbageBefore, len(m.Garbage))
		}
	})
}

// changeRows renders every change row of the table's deltas, in the
// manifest's order of deltas and each file's order of rows.
func changeRows(t testing.TB, store blob.Store, scratch string) []string {
	t.Helper()
	ctx := context.Background()
	m := openCommitter(t.(*testing.T), store.(*memory.Store)).Current()
	var out []string
	for _, d := range m.Tables[testTable.ID.String()].Deltas {
		for _, f := range d.Files {
			local, err := blob.Download(ctx, store, f.Path, scratch, "rows-*")
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(local)
			os.Remove(local)
			if err != nil {
				t.Fatal(err)
			}
			pf, err := parquet.OpenFile(strings.NewReader(string(data)), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			r := parquet.NewReader(pf)
			rows := make([]parquet.Row, 64)
			for {
				n, err := r.ReadRows(rows)
				for _, row := range rows[:n] {
					out = append(out, fmt.Sprint(row))
				}
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			r.Close()
		}
	}
	return out
}

func TestPlanMinor(t *testing.T) {
	d := func(epoch uint64, level, version int, bytes int64) manifest.Delta {
		return manifest.Delta{Epoch: epoch, Level: level, SchemaVersion: version,
			Files: []manifest.File{{Path: fmt.Sprint(epoch), Bytes: bytes}}}
	}
	tiers := compact.Tiers{Fanout: 3, MaxBytes: 100}
	cases := []struct {
		name   string
		deltas []manifest.Delta
		want   []uint64 // epochs merged; nil: none due
	}{
		{"too few", []manifest.Delta{d(1, 0, 1, 10), d(2, 0, 1, 10)}, nil},
		{"the oldest run", []manifest.Delta{d(1, 0, 1, 10), d(2, 0, 1, 10), d(3, 0, 1, 10), d(4, 0, 1, 10)}, []uint64{1, 2, 3}},
		{"levels apart", []manifest.Delta{d(3, 1, 1, 30), d(4, 0, 1, 10), d(5, 0, 1, 10), d(6, 1, 1, 10)}, nil},
		{"a higher level first", []manifest.Delta{d(3, 1, 1, 30), d(6, 1, 1, 30), d(9, 1, 1, 30), d(10, 0, 1, 10)}, []uint64{3, 6, 9}},
		{"schema versions apart", []manifest.Delta{d(1, 0, 1, 10), d(2, 0, 2, 10), d(3, 0, 2, 10), d(4, 0, 2, 10)}, []uint64{2, 3, 4}},
		{"a schema version splits a run", []manifest.Delta{d(1, 0, 1, 10), d(2, 0, 1, 10), d(3, 0, 2, 10), d(4, 0, 2, 10)}, nil},
		{"too big to merge", []manifest.Delta{d(1, 0, 1, 10), d(2, 0, 1, 200), d(3, 0, 1, 10), d(4, 0, 1, 10)}, nil},
		{"after a big one", []manifest.Delta{d(1, 0, 1, 200), d(2, 0, 1, 10), d(3, 0, 1, 10), d(4, 0, 1, 10)}, []uint64{2, 3, 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []uint64
			for _, x := range compact.PlanMinorForTest(c.deltas, tiers) {
				got = append(got, x.Epoch)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("merged epochs %v, want %v", got, c.want)
			}
		})
	}
}

// A major compaction that folds the deltas while a minor one merges them
// wins: the minor one commits nothing for the table, and the state is the
// major one's.
func TestMinorRacedByMajor(t *testing.T) {
	store := memory.New()
	newManifest(t, store)
	for i := range 4 {
		writeDelta(t, store, []change{{op: cdc.OpInsert, lsn: int64(10 * (i + 1)), seq: 1, id: int64(i), a: int64(i), big: "x"}})
	}
	hooked := &hookStore{Store: store, before: func() {
		mc := openCommitter(t, store)
		if _, err := compact.Table(context.Background(), store, mc, testTable.ID, compact.Options{ScratchDir: t.TempDir(), Log: quiet}); err != nil {
			t.Fatal(err)
		}
	}}
	results, err := compact.Minor(context.Background(), hooked, openCommitter(t, store), compact.Tiers{Fanout: 4}, compact.Options{ScratchDir: t.TempDir(), Log: quiet})
	if err != nil || len(results) != 0 {
		t.Fatalf("minor raced by a major compaction: %+v, %v; want nothing merged, no error", results, err)
	}
	m := openCommitter(t, store).Current()
	if m.Version != 6 { // the 4 deltas (2 to 5), the major (6), and no empty write after
		t.Fatalf("manifest at version %d after the race; want 6: a minor compaction with nothing left wrote a version", m.Version)
	}
	if tab := m.Tables[testTable.ID.String()]; len(tab.Deltas) != 0 || tab.Base == nil || tab.Base.Epoch != 4 {
		t.Fatalf("after the race: base %+v, deltas %+v; want the major compaction's base of epoch 4 alone", tab.Base, tab.Deltas)
	}
	for _, g := range m.Garbage {
		if strings.Contains(g.Path, "/from-") {
			t.Fatalf("the minor compaction that gave up left %s in garbage", g.Path)
		}
	}
	want := map[int64]stateRow{0: {a: 0, big: "x"}, 1: {a: 1, big: "x"}, 2: {a: 2, big: "x"}, 3: {a: 3, big: "x"}}
	if got := mergedState(t, store, t.TempDir()); !maps.Equal(got, want) {
		t.Fatalf("merged state %v, want %v", got, want)
	}
}

// The state as of an epoch a merge holds inside its range is refused with a
// message naming the range (pg-cdc dump --epoch); as of the range's end it
// reads the merged file.
func TestMinorEpochBounds(t *testing.T) {
	store := memory.New()
	newManifest(t, store)
	for i := range 3 {
		writeDelta(t, store, []change{{op: cdc.OpInsert, lsn: int64(10 * (i + 1)), seq: 1, id: int64(i), a: int64(i), big: "x"}})
	}
	if results, err := compact.Minor(context.Background(), store, openCommitter(t, store), compact.Tiers{Fanout: 3}, compact.Options{ScratchDir: t.TempDir(), Log: quiet}); err != nil || len(results) != 1 {
		t.Fatalf("minor: %+v, %v", results, err)
	}
	mt := openCommitter(t, store).Current().Tables[testTable.ID.String()]
	two := uint64(2)
	_, err := merge.Open(context.Background(), store, mt, merge.Options{ScratchDir: t.TempDir(), UpToEpoch: &two})
	if err == nil || !strings.Contains(err.Error(), "epoch 2 was merged with epochs 1 to 3") {
		t.Fatalf("the state as of epoch 2, inside a merged range: %v", err)
	}
	three := uint64(3)
	r, err := merge.Open(context.Background(), store, mt, merge.Options{ScratchDir: t.TempDir(), UpToEpoch: &three})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		if _, err := r.Next(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("the state as of epoch 3: %d rows, want 3", n)
	}
}

// The files a minor compaction merged are listed nowhere, yet collection
// keeps them as retired files for the retention (a version that names
// them stays readable), then deletes them; a major compaction that folds
// the merged delta keeps them covered through its garbage entry; the
// merged file itself is never taken for an orphan.
func TestCollectKeepsMergedInputs(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	newManifest(t, store)
	for i := range 4 {
		writeDelta(t, store, []change{{op: cdc.OpInsert, lsn: int64(10 * (i + 1)), seq: 1, id: int64(i), a: int64(i), big: "x"}})
	}
	inputs := []string{}
	for _, d := range openCommitter(t, store).Current().Tables[testTable.ID.String()].Deltas {
		inputs = append(inputs, d.Files[0].Path)
	}
	merged := time.Now()
	if results, err := compact.Minor(ctx, store, openCommitter(t, store), compact.Tiers{Fanout: 4}, compact.Options{ScratchDir: t.TempDir(), Log: quiet, Now: func() time.Time { return merged }}); err != nil || len(results) != 1 {
		t.Fatalf("minor: %+v, %v", results, err)
	}
	mergedKey := manifest.MergedKey(testTable.ID, gen, 1, 4, 0)
	present := func(key string) bool {
		_, err := store.Get(ctx, key)
		return err == nil
	}
	collect := func(at time.Time) compact.CollectResult {
		t.Helper()
		res, err := compact.Collect(ctx, store, openCommitter(t, store), compact.CollectOptions{Grace: time.Hour, Retention: 2 * time.Hour, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Past the grace period, inside the retention: every input waits.
	if res := collect(merged.Add(90 * time.Minute)); res.Retired != 0 || res.Orphans != 0 || res.Waiting != 4 {
		t.Fatalf("inside the retention: %+v; want the 4 inputs waiting", res)
	}
	for _, k := range append(inputs, mergedKey) {
		if !present(k) {
			t.Fatalf("%s was deleted inside the retention", k)
		}
	}
	// A major compaction folds the merged delta: its garbage entry now
	// stands for the inputs too.
	if _, err := compact.Table(ctx, store, openCommitter(t, store), testTable.ID, compact.Options{ScratchDir: t.TempDir(), Log: quiet, Now: func() time.Time { return merged.Add(100 * time.Minute) }}); err != nil {
		t.Fatal(err)
	}
	if res := collect(merged.Add(150 * time.Minute)); res.Retired != 0 || res.Orphans != 0 {
		t.Fatalf("past the merge's retention, inside the major's: %+v; want nothing deleted", res)
	}
	for _, k := range append(inputs, mergedKey) {
		if !present(k) {
			t.Fatalf("%s was deleted inside the retention of the major compaction that folded its rows", k)
		}
	}
	if res := collect(merged.Add(5 * time.Hour)); res.Retired != 5 || res.Orphans != 0 {
		t.Fatalf("past every retention: %+v; want the merged file and its 4 inputs deleted as retired", res)
	}
	for _, k := range append(inputs, mergedKey) {
		if present(k) {
			t.Fatalf("%s survived past every retention", k)
		}
	}
	if got := mergedState(t, store, t.TempDir()); len(got) != 4 {
		t.Fatalf("merged state after collection: %v", got)
	}
}

// pg-cdc compact beside start's compaction: a table the other one
// compacted first is compacted again from its base, not reported failed.
func TestPassRetriesConcurrentCompaction(t *testing.T) {
	store := memory.New()
	newManifest(t, store)
	writeDelta(t, store, []change{{op: cdc.OpInsert, lsn: 10, seq: 1, id: 1, a: 1, big: "x"}})
	hooked := &hookStore{Store: store, before: func() {
		if _, err := compact.Table(context.Background(), store, openCommitter(t, store), testTable.ID, compact.Options{ScratchDir: t.TempDir(), Log: quiet}); err != nil {
			t.Fatal(err)
		}
		writeDelta(t, store, []change{{op: cdc.OpUpdate, lsn: 20, seq: 1, id: 1, a: 2, big: "y"}})
	}}
	results, _, err := compact.Pass(context.Background(), hooked, openCommitter(t, store), nil, compact.Options{ScratchDir: t.TempDir(), Log: quiet}, time.Hour)
	if err != nil {
		t.Fatalf("a pass raced by another compaction: %v", err)
	}
	tab := openCommitter(t, store).Current().Tables[testTable.ID.String()]
	if len(results) != 1 || results[0].Epoch != 2 || len(tab.Deltas) != 0 || tab.Base.Epoch != 2 {
		t.Fatalf("results %+v, base %+v, deltas %+v; want the retry to fold epoch 2 onto the other compaction's base", results, tab.Base, tab.Deltas)
	}
	if got := mergedState(t, store, t.TempDir()); !maps.Equal(got, map[int64]stateRow{1: {a: 2, big: "y"}}) {
		t.Fatalf("merged state %v", got)
	}
}

// Every merge of a pass, at every level, lands in one manifest write: the
// streamer writes once a flush, and merges must not double that.
func TestMinorOneCommit(t *testing.T) {
	store := memory.New()
	newManifest(t, store)
	for i := range 8 {
		writeDelta(t, store, []change{{op: cdc.OpInsert, lsn: int64(10 * (i + 1)), seq: 1, id: int64(i), a: int64(i), big: "x"}})
	}
	mc := openCommitter(t, store)
	before := mc.Current().Version
	results, err := compact.Minor(context.Background(), store, mc, compact.Tiers{Fanout: 2}, compact.Options{ScratchDir: t.TempDir(), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	m := openCommitter(t, store).Current()
	if len(results) != 7 || m.Version != before+1 {
		t.Fatalf("%d merges in versions %d to %d; want 7 merges (4+2+1) in one write", len(results), before, m.Version)
	}
	if d := m.Tables[testTable.ID.String()].Deltas; len(d) != 1 || d[0].Level != 3 || d[0].First() != 1 || d[0].Epoch != 8 {
		t.Fatalf("deltas %+v; want one of level 3 holding epochs 1 to 8", d)
	}
}
