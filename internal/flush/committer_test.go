package flush

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errSink = errors.New("sink unreachable")

// watchedSink is the in-memory store, recording the order of writes and
// checking at every manifest write that each file it names is stored
// already (files before manifest, design.md §1).
type watchedSink struct {
	*memory.Store
	failKey string // a Put of this key fails with errSink
	// When overlap is set, a Put waits (up to a few seconds) until overlap
	// Puts are in flight or all of the expected ones have started, and
	// then stays in flight for hold: uploads overlap as far as Workers
	// lets them, whatever the scheduling.
	overlap, expect int
	hold            time.Duration

	mu          sync.Mutex
	puts        []string // keys of successful Puts, in order
	manifests   int      // successful manifest writes
	started     int
	inFlight    int
	maxInFlight int
	problems    []string
}

func (s *watchedSink) Put(ctx context.Context, key string, r io.Reader) error {
	s.mu.Lock()
	s.inFlight++
	s.started++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if s.overlap > 0 {
		s.rendezvous()
		time.Sleep(s.hold)
	}
	if key == s.failKey {
		return fmt.Errorf("put %s: %w", key, errSink)
	}
	if err := s.Store.Put(ctx, key, r); err != nil {
		return err
	}
	s.mu.Lock()
	s.puts = append(s.puts, key)
	s.mu.Unlock()
	return nil
}

func (s *watchedSink) rendezvous() {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.Lock()
		done := s.inFlight >= s.overlap || s.started >= s.expect
		s.mu.Unlock()
		if done {
			return
		}
	}
}

func (s *watchedSink) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (blob.Version, error) {
	if key == manifest.Key {
		m, err := manifest.Decode(data)
		if err != nil {
			return "", err
		}
		for _, t := range m.Tables {
			for _, d := range t.Deltas {
				for _, f := range d.Files {
					if _, err := s.Store.Get(ctx, f.Path); err != nil {
						s.mu.Lock()
						s.problems = append(s.problems, fmt.Sprintf("manifest epoch %d names %s before it is stored", m.Epoch, f.Path))
						s.mu.Unlock()
					}
				}
			}
		}
	}
	v, err := s.Store.PutIf(ctx, key, data, expected)
	if err == nil && key == manifest.Key {
		s.mu.Lock()
		s.manifests++
		s.mu.Unlock()
	}
	return v, err
}

const (
	oidInt4 = 23
	oidInt8 = 20
	oidText = 25
)

func testTable(name string, oid uint32) *manifest.Table {
	return &manifest.Table{
		Schema: "public", Name: name, OID: oid, Generation: "g0001",
		PrimaryKey: []string{"id"}, ReplicaIdentity: "default", SchemaVersion: 1,
		Schemas: []manifest.SchemaVersion{{Version: 1, Columns: []manifest.Column{
			{Name: "id", PGType: "bigint", ParquetType: "INT64", FieldID: 1, TypeOID: oidInt8, TypeMod: -1},
			{Name: "v", PGType: "text", ParquetType: "STRING", Nullable: true, FieldID: 2, TypeOID: oidText, TypeMod: -1},
		}}},
		Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete, LSN: 0x1000},
		Base:     &manifest.Base{MaxLSN: 0x1000, Files: []manifest.File{}},
		Deltas:   []manifest.Delta{},
	}
}

var flushedAt = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

