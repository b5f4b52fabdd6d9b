package verify

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

const gen = "g0001"

// version is one change row of the test table in the sink.
type version struct {
	op  cdc.Op
	xid cdc.XID
	lsn int64
	r   tr
}

// sink is an in-memory sink holding the test table.
type sink struct {
	t     *testing.T
	store *memory.Store
}

func newSink(t *testing.T, base []tr) *sink {
	t.Helper()
	s := &sink{t: t, store: memory.New()}
	schema, err := parquetfile.NewSchema(testTable)
	if err != nil {
		t.Fatal(err)
	}
	var vs []version
	for _, r := range base {
		vs = append(vs, version{op: cdc.OpInsert, lsn: 1, r: r})
	}
	key := manifest.FileKey(testTable.ID, gen, manifest.KindBase, 0, 0)
	n := s.put(key, vs)
	m := &manifest.Manifest{
		Source: manifest.Source{SystemIdentifier: "1", Database: "db", Slot: "s", Publication: "p"},
		EndLSN: 1,
		Tables: map[string]*manifest.Table{
			testTable.ID.String(): {
				Schema: "public", Name: "t", OID: testTable.OID, Generation: gen,
				PrimaryKey: []string{"id"}, ReplicaIdentity: "default", SchemaVersion: 1,
				Schemas:  []manifest.SchemaVersion{{Version: 1, Columns: schema.ManifestColumns(testTable)}},
				Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete, LSN: 1},
				Base:     &manifest.Base{Epoch: 0, MaxLSN: 1, RowCount: int64(len(base)), Files: []manifest.File{{Path: key, Rows: int64(len(base)), Bytes: n}}},
			},
		},
	}
	if _, err := manifest.Create(context.Background(), s.store, m, time.Now()); err != nil {
		t.Fatal(err)
	}
	return s
}

// put writes versions as one Parquet file and returns its size.
func (s *sink) put(key string, vs []version) int64 {
	s.t.Helper()
	schema, err := parquetfile.NewSchema(testTable)
	if err != nil {
		s.t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, schema)
	for i, v := range vs {
		vals := []cdc.Datum{datum(p(strconv.FormatInt(v.r.id, 10))), datum(v.r.f), datum(v.r.s), datum(v.r.arr)}
		if v.r.unset {
			vals[2] = cdc.Datum{Kind: cdc.DatumUnchanged}
		}
		if v.op == cdc.OpDelete {
			vals = []cdc.Datum{vals[0], {}, {}, {}}
		}
		meta := cdc.RowMeta{Op: v.op, LSN: cdc.LSN(v.lsn), Seq: int64(i), XID: v.xid, CommitTime: time.UnixMicro(v.lsn)}
		if err := w.Write(meta, vals); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		s.t.Fatal(err)
	}
	if err := s.store.Put(context.Background(), key, bytes.NewReader(buf.Bytes())); err != nil {
		s.t.Fatal(err)
	}
	return int64(buf.Len())
}

