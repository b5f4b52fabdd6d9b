package replicate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/backfill"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// fakeChunks serves scripted chunks of public.items. Before each marker it
// pushes the transactions the script gives for that chunk, as if they had
// committed between the chunk's snapshot and its marker, then the marker.
type fakeChunks struct {
	src    *fakeSource
	ready  chan struct{} // closed once src is set
	snap   cdc.Snapshot
	chunks [][]string // ids per chunk; v is "copy-<id>"
	before [][]Message
	marker []cdc.LSN

	mu     sync.Mutex
	n      int
	afters [][]string
}

func (f *fakeChunks) ReadChunk(_ context.Context, t *cdc.Table, after []string, limit int, fn func([]cdc.Datum) error) (cdc.Snapshot, int64, error) {
	f.mu.Lock()
	n := f.n
	f.afters = append(f.afters, slices.Clone(after))
	f.mu.Unlock()
	var rows int64
	for _, id := range f.chunks[n] {
		if err := fn([]cdc.Datum{{Kind: cdc.DatumText, Text: []byte(id)}, {Kind: cdc.DatumText, Text: []byte("copy-" + id)}}); err != nil {
			return cdc.Snapshot{}, rows, err
		}
		rows++
	}
	return f.snap, rows, nil
}

func (f *fakeChunks) EmitMarker(ctx context.Context, prefix, content string) (cdc.LSN, error) {
	select {
	case <-f.ready:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	f.mu.Lock()
	n := f.n
	f.n++
	f.mu.Unlock()
	f.src.push(f.before[n]...)
	f.src.push(data(pgLogical(0, false, false, f.marker[n], prefix, content))...)
	return f.marker[n], nil
}

func (f *fakeChunks) EstimateRows(context.Context, cdc.TableID) (int64, error) { return 3, nil }

// TestBackfillPlacement drives the loop and its chunk worker (under -race
// in make test) through a two-chunk backfill of public.items. Between the
// first chunk's snapshot (it sees xids below 600) and its marker, two
// transactions commit: 550 (visible: the chunk already reflects it, so the
// chunk row of id 1 comes after its update) and 650 (invisible: the chunk
// row of id 2 goes just before its delete, which then removes it).
func TestBackfillPlacement(t *testing.T) {
	const (
		l1, l2, m1, m2 cdc.LSN = startLSN + 0x100, startLSN + 0x200, startLSN + 0x300, startLSN + 0x400
	)
	fc := &fakeChunks{
		snap:   cdc.Snapshot{Xmin: 600, Xmax: 600},
		chunks: [][]string{{"1", "2"}, {"3"}},
		marker: []cdc.LSN{m1, m2},
		ready:  make(chan struct{}),
	}
	fc.before = [][]Message{
		append(tx(550, l1, itemsRel(0, false), pgUpdate(0, false, itemsOID, 0, nil, []col{txt("1"), txt("vis")})),
			tx(650, l2, itemsRel(0, false), pgDelete(0, false, itemsOID, 'K', txt("2"), null))...),
		nil,
	}
	h := start(t, options{chunks: fc, chunkRows: 2, manifest: func(m *manifest.Manifest) {
		mt := m.Tables["public.items"]
		mt.Snapshot = manifest.Snapshot{State: manifest.SnapshotPending}
		mt.Base = nil
	}})
	fc.src = h.src
	close(fc.ready)
	h.waitFor("the backfill to be placed", func() bool {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		return fc.n == 2
	})
	h.waitTurns(3)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	m := h.manifest()
	got := h.rows(m, "public.items", 1)
	want := []string{
		row("U", "1", "vis", l1, 0, 550),
		row("D", "2", "null", l2, 0, 650),
		row("I", "1", "copy-1", m1, -2, 0), // after the visible update
		row("I", "2", "copy-2", l2, -1, 0), // before the invisible delete
		row("I", "3", "copy-3", m2, -1, 0),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	s := m.Tables["public.items"].Snapshot
	if s.State != manifest.SnapshotComplete || s.LSN != m2 || s.RowsCopied != 3 || s.Chunks != 2 || !slices.Equal(s.LastKey, []string{"3"}) || s.RowsEstimate != 3 {
		t.Errorf("snapshot progress: %+v", s)
	}
	if !slices.EqualFunc(fc.afters, [][]string{nil, {"2"}}, slices.Equal) {
		t.Errorf("chunks read after %v, want [[] [2]]", fc.afters)
	}
}

// TestPruneEarly: while a chunk waits for its marker (a backlog being
// read), the trackers are pruned with its snapshot once they grow past
// pruneAt: the changes it sees go, the ones it does not stay for placement.
func TestPruneEarly(t *testing.T) {
	tr := backfill.NewTracker()
	s := &Service{bf: &backfills{h: newHandoff(), trackers: map[cdc.TableID]*backfill.Tracker{{Schema: "public", Name: "items"}: tr}, pruneAt: 4}}
	for i := range 3 {
		tr.Change(fmt.Sprint(i), cdc.XID(100+i), startLSN)
	}
	tr.Change("late", 700, startLSN)
	s.pruneEarly() // no pending chunk: nothing to prune with
	if tr.Len() != 4 || s.bf.pruneAt <= 4 {
		t.Fatalf("without a pending chunk: %d kept, next at %d", tr.Len(), s.bf.pruneAt)
	}
	s.bf.h.park(&chunk{snap: cdc.Snapshot{Xmin: 600, Xmax: 600}})
	s.pruneEarly()
	if tr.Len() != 1 || s.bf.pruneAt != pruneFloor {
		t.Fatalf("with a pending chunk: %d kept (want the invisible one), next at %d", tr.Len(), s.bf.pruneAt)
	}
}

// TestResnapshotSwitch: a resnapshot request found in the manifest at
// start is built beside the current generation (streamed rows written to
// both), switched in the manifest write of its last chunk, and later
// changes go to the new generation only.
func TestResnapshotSwitch(t *testing.T) {
	const l1, m1, l2 cdc.LSN = startLSN + 0x100, startLSN + 0x200, startLSN + 0x300
	fc := &fakeChunks{
		snap:   cdc.Snapshot{Xmin: 600, Xmax: 600},
		chunks: [][]string{{"1", "2"}},
		marker: []cdc.LSN{m1},
		ready:  make(chan struct{}),
		before: [][]Message{tx(550, l1, itemsRel(0, false), pgInsert(0, false, itemsOID, txt("5"), txt("streamed")))},
	}
	h := start(t, options{chunks: fc, chunkRows: 3, manifest: func(m *manifest.Manifest) {
		m.Tables["public.items"].Resnapshot = &manifest.Resnapshot{Generation: "g0002", RequestedAt: baseTime,
			Snapshot: manifest.Snapshot{State: manifest.SnapshotPending}, Deltas: []manifest.Delta{}}
	}})
	fc.src = h.src
	close(fc.ready)
	h.waitFor("the switch", func() bool {
		mt := h.manifest().Tables["public.items"]
		return mt.Generation == "g0002"
	})
	h.push(tx(551, l2, itemsRel(0, false), pgInsert(0, false, itemsOID, txt("6"), txt("after")))...)
	h.waitIdle()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	m := h.manifest()
	mt := m.Tables["public.items"]
	if mt.Resnapshot != nil || mt.Base != nil || !mt.Snapshot.Complete() || mt.Snapshot.LSN != m1 || mt.Snapshot.RowsCopied != 2 {
		t.Fatalf("after the switch: resnapshot %+v, base %+v, snapshot %+v", mt.Resnapshot, mt.Base, mt.Snapshot)
	}
	var got []string
	for _, d := range mt.Deltas {
		for _, f := range d.Files {
			if !strings.Contains(f.Path, "/g0002/") {
				t.Errorf("the new generation names %s", f.Path)
			}
			for _, r := range h.readFile(f.Path) {
				got = append(got, r.String())
			}
		}
	}
	want := []string{
		row("I", "5", "streamed", l1, 0, 550), // streamed while building: in the new generation too
		row("I", "1", "copy-1", m1, -2, 0),
		row("I", "2", "copy-2", m1, -1, 0),
		row("I", "6", "after", l2, 0, 551), // after the switch: only here
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("new generation rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	retired := 0
	for _, g := range m.Garbage {
		if !strings.Contains(g.Path, "/g0001/") {
			t.Errorf("garbage %s is not of the old generation", g.Path)
		}
		retired++
	}
	if retired != 1 {
		t.Errorf("%d files retired, want the old generation's delta of epoch 1", retired)
	}
}

// TestNextChunkRows: chunks hold about chunkBytes, at most chunk_rows.
func TestNextChunkRows(t *testing.T) {
	for _, tc := range []struct {
		max, rows int
		size      int64
		want      int
	}{
		{50_000, 1000, 1000 * 100, 50_000},   // narrow rows: chunk_rows
		{50_000, 1000, 1000 * 8192, 4096},    // 8 KB rows: 32 MiB / 8 KiB
		{50_000, 1000, 1000 * (64 << 20), 1}, // huge rows: one at a time
		{50_000, 0, 0, 50_000},               // nothing read: no measure
		{200, 200, 200 * 100, 200},           // small chunk_rows stays
	} {
		if got := nextChunkRows(tc.max, tc.rows, tc.size); got != tc.want {
			t.Errorf("nextChunkRows(%d, %d, %d) = %d, want %d", tc.max, tc.rows, tc.size, got, tc.want)
		}
	}
}