// newCommitter creates a manifest at epoch 3 holding public.items and
// public.other, and a Committer on sink.
func newCommitter(t *testing.T, sink *watchedSink) *Committer {
	t.Helper()
	m := &manifest.Manifest{
		Source: manifest.Source{SystemIdentifier: "7440312345678901234", Timeline: 1, Database: "app", Slot: "s", Publication: "p"},
		Epoch:  3, EndLSN: 0x3000,
		Tables: map[string]*manifest.Table{
			"public.items": testTable("items", 16384),
			"public.other": testTable("other", 16390),
		},
		History: []manifest.EpochRecord{{Epoch: 3, EndLSN: 0x3000}},
	}
	mc, err := manifest.Create(context.Background(), sink, m, flushedAt.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	sink.manifests = 0 // count the flush's writes only
	return &Committer{Store: sink, Manifest: mc, Workers: 2, Now: func() time.Time { return flushedAt.In(time.FixedZone("CET", 3600)) }}
}

func sourceTable(t *testing.T, c *Committer, name string) *cdc.Table {
	t.Helper()
	st, err := c.Manifest.Current().Tables["public."+name].SourceTable()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func row(t *testing.T, e *Epoch, table *cdc.Table, lsn cdc.LSN, seq int64, values ...string) {
	t.Helper()
	var ds []cdc.Datum
	for _, v := range values {
		ds = append(ds, cdc.Datum{Kind: cdc.DatumText, Text: []byte(v)})
	}
	meta := cdc.RowMeta{Op: cdc.OpInsert, LSN: lsn, Seq: seq, XID: 700, CommitTime: flushedAt.Add(-time.Second)}
	if err := e.Write(meta, &cdc.Change{Table: table, Op: cdc.OpInsert, Values: ds}); err != nil {
		t.Fatal(err)
	}
}

// spoolFiles lists the epoch's files left in the state directory.
func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// epochFour fills epoch 4 under dir: a transaction writing items and
// other, then one writing items under a schema version 2 that starts in
// the epoch (a second file for items), and an Also edit. It returns the
// epoch and its newest commit time.
func epochFour(t *testing.T, c *Committer, dir string) (*Epoch, time.Time) {
	t.Helper()
	items, other := sourceTable(t, c, "items"), sourceTable(t, c, "other")
	items2 := *items
	items2.SchemaVersion = 2
	items2.Columns = append(append([]cdc.Column(nil), items.Columns...), cdc.Column{Name: "n", TypeOID: oidInt4, TypeMod: -1, PGType: "integer", FieldID: 3, AttNum: 3})
	s2, err := parquetfile.NewSchema(&items2)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEpoch(4, dir, parquetfile.NewSchema)
	row(t, e, items, 0x3100, 0, "1", "a")
	row(t, e, other, 0x3100, 1, "1", "x")
	row(t, e, items, 0x3100, 2, "2", "b")
	e.CommitTxn(cdc.TxnMeta{CommitLSN: 0x3100, EndLSN: 0x3180, CommitTime: flushedAt.Add(-2 * time.Second)}, flushedAt)
	e.AddSchema(items.ID, s2.ManifestColumns(&items2), 2)
	row(t, e, &items2, 0x3200, 0, "3", "c", "7")
	maxCommit := flushedAt.Add(-time.Second).In(time.FixedZone("CET", 3600))
	e.CommitTxn(cdc.TxnMeta{CommitLSN: 0x3200, EndLSN: 0x3280, CommitTime: maxCommit}, flushedAt)
	e.Also(func(m *manifest.Manifest) error {
		m.Tables["public.other"].Snapshot.RowsCopied = 42
		return nil
	})
	return e, maxCommit
}

func TestFlush(t *testing.T) {
	ctx := context.Background()
	// Three files, two Workers: two uploads at once, never three.
	sink := &watchedSink{Store: memory.New(), overlap: 2, expect: 3, hold: 20 * time.Millisecond}
	c := newCommitter(t, sink)
	dir := t.TempDir()
	e, maxCommit := epochFour(t, c, dir)
	items, other := cdc.TableID{Schema: "public", Name: "items"}, cdc.TableID{Schema: "public", Name: "other"}

	res, err := c.Flush(ctx, e)
	if err != nil {
		t.Fatal(err)
	}

	keys := []string{
		manifest.FileKey(items, "g0001", manifest.KindDelta, 4, 0),
		manifest.FileKey(items, "g0001", manifest.KindDelta, 4, 1),
		manifest.FileKey(other, "g0001", manifest.KindDelta, 4, 0),
	}
	if len(sink.problems) > 0 || sink.manifests != 1 || len(sink.puts) != 3 {
		t.Fatalf("sink saw %d puts %v, %d manifest writes, problems %v", len(sink.puts), sink.puts, sink.manifests, sink.problems)
	}
	if sink.maxInFlight != c.Workers {
		t.Errorf("%d uploads at once, Workers is %d", sink.maxInFlight, c.Workers)
	}
	stored, _, err := manifest.Load(ctx, sink)
	if err != nil {
		t.Fatal(err)
	}
	var bytes int64
	for _, key := range keys {
		objs, err := sink.List(ctx, key)
		if err != nil || len(objs) != 1 {
			t.Fatalf("%s: %v, %v", key, objs, err)
		}
		bytes += objs[0].Size
	}
	wantRec := manifest.EpochRecord{Epoch: 4, EndLSN: 0x3280, MaxCommitTime: maxCommit.UTC(), FlushedAt: flushedAt}
	if want := (Result{Epoch: 4, Tables: 3, Rows: 4, Bytes: bytes, Durable: wantRec}); res != want {
		t.Errorf("Result = %+v, want %+v", res, want)
	}
	checkFlushed(t, stored, keys, wantRec)
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Errorf("spool files left after the flush: %v", files)
	}
}

// checkFlushed checks the manifest TestFlush committed.
func checkFlushed(t *testing.T, m *manifest.Manifest, keys []string, rec manifest.EpochRecord) {
	t.Helper()
	if m.Epoch != 4 || m.EndLSN != 0x3280 || len(m.History) != 2 || m.History[1] != rec {
		t.Errorf("manifest epoch %d end %s history %+v, want epoch 4 end 0/3280 and %+v", m.Epoch, m.EndLSN, m.History, rec)
	}
	it, ot := m.Tables["public.items"], m.Tables["public.other"]
	if it.SchemaVersion != 2 || len(it.Schemas) != 2 || it.Schemas[1].FromEpoch != 4 || len(it.Schemas[1].Columns) != 3 {
		t.Errorf("items schemas: version %d, %+v", it.SchemaVersion, it.Schemas)
	}
	type entry struct {
		path          string
		rows          int64
		schemaVersion int
		minLSN        cdc.LSN
	}
	var got []entry
	for _, d := range append(append([]manifest.Delta(nil), it.Deltas...), ot.Deltas...) {
		if d.Epoch != 4 || len(d.Files) != 1 || d.Files[0].Rows != d.Rows || d.Files[0].Bytes == 0 {
			t.Errorf("delta %+v", d)
			continue
		}
		got = append(got, entry{d.Files[0].Path, d.Rows, d.SchemaVersion, d.MinLSN})
	}
	want := []entry{{keys[0], 2, 1, 0x3100}, {keys[1], 1, 2, 0x3200}, {keys[2], 1, 1, 0x3100}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("deltas:\n got %v\nwant %v", got, want)
	}
	if ot.Snapshot.RowsCopied != 42 {
		t.Errorf("the Also edit did not land: %+v", ot.Snapshot)
	}
}

func TestFlushUploadFails(t *testing.T) {
	ctx := context.Background()
	sink := &watchedSink{Store: memory.New()}
	c := newCommitter(t, sink)
	items, other := sourceTable(t, c, "items"), sourceTable(t, c, "other")
	sink.failKey = manifest.FileKey(other.ID, "g0001", manifest.KindDelta, 4, 0)

	dir := t.TempDir()
	e := NewEpoch(4, dir, parquetfile.NewSchema)
	row(t, e, items, 0x3100, 0, "1", "a")
	row(t, e, other, 0x3100, 1, "1", "x")
	e.CommitTxn(cdc.TxnMeta{CommitLSN: 0x3100, EndLSN: 0x3180, CommitTime: flushedAt}, flushedAt)
	also := false
	e.Also(func(*manifest.Manifest) error { also = true; return nil })

	_, err := c.Flush(ctx, e)
	if !errors.Is(err, blob.ErrUnavailable) || !errors.Is(err, errSink) || !strings.HasPrefix(err.Error(), "flush epoch 4: write delta files: ") {
		t.Fatalf("Flush = %v, want a write delta files error wrapping blob.ErrUnavailable and the sink's", err)
	}
	if sink.manifests != 0 || also {
		t.Errorf("%d manifest writes (Also applied: %v) after a failed upload", sink.manifests, also)
	}
	stored, _, err := manifest.Load(ctx, sink)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Epoch != 3 || c.Manifest.Current().Epoch != 3 {
		t.Errorf("manifest at epoch %d (committer's view %d), want 3", stored.Epoch, c.Manifest.Current().Epoch)
	}
	if files := spoolFiles(t, dir); len(files) != 0 {
		t.Errorf("spool files left after the failed flush: %v", files)
	}
}

func TestFlushRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		epoch uint64
		write func(t *testing.T, e *Epoch, c *Committer)
		want  string
	}{
		{"table not in the manifest", 4, func(t *testing.T, e *Epoch, c *Committer) {
			gone := *sourceTable(t, c, "items")
			gone.ID.Name = "gone"
			row(t, e, sourceTable(t, c, "items"), 0x3100, 0, "1", "a")
			row(t, e, &gone, 0x3100, 1, "1", "a")
			e.CommitTxn(cdc.TxnMeta{EndLSN: 0x3180}, flushedAt)
		}, "flush epoch 4: table public.gone is not in the manifest"},
		{"open transaction", 4, func(t *testing.T, e *Epoch, c *Committer) {
			row(t, e, sourceTable(t, c, "items"), 0x3100, 0, "1", "a")
		}, "flush epoch 4: a transaction is still open (flushes are cut only at commit boundaries)"},
		{"not the next epoch", 5, func(t *testing.T, e *Epoch, c *Committer) {
			row(t, e, sourceTable(t, c, "items"), 0x3100, 0, "1", "a")
			e.CommitTxn(cdc.TxnMeta{EndLSN: 0x3180}, flushedAt)
		}, "flush epoch 5: the manifest is at epoch 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &watchedSink{Store: memory.New()}
			c := newCommitter(t, sink)
			dir := t.TempDir()
			e := NewEpoch(tc.epoch, dir, parquetfile.NewSchema)
			tc.write(t, e, c)
			_, err := c.Flush(ctx, e)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Flush = %v, want %q", err, tc.want)
			}
			if len(sink.puts) != 0 || sink.manifests != 0 {
				t.Errorf("sink saw puts %v and %d manifest writes", sink.puts, sink.manifests)
			}
			if files := spoolFiles(t, dir); len(files) != 0 {
				t.Errorf("spool files left: %v", files)
			}
		})
	}
}

// The spool directory is the only state Flush leaves on disk; make sure the
// helper above looks where NewEpoch writes.
func TestSpoolFilesSeesEpochFiles(t *testing.T) {
	sink := &watchedSink{Store: memory.New()}
	c := newCommitter(t, sink)
	dir := t.TempDir()
	e := NewEpoch(4, dir, parquetfile.NewSchema)
	row(t, e, sourceTable(t, c, "items"), 0x3100, 0, "1", "a")
	defer e.Discard()
	if files := spoolFiles(t, dir); len(files) != 1 {
		t.Fatalf("spool files %v, want one", files)
	}
}