// delta commits versions as the next epoch's delta, the way a flush does.
func (s *sink) delta(vs ...version) {
	s.t.Helper()
	ctx := context.Background()
	mc, err := manifest.Open(ctx, s.store, manifest.Breaker{})
	if err != nil {
		s.t.Fatal(err)
	}
	epoch := mc.Current().Epoch + 1
	key := manifest.FileKey(testTable.ID, gen, manifest.KindDelta, epoch, 0)
	n := s.put(key, vs)
	var maxLSN int64
	for _, v := range vs {
		maxLSN = max(maxLSN, v.lsn)
	}
	_, err = mc.Commit(ctx, func(m *manifest.Manifest) error {
		mt := m.Tables[testTable.ID.String()]
		mt.Deltas = append(mt.Deltas, manifest.Delta{Epoch: epoch, MinLSN: cdc.LSN(vs[0].lsn), MaxLSN: cdc.LSN(maxLSN), Rows: int64(len(vs)), SchemaVersion: 1,
			Files: []manifest.File{{Path: key, Rows: int64(len(vs)), Bytes: n}}})
		m.Epoch = epoch
		m.EndLSN = max(m.EndLSN, cdc.LSN(maxLSN))
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// advance records an idle position, as the streamer does past a watermark.
func (s *sink) advance(lsn cdc.LSN) {
	s.t.Helper()
	ctx := context.Background()
	mc, err := manifest.Open(ctx, s.store, manifest.Breaker{})
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := mc.Commit(ctx, func(m *manifest.Manifest) error { m.EndLSN = max(m.EndLSN, lsn); return nil }); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sink) compact() {
	s.t.Helper()
	ctx := context.Background()
	mc, err := compact.NewCommitter(ctx, s.store)
	if err != nil {
		s.t.Fatal(err)
	}
	res, err := compact.Table(ctx, s.store, mc, testTable.ID, compact.Options{ScratchDir: s.t.TempDir(), Log: quiet()})
	if err != nil || res.Skipped != "" {
		s.t.Fatalf("compact: %+v %v", res, err)
	}
}

// source is a fake Source: a fixed snapshot and its rows.
type source struct {
	snap   cdc.Snapshot
	rows   []tr
	lsn    cdc.LSN
	onEmit func(round int) // the streamer (and compaction) between snapshot and watermark
	rounds int
	closed int
	// next is the snapshot and rows of the next BeginSnapshot.
	next *source
}

func (s *source) BeginSnapshot(_ context.Context, tables []cdc.TableID, lockTimeout time.Duration) (Snapshot, error) {
	if len(tables) != 1 || tables[0] != testTable.ID || lockTimeout != DefaultLockTimeout {
		return nil, errors.New("unexpected tables to lock")
	}
	s.rounds++
	if s.next != nil {
		s.snap, s.rows = s.next.snap, s.next.rows
		s.next = nil
	}
	return s, nil
}

func (s *source) EmitMessage(_ context.Context, prefix, content string) (cdc.LSN, error) {
	if prefix != control.PrefixWatermark || content != s.snap.String() {
		return 0, errors.New("unexpected message")
	}
	s.lsn += 100
	if s.onEmit != nil {
		s.onEmit(s.rounds)
	}
	return s.lsn, nil
}

func (s *source) Current() cdc.Snapshot { return s.snap }

func (s *source) CopyTable(_ context.Context, t *cdc.Table, fn func([]cdc.Datum) error) (int64, error) {
	if t.ID != testTable.ID || len(t.Columns) != 4 {
		return 0, errors.New("unexpected table")
	}
	for _, r := range s.rows {
		if err := fn([]cdc.Datum{datum(p(strconv.FormatInt(r.id, 10))), datum(r.f), datum(r.s), datum(r.arr)}); err != nil {
			return 0, err
		}
	}
	return int64(len(s.rows)), nil
}

func (s *source) Close() error { s.closed++; return nil }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func options(t *testing.T) Options {
	return Options{ScratchDir: t.TempDir(), MemoryBytes: 1 << 20, Wait: 5 * time.Second, Poll: time.Millisecond, Log: quiet()}
}

// TestRunAsOfSnapshot: the sink holds versions the snapshot does not see
// (a transaction in progress, one begun after); verify compares as of the
// snapshot and finds the sides equal, then finds a difference once the
// source's rows differ.
func TestRunAsOfSnapshot(t *testing.T) {
	s := newSink(t, plain(seq(1, 5)...))
	snap := cdc.Snapshot{Xmin: 100, Xmax: 105, Xip: []cdc.XID{102}}
	s.delta(
		version{op: cdc.OpUpdate, xid: 99, lsn: 10, r: tr{id: 1, f: p("9"), s: p("seen"), arr: p("{1,2}")}},
		version{op: cdc.OpUpdate, xid: 101, lsn: 11, r: tr{id: 4, f: p("1.5"), unset: true, arr: p("{4}")}},
	)
	s.delta(
		version{op: cdc.OpUpdate, xid: 102, lsn: 20, r: tr{id: 2, f: p("2"), s: p("in progress")}}, // invisible
		version{op: cdc.OpDelete, xid: 102, lsn: 20, r: tr{id: 3}},                                 // invisible
		version{op: cdc.OpInsert, xid: 106, lsn: 30, r: tr{id: 6, s: p("after")}},                  // invisible
		version{op: cdc.OpDelete, xid: 103, lsn: 25, r: tr{id: 5}},                                 // seen
	)
	want := plain(1, 2, 3, 4)
	want[0].f, want[0].s = p("9"), p("seen")
	want[3].arr = p("{4}")
	src := &source{snap: snap, rows: want, lsn: 1000}
	src.onEmit = func(int) { s.advance(src.lsn) }

	rep, err := Run(context.Background(), src, s.store, nil, options(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != 1 || rep.Differs() {
		t.Fatalf("report: %+v", rep)
	}
	r := rep.Tables[0]
	if r.Table != "public.t" || r.SourceRows != 4 || r.SinkRows != 4 || r.Matching != 4 ||
		r.Snapshot != "100:105:102" || r.Newer != 3 || r.Watermark != 1100 || r.EndLSN < 1100 || strings.Join(r.Key, ",") != "id" {
		t.Errorf("result: %+v", r)
	}
	if src.closed != 1 {
		t.Errorf("snapshot closed %d times", src.closed)
	}

	// The source has lost a row and changed another.
	src.rows = append([]tr(nil), want[1:]...)
	src.rows[0].s = p("edited") // id 2, next to the lost id 1: one range
	rep, err = Run(context.Background(), src, s.store, []cdc.TableID{testTable.ID}, options(t))
	if err != nil {
		t.Fatal(err)
	}
	r = rep.Tables[0]
	if !rep.Differs() || r.Extra != 1 || r.Changed != 1 || r.Matching != 2 || len(r.Ranges) != 1 ||
		r.Ranges[0].First != "(id)=(1)" || r.Ranges[0].Last != "(id)=(2)" {
		t.Errorf("result: %+v", r)
	}
}

// TestRunCompactionWhileWaiting: compaction folds versions the snapshot
// does not see into the base while verify waits for its watermark; the
// first round must not use that base, and the second round (a new
// snapshot that sees them) compares equal.
func TestRunCompactionWhileWaiting(t *testing.T) {
	s := newSink(t, plain(seq(1, 3)...))
	old := cdc.Snapshot{Xmin: 100, Xmax: 100}
	src := &source{snap: old, rows: plain(seq(1, 3)...), lsn: 1000}
	src.onEmit = func(round int) {
		if round == 1 {
			// Committed after the snapshot, streamed, then compacted.
			s.delta(version{op: cdc.OpDelete, xid: 100, lsn: 50, r: tr{id: 2}})
			s.compact()
			// The next snapshot sees transaction 100.
			src.next = &source{snap: cdc.Snapshot{Xmin: 101, Xmax: 101}, rows: plain(1, 3)}
		}
		s.advance(src.lsn)
	}
	rep, err := Run(context.Background(), src, s.store, nil, options(t))
	if err != nil {
		t.Fatal(err)
	}
	if src.rounds != 2 || src.closed != 2 {
		t.Errorf("%d rounds, %d snapshots closed; want 2", src.rounds, src.closed)
	}
	if len(rep.Tables) != 1 || rep.Differs() || rep.Tables[0].Matching != 2 || rep.Tables[0].Snapshot != "101:101:" {
		t.Errorf("report: %+v", rep)
	}

	// Compaction in every round: verify gives up after Rounds.
	src.onEmit = func(int) {
		s.delta(version{op: cdc.OpUpdate, xid: src.snap.Xmax, lsn: int64(src.lsn), r: tr{id: 1, s: p("again")}})
		s.compact()
		s.advance(src.lsn)
	}
	src.rounds = 0
	opts := options(t)
	opts.Rounds = 2
	_, err = Run(context.Background(), src, s.store, nil, opts)
	if err == nil || !strings.Contains(err.Error(), "compaction replaced") || src.rounds != 2 {
		t.Errorf("after %d rounds: %v", src.rounds, err)
	}
}

func TestRunWatermarkTimeout(t *testing.T) {
	s := newSink(t, plain(1))
	src := &source{snap: cdc.Snapshot{Xmin: 5, Xmax: 5}, rows: plain(1), lsn: 1000}
	opts := options(t)
	opts.Wait = 50 * time.Millisecond
	_, err := Run(context.Background(), src, s.store, nil, opts)
	if !errors.Is(err, ErrWatermark) || !strings.Contains(err.Error(), "0/1 (it did not move), short of the watermark 0/44C") ||
		!strings.Contains(cdc.HintOf(err), "pg-cdc start") {
		t.Errorf("got %v (hint %q)", err, cdc.HintOf(err))
	}
	if src.closed != 1 {
		t.Errorf("snapshot closed %d times", src.closed)
	}
}
