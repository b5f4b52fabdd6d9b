package compact_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
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
	res, err := compact.Collect(ctx, store, openCommitter(t, store), compact.CollectOptions{Grace: time.Hour, Now: later})
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

// historyFixture is a sink whose data file f is named by versions 2 (added)
// to 3, and retired by version 4, stamped retiredAt; mid is a time between
// the commits of versions 2 and 3 (split lets a test place the retention
// boundary there).
type historyFixture struct {
	store      *memory.Store
	file       string
	mid        time.Time
	retired    uint64
	versionsAt time.Time // when the last version was committed
}

func newHistoryFixture(t *testing.T, retiredAt func(mid time.Time) time.Time) historyFixture {
	t.Helper()
	ctx := context.Background()
	store := memory.New()
	newManifest(t, store)
	writeDelta(t, store, []change{{op: cdc.OpInsert, lsn: 2000, id: 1, a: 1, big: "x"}}) // version 2
	mc := openCommitter(t, store)
	f := mc.Current().Tables[testTable.ID.String()].Deltas[0].Files[0].Path
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	if _, err := mc.Commit(ctx, func(m *manifest.Manifest) error { m.EndLSN += 8; return nil }); err != nil { // version 3
		t.Fatal(err)
	}
	m, err := mc.Commit(ctx, func(m *manifest.Manifest) error { // version 4: the delta folded away
		mt := m.Tables[testTable.ID.String()]
		mt.Deltas = nil
		m.Garbage = append(m.Garbage, manifest.RetiredFile{Path: f, RetiredAt: retiredAt(mid)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return historyFixture{store: store, file: f, mid: mid, retired: m.Version, versionsAt: time.Now()}
}

func (f historyFixture) collect(t *testing.T, o compact.CollectOptions) compact.CollectResult {
	t.Helper()
	res, err := compact.Collect(context.Background(), f.store, openCommitter(t, f.store), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (f historyFixture) present(t *testing.T) bool {
	t.Helper()
	_, err := f.store.Get(context.Background(), f.file)
	return err == nil
}

// TestCollectRetentionBoundsGrace: a retired file waits for the longer of
// gc.grace_period and history.retention.
func TestCollectRetentionBoundsGrace(t *testing.T) {
	at := func(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }
	for _, tc := range []struct {
		name             string
		grace, retention time.Duration
		after            time.Duration // since the file was retired
		kept             bool
		keepRetired      time.Duration
	}{
		{"retired 2h ago, grace 1h, retention 7d: kept", time.Hour, 7 * 24 * time.Hour, 2 * time.Hour, true, 0},
		{"retired 2h ago, grace 1h, retention 30m: deleted", time.Hour, 30 * time.Minute, 2 * time.Hour, false, 0},
		{"retired 45m ago, grace 1h, retention 30m: kept", time.Hour, 30 * time.Minute, 45 * time.Minute, true, 0},
		{"retired 8d ago, grace 1h, retention 7d: deleted", time.Hour, 7 * 24 * time.Hour, 8 * 24 * time.Hour, false, 0},
		// A catalog's snapshots may name a retired file for their max age
		// more (catalog.Retention).
		{"retired 2h ago, grace 1h, retention 30m, keep retired 3h: kept", time.Hour, 30 * time.Minute, 2 * time.Hour, true, 3 * time.Hour},
		{"retired 4h ago, grace 1h, retention 30m, keep retired 3h: deleted", time.Hour, 30 * time.Minute, 4 * time.Hour, false, 3 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newHistoryFixture(t, func(time.Time) time.Time { return time.Now() })
			res := f.collect(t, compact.CollectOptions{Grace: tc.grace, Retention: tc.retention, KeepRetired: tc.keepRetired, Now: at(tc.after)})
			if f.present(t) != tc.kept {
				t.Errorf("file present %v, want %v (%+v)", !tc.kept, tc.kept, res)
			}
		})
	}
}

// TestCollectKeepsWhatARetainedVersionNames: the age rule alone would
// delete a file whose retirement was stamped before the retention boundary
// (a compaction that ran across it) while a version committed after the
// boundary, still retained, names it. Collect rebuilds the oldest retained
// version and keeps its files.
func TestCollectKeepsWhatARetainedVersionNames(t *testing.T) {
	const retention = 2 * time.Hour
	f := newHistoryFixture(t, func(mid time.Time) time.Time { return mid.Add(-time.Hour) })
	// The boundary falls between versions 2 and 3: version 2 is the one
	// current at it, and it names the file.
	now := func() time.Time { return f.mid.Add(retention) }
	res := f.collect(t, compact.CollectOptions{Grace: time.Minute, Retention: retention, Now: now})
	if !f.present(t) {
		t.Fatalf("the file version 2 names was deleted (%+v)", res)
	}
	if res.Oldest != 2 {
		t.Errorf("oldest readable %d, want 2 (the version current at the boundary, whose files are kept)", res.Oldest)
	}
	// Once the boundary passes version 4, nothing retained names it.
	later := func() time.Time { return f.versionsAt.Add(retention + time.Minute) }
	f.collect(t, compact.CollectOptions{Grace: time.Minute, Retention: retention, Now: later})
	if f.present(t) {
		t.Error("the file is still there after the boundary passed its retirement")
	}
}

// TestCollectKeepsPinnedVersions: a version a ref pins keeps its files and
// stays readable past the retention; without the pin both go.
func TestCollectKeepsPinnedVersions(t *testing.T) {
	ctx := context.Background()
	f := newHistoryFixture(t, func(time.Time) time.Time { return time.Now() })
	mc := openCommitter(t, f.store)
	for range 200 { // versions past 200, so the retained one starts from checkpoint 200
		if _, err := mc.Commit(ctx, func(m *manifest.Manifest) error { m.EndLSN += 8; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	pins := func(context.Context) ([]uint64, error) { return []uint64{2}, nil }
	far := func() time.Time { return time.Now().Add(48 * time.Hour) }
	res := f.collect(t, compact.CollectOptions{Grace: time.Hour, Retention: 30 * time.Minute, Pinned: pins, Now: far})
	if !f.present(t) {
		t.Fatalf("the pinned version's file was deleted (%+v)", res)
	}
	h := manifest.NewHistory(f.store)
	m, err := h.At(ctx, 2)
	if err != nil {
		t.Fatalf("the pinned version is not readable: %v", err)
	}
	if got := m.Tables[testTable.ID.String()].Deltas[0].Files[0].Path; got != f.file {
		t.Errorf("version 2 names %s, want %s", got, f.file)
	}
	if _, err := h.At(ctx, 3); !errors.Is(err, manifest.ErrOutsideRetention) {
		t.Errorf("version 3 (unpinned, past retention): %v, want ErrOutsideRetention", err)
	}
	f.collect(t, compact.CollectOptions{Grace: time.Hour, Retention: 30 * time.Minute, Now: far})
	if f.present(t) {
		t.Error("the file is still there once the pin is gone")
	}
	if _, err := h.At(ctx, 2); !errors.Is(err, manifest.ErrOutsideRetention) {
		t.Errorf("version 2 after the pin is gone: %v, want ErrOutsideRetention", err)
	}
}

// TestCollectPrunesHistory: the log entries of versions older than the
// retention go, except the checkpoint the oldest retained version starts
// from; Oldest moves there, and every later version stays readable.
func TestCollectPrunesHistory(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	newManifest(t, store)
	mc := openCommitter(t, store)
	bump := func(m *manifest.Manifest) error { m.EndLSN += 8; m.Epoch++; return nil }
	var mid time.Time
	for v := 2; v <= 250; v++ {
		if _, err := mc.Commit(ctx, bump); err != nil {
			t.Fatal(err)
		}
		if v == 150 {
			time.Sleep(20 * time.Millisecond)
			mid = time.Now()
			time.Sleep(20 * time.Millisecond)
		}
	}
	h := manifest.NewHistory(store)
	if o, err := h.Oldest(ctx); err != nil || o.Version != 1 {
		t.Fatalf("Oldest before = %+v, %v", o, err)
	}
	res, err := compact.Collect(ctx, store, mc, compact.CollectOptions{Grace: time.Hour, Retention: time.Hour, Now: func() time.Time { return mid.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	// Version 150 is current at the boundary: the oldest a point resolves
	// to (its files are kept); the log keeps its checkpoint, 100's, on.
	if res.Oldest != 150 || res.LogDeleted != 98+1 { // entries 2..99 and version 1's checkpoint
		t.Errorf("collect: %+v; want oldest 150 and 99 log objects deleted", res)
	}
	if o, err := h.Oldest(ctx); err != nil || o.Version != 150 {
		t.Errorf("Oldest after = %+v, %v; want version 150", o, err)
	}
	if _, err := h.Resolve(ctx, manifest.Point{Kind: manifest.PointVersion, Version: 120}); !errors.Is(err, manifest.ErrOutsideRetention) {
		t.Errorf("Resolve(120), whose files are no longer kept: %v, want ErrOutsideRetention", err)
	}
	objects, err := store.List(ctx, manifest.LogPrefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objects {
		if v, _, ok := manifest.ParseLogKey(o.Key); ok && v < 100 {
			t.Errorf("%s survived", o.Key)
		}
	}
	if _, err := h.At(ctx, 99); !errors.Is(err, manifest.ErrOutsideRetention) {
		t.Errorf("At(99) = %v, want ErrOutsideRetention", err)
	}
	for _, v := range []uint64{100, 149, 150, 199, 200, 250} {
		if m, err := h.At(ctx, v); err != nil || m.Version != v {
			t.Errorf("At(%d): %v", v, err)
		}
	}
	// A second collection, with retention ≤ grace, keeps what it kept.
	if res, err := compact.Collect(ctx, store, mc, compact.CollectOptions{Grace: time.Hour, Retention: time.Hour, Now: func() time.Time { return mid.Add(time.Hour) }}); err != nil || res.LogDeleted != 0 || res.Oldest != 150 {
		t.Errorf("second collect: %+v, %v", res, err)
	}
}

// TestCollectKeepsWhatTheCatalogNames: a retired file past every age rule
// is kept while something outside the manifest names it (the snapshots an
// Iceberg catalog retains), and deleted once nothing does; a catalog that
// cannot say stops the collection before it deletes anything.
func TestCollectKeepsWhatTheCatalogNames(t *testing.T) {
	later := func() time.Time { return time.Now().Add(48 * time.Hour) }
	f := newHistoryFixture(t, func(time.Time) time.Time { return time.Now() })
	named := func(context.Context, *manifest.Manifest) (map[string]bool, error) {
		return map[string]bool{f.file: true}, nil
	}
	f.collect(t, compact.CollectOptions{Grace: time.Hour, Retention: time.Hour, Referenced: named, Now: later})
	if !f.present(t) {
		t.Fatal("a file a retained Iceberg snapshot names was deleted")
	}
	down := func(context.Context, *manifest.Manifest) (map[string]bool, error) {
		return nil, errors.New("catalog down")
	}
	if _, err := compact.Collect(context.Background(), f.store, openCommitter(t, f.store), compact.CollectOptions{Grace: time.Hour, Retention: time.Hour, Referenced: down, Now: later}); err == nil || !strings.Contains(err.Error(), "catalog down") {
		t.Errorf("collect with the catalog down: %v", err)
	}
	if !f.present(t) {
		t.Fatal("a collection that could not ask the catalog deleted the file")
	}
	none := func(context.Context, *manifest.Manifest) (map[string]bool, error) { return nil, nil }
	f.collect(t, compact.CollectOptions{Grace: time.Hour, Retention: time.Hour, Referenced: none, Now: later})
	if f.present(t) {
		t.Fatal("a retired file nothing names any more was kept")
	}
}

// TestCollectKeepsAFlushInFlight: a delta file of the epoch after the
// manifest's is a flush's upload not committed yet, kept however old;
// an unnamed delta file of a committed epoch is an orphan.
func TestCollectKeepsAFlushInFlight(t *testing.T) {
	f := newHistoryFixture(t, func(time.Time) time.Time { return time.Now() })
	m := openCommitter(t, f.store).Current()
	inFlight := manifest.FileKey(testTable.ID, gen, manifest.KindDelta, m.Epoch+1, 0)
	orphan := manifest.FileKey(testTable.ID, gen, manifest.KindDelta, m.Epoch, 7)
	for _, k := range []string{inFlight, orphan} {
		if err := f.store.Put(context.Background(), k, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	f.collect(t, compact.CollectOptions{Grace: time.Hour, Retention: time.Hour, Now: func() time.Time { return time.Now().Add(48 * time.Hour) }})
	if _, err := f.store.Get(context.Background(), inFlight); err != nil {
		t.Errorf("a flush's upload of epoch %d (manifest at %d) was collected: %v", m.Epoch+1, m.Epoch, err)
	}
	if _, err := f.store.Get(context.Background(), orphan); err == nil {
		t.Errorf("an orphan of committed epoch %d was kept", m.Epoch)
	}
}
