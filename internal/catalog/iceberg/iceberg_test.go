package iceberg_test

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	iceberg "github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	_ "modernc.org/sqlite"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/catalog"
	adapter "github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/icebergschema"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// row is one change row of the test table (id bigint, v text[, w bigint]).
type row struct {
	op  cdc.Op
	lsn int
	id  int
	v   string
	w   int // written only by schema version 2
}

// sinkStore is a sink's store: the manifest's too.
type sinkStore interface {
	blob.Store
	blob.Conditional
}

// sink is a sink whose versions the test commits by hand: a filesystem
// sink at dir (newSink), or an object store's (newSinkOn, dir empty).
type sink struct {
	t     *testing.T
	dir   string
	store sinkStore
	mc    *manifest.Committer
	tbl   *cdc.Table
	now   time.Time
	n     int
}

func newSink(t *testing.T) *sink {
	dir := t.TempDir()
	store, err := fs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := newSinkOn(t, store)
	s.dir = dir
	return s
}

// newSinkOn is a sink in store, with the table's snapshot committed.
func newSinkOn(t *testing.T, store sinkStore) *sink {
	var err error
	s := &sink{t: t, store: store, now: time.Now().UTC().Add(-time.Minute)}
	s.tbl = &cdc.Table{ID: cdc.TableID{Schema: "public", Name: "t"}, OID: 100, ReplicaIdentity: cdc.ReplicaIdentityDefault, SchemaVersion: 1,
		PrimaryKey: []string{"id"},
		Columns: []cdc.Column{
			{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", FieldID: 1, NotNull: true},
			{Name: "v", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
		}}
	ps, err := parquetfile.NewSchema(s.tbl)
	if err != nil {
		t.Fatal(err)
	}
	base := s.write("base", []row{{cdc.OpInsert, 0x100, 1, "a", 0}, {cdc.OpInsert, 0x100, 2, "b", 0}, {cdc.OpInsert, 0x100, 3, "c", 0}})
	m := &manifest.Manifest{Source: manifest.Source{SystemIdentifier: "1"}, EndLSN: 0x100, Tables: map[string]*manifest.Table{
		"public.t": {Schema: "public", Name: "t", OID: 100, Generation: "g0001", PrimaryKey: []string{"id"}, ReplicaIdentity: "default",
			SchemaVersion: 1, Schemas: []manifest.SchemaVersion{{Version: 1, Columns: ps.ManifestColumns(s.tbl)}},
			Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete, LSN: 0x100},
			Base:     &manifest.Base{MaxLSN: 0x100, RowCount: 3, Files: []manifest.File{base}}},
	}}
	m.AppendHistory(manifest.EpochRecord{Epoch: 0, EndLSN: 0x100, MaxCommitTime: s.now, FlushedAt: s.now})
	if s.mc, err = manifest.Create(context.Background(), store, m, s.now); err != nil {
		t.Fatal(err)
	}
	return s
}

// warehouse is the sink as the adapter addresses it.
func (s *sink) warehouse() adapter.Warehouse {
	return adapter.Warehouse{Location: "file://" + s.dir, Store: s.store}
}

// write puts a Parquet file of rows (in the table's current schema).
func (s *sink) write(kind string, rows []row) manifest.File {
	s.t.Helper()
	ps, err := parquetfile.NewSchema(s.tbl)
	if err != nil {
		s.t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, ps)
	for i, r := range rows {
		vals := []cdc.Datum{{Kind: cdc.DatumText, Text: []byte(strconv.Itoa(r.id))}, {Kind: cdc.DatumText, Text: []byte(r.v)}}
		if r.op == cdc.OpDelete {
			vals[1] = cdc.Datum{Kind: cdc.DatumNull}
		}
		if len(s.tbl.Columns) == 3 {
			vals = append(vals, cdc.Datum{Kind: cdc.DatumText, Text: []byte(strconv.Itoa(r.w))})
		}
		if err := w.Write(cdc.RowMeta{Op: r.op, LSN: cdc.LSN(r.lsn), Seq: int64(i), XID: cdc.XID(r.lsn), CommitTime: s.now}, vals); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		s.t.Fatal(err)
	}
	s.n++
	path := fmt.Sprintf("public/t/g0001/%s/%d/part-00000.parquet", kind, s.n)
	if err := s.store.Put(context.Background(), path, bytes.NewReader(buf.Bytes())); err != nil {
		s.t.Fatal(err)
	}
	return manifest.File{Path: path, Rows: int64(len(rows)), Bytes: int64(buf.Len())}
}

// commit applies fn to the manifest as one version.
func (s *sink) commit(fn func(m *manifest.Manifest, mt *manifest.Table)) *manifest.Manifest {
	s.t.Helper()
	s.now = s.now.Add(time.Second)
	m, err := s.mc.Commit(context.Background(), func(m *manifest.Manifest) error {
		fn(m, m.Tables["public.t"])
		m.Epoch++
		m.AppendHistory(manifest.EpochRecord{Epoch: m.Epoch, EndLSN: m.EndLSN, MaxCommitTime: s.now, FlushedAt: s.now})
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return m
}

// compact commits a compaction: a compacted base of rows (tombstones of
// them deletes), the change files and any earlier compacted base retired.
func (s *sink) compact(rows []row, tombstones int64) *manifest.Manifest {
	f := s.write("base", rows)
	return s.commit(func(m *manifest.Manifest, mt *manifest.Table) {
		at := s.now
		for _, g := range catalog.ChangeFiles(mt) {
			m.Garbage = append(m.Garbage, manifest.RetiredFile{Path: g.Path, RetiredAt: s.now})
		}
		if mt.Base != nil && mt.Base.CompactedAt != nil {
			for _, g := range mt.Base.Files {
				m.Garbage = append(m.Garbage, manifest.RetiredFile{Path: g.Path, RetiredAt: s.now})
			}
		}
		mt.Base = &manifest.Base{Epoch: m.Epoch, MaxLSN: m.EndLSN, RowCount: int64(len(rows)), Tombstones: tombstones, Files: []manifest.File{f},
			CompactedAt: &at, SortedBy: []string{"id", "__lsn", "__seq"}}
		mt.Deltas = nil
	})
}

func (s *sink) delta(rows []row) *manifest.Manifest {
	f := s.write("delta", rows)
	return s.commit(func(m *manifest.Manifest, mt *manifest.Table) {
		for _, r := range rows {
			m.EndLSN = max(m.EndLSN, cdc.LSN(r.lsn))
		}
		mt.Deltas = append(mt.Deltas, manifest.Delta{Epoch: m.Epoch + 1, SchemaVersion: mt.SchemaVersion, Rows: f.Rows, Files: []manifest.File{f}})
	})
}

// flaky is a catalog whose next commit is applied and then reported failed
// (an answer lost on the way back), or refused before it is applied.
type flaky struct {
	catalog.Catalog
	lose, refuse bool
}

func (f *flaky) Commit(ctx context.Context, c catalog.Commit) error {
	if f.refuse {
		f.refuse = false
		return errors.New("503 from the catalog")
	}
	err := f.Catalog.Commit(ctx, c)
	if f.lose && err == nil {
		f.lose = false
		return errors.New("connection reset after the commit")
	}
	return err
}

func openCatalog(t *testing.T, s *sink) (*sqlcat.Catalog, *adapter.Adapter) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cat, err := sqlcat.NewCatalog("pgcdc", db, sqlcat.SQLite, iceberg.Properties{"warehouse": "file://" + s.dir})
	if err != nil {
		t.Fatal(err)
	}
	return cat, adapter.New(cat, "file://"+s.dir)
}

// scan reads a table through any iceberg-go catalog (SQL or REST) with
// iceberg-go's own scanner: "op:id:v[:w]" per row, in (lsn, seq) order.
func scan(t *testing.T, cat icecat.Catalog, id catalog.Ident) []string {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), append(table.Identifier{}, append(id.Namespace, id.Name)...))
	if err != nil {
		t.Fatal(err)
	}
	return scanTable(t, tbl, id)
}

// scanTable reads tbl as scan does.
func scanTable(t *testing.T, tbl *table.Table, id catalog.Ident) []string {
	t.Helper()
	ctx := context.Background()
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("scan %s: %v", id, err)
	}
	defer at.Release()
	sc := at.Schema()
	col := func(name string) int {
		idx := sc.FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("scan %s: no column %s in %s", id, name, sc)
		}
		return idx[0]
	}
	type out struct {
		lsn, seq int64
		s        string
	}
	var rows []out
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	wi := -1
	if len(sc.FieldIndices("w")) == 1 {
		wi = col("w")
	}
	for tr.Next() {
		rec := tr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			op := rec.Column(col("__op")).(*array.String).Value(i)
			lsn := rec.Column(col("__lsn")).(*array.Int64).Value(i)
			seq := rec.Column(col("__seq")).(*array.Int64).Value(i)
			idv := rec.Column(col("id")).(*array.Int64).Value(i)
			v := "-"
			if c := rec.Column(col("v")).(*array.String); c.IsValid(i) {
				v = c.Value(i)
			}
			s := fmt.Sprintf("%s:%d:%s", op, idv, v)
			if wi >= 0 {
				if c := rec.Column(wi).(*array.Int64); c.IsValid(i) {
					s += ":" + strconv.FormatInt(c.Value(i), 10)
				} else {
					s += ":-"
				}
			}
			rows = append(rows, out{lsn, seq, s})
		}
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(rows, func(a, b out) int { return cmp.Or(cmp.Compare(a.lsn, b.lsn), cmp.Compare(a.seq, b.seq)) })
	var strs []string
	for _, r := range rows {
		strs = append(strs, r.s)
	}
	return strs
}

func snapshots(t *testing.T, cat icecat.Catalog, id catalog.Ident) []table.Snapshot {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), append(table.Identifier{}, append(id.Namespace, id.Name)...))
	if err != nil {
		t.Fatal(err)
	}
	return tbl.Metadata().Snapshots()
}

func equal(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// TestChangelog publishes a table's versions to the embedded SQL catalog
// and reads them back with iceberg-go's scanner: the snapshot base and the
// deltas as written, pg-cdc's field ids (metadata columns included), the
// summary naming the manifest version; a lost answer and a refusal publish
// nothing twice; a new column is mirrored with its id; a compaction keeps
// the folded change files inside the retention and drops them after it.
func TestChangelog(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	cat, ad := openCatalog(t, s)
	fl := &flaky{Catalog: ad}
	clock := time.Now()
	p := catalog.New(catalog.Options{Catalog: fl, Retention: time.Hour, Now: func() time.Time { return clock }, Positions: positions(s)})
	id := catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")

	m := s.mc.Current()
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	equal(t, "after the snapshot", scan(t, cat, id), "I:1:a", "I:2:b", "I:3:c")

	tbl, err := cat.LoadTable(ctx, table.Identifier{"pgcdc_changelog", "public", "t"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"__op": icebergschema.FieldOp, "__lsn": icebergschema.FieldLSN, "__unchanged": icebergschema.FieldUnchanged, "id": 1, "v": 2} {
		if f, ok := tbl.Schema().FindFieldByName(name); !ok || f.ID != want {
			t.Errorf("field %s: %+v, want id %d", name, f, want)
		}
	}
	if got := catalog.VersionOf(tbl.CurrentSnapshot().Summary.Properties); got != m.Version {
		t.Errorf("summary manifest version %d, want %d", got, m.Version)
	}

	m = s.delta([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}})
	fl.lose = true
	if _, err := p.Publish(ctx, m); err == nil {
		t.Fatal("a lost answer reported no error")
	}
	before := len(snapshots(t, cat, id))
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	if after := len(snapshots(t, cat, id)); after != before {
		t.Errorf("the retry after a lost answer made %d more snapshot(s)", after-before)
	}
	equal(t, "after a delta", scan(t, cat, id), "I:1:a", "I:2:b", "I:3:c", "U:1:a2", "D:2:-", "I:4:d")

	fl.refuse = true
	m = s.delta([]row{{cdc.OpInsert, 0x300, 5, "e", 0}})
	if _, err := p.Publish(ctx, m); err == nil {
		t.Fatal("a refused commit reported no error")
	}
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}

	// A column added: schema version 2, field id 3.
	s.tbl.Columns = append(s.tbl.Columns, cdc.Column{Name: "w", TypeOID: 20, TypeMod: -1, PGType: "bigint", FieldID: 3})
	s.tbl.SchemaVersion = 2
	ps, _ := parquetfile.NewSchema(s.tbl)
	s.commit(func(m *manifest.Manifest, mt *manifest.Table) {
		mt.SchemaVersion = 2
		mt.Schemas = append(mt.Schemas, manifest.SchemaVersion{Version: 2, FromEpoch: m.Epoch + 1, Columns: ps.ManifestColumns(s.tbl)})
	})
	m = s.delta([]row{{cdc.OpUpdate, 0x400, 3, "c2", 7}})
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	equal(t, "after a column was added", scan(t, cat, id),
		"I:1:a:-", "I:2:b:-", "I:3:c:-", "U:1:a2:-", "D:2:-:-", "I:4:d:-", "I:5:e:-", "U:3:c2:7")
	tbl, _ = cat.LoadTable(ctx, table.Identifier{"pgcdc_changelog", "public", "t"})
	if f, ok := tbl.Schema().FindFieldByName("w"); !ok || f.ID != 3 {
		t.Errorf("field w: %+v, want id 3", f)
	}

	// A compaction folds everything into a compacted base: the change
	// files stay while inside the retention, and leave after it.
	folded := catalog.ChangeFiles(m.Tables["public.t"])
	compacted := s.write("base", []row{{cdc.OpUpdate, 0x400, 1, "a2", 0}})
	m = s.commit(func(m *manifest.Manifest, mt *manifest.Table) {
		at := s.now
		for _, f := range folded {
			m.Garbage = append(m.Garbage, manifest.RetiredFile{Path: f.Path, RetiredAt: s.now})
		}
		mt.Base = &manifest.Base{Epoch: m.Epoch, MaxLSN: 0x400, Files: []manifest.File{compacted}, CompactedAt: &at, SortedBy: []string{"id", "__lsn", "__seq"}, SchemaVersion: 2}
		mt.Deltas = nil
	})
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got := len(scan(t, cat, id)); got != 8 {
		t.Errorf("inside the retention after a compaction: %d change rows, want 8", got)
	}
	clock = clock.Add(2 * time.Hour)
	m = s.delta([]row{{cdc.OpInsert, 0x500, 6, "f", 1}})
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	equal(t, "past the retention", scan(t, cat, id), "I:6:f:1")
	if st := p.Status(); st.Version != m.Version || len(st.Tables) != 2 || st.Tables[0].Kind != catalog.KindChangelog || st.Tables[0].Removed != len(folded) {
		t.Errorf("status %+v", st)
	}
}

// positions reads a sink file's tombstones, as pg-cdc's wiring does.
func positions(s *sink) func(context.Context, string) ([]int64, error) {
	return func(_ context.Context, key string) ([]int64, error) {
		f, err := os.Open(filepath.Join(s.dir, key))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		st, _ := f.Stat()
		return parquetfile.OpPositions(f, st.Size(), "D")
	}
}

// TestState publishes the current-state table: the snapshot base as it
// is, then at each compaction the compacted base in its place with its
// tombstones masked by a position delete file, all read back with
// iceberg-go's scanner; the replaced files and delete files leave it.
func TestState(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	cat, ad := openCatalog(t, s)
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, Positions: positions(s)})
	id := catalog.StateIdent(catalog.DefaultPrefix, "public", "t")
	if id.String() != "pgcdc.public.t" {
		t.Errorf("ident %s", id)
	}
	if _, err := p.Publish(ctx, s.mc.Current()); err != nil {
		t.Fatal(err)
	}
	equal(t, "the snapshot", scan(t, cat, id), "I:1:a", "I:2:b", "I:3:c")

	// A delta alone does not move the state (copy-on-write at compaction).
	m := s.delta([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}})
	before := len(snapshots(t, cat, id))
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	if n := len(snapshots(t, cat, id)); n != before {
		t.Errorf("a delta made %d state snapshot(s)", n-before)
	}

	// The compacted base keeps key 2's delete as a tombstone.
	m = s.compact([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x100, 3, "c", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}}, 1)
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	equal(t, "after a compaction (tombstone masked)", scan(t, cat, id), "I:3:c", "U:1:a2", "I:4:d")
	tbl, _ := cat.LoadTable(ctx, table.Identifier{"pgcdc", "public", "t"})
	if got := tbl.CurrentSnapshot().Summary.Properties[catalog.SummaryLSN]; got != m.Tables["public.t"].Base.MaxLSN.String() {
		t.Errorf("state summary lsn %s, want the base's %s", got, m.Tables["public.t"].Base.MaxLSN)
	}

	// Another compaction: one delete more; the old base and its delete
	// file are replaced, not stacked.
	s.delta([]row{{cdc.OpDelete, 0x300, 4, "", 0}})
	m = s.compact([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x100, 3, "c", 0}, {cdc.OpDelete, 0x300, 4, "", 0}}, 2)
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	equal(t, "after a second compaction", scan(t, cat, id), "I:3:c", "U:1:a2")
	tbl, _ = cat.LoadTable(ctx, table.Identifier{"pgcdc", "public", "t"})
	data, deletes := 0, 0
	fs, _ := tbl.FS(ctx)
	mfs, _ := tbl.CurrentSnapshot().Manifests(fs)
	for _, mf := range mfs {
		es, err := mf.FetchEntries(fs, true)
		if err != nil {
			t.Fatal(err)
		}
		if mf.ManifestContent() == iceberg.ManifestContentData {
			data += len(es)
		} else {
			deletes += len(es)
		}
	}
	if data != 1 || deletes != 1 {
		t.Errorf("the state holds %d data and %d delete files, want 1 and 1", data, deletes)
	}
	st, err := p.Inspect(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range st {
		if !ts.Drift.InSync() || ts.Metadata == "" {
			t.Errorf("inspect %s %s: drift %+v, metadata %q", ts.Kind, ts.Iceberg, ts.Drift, ts.Metadata)
		}
	}
}

// fold commits a major compaction as pg-cdc's does: a compacted base of
// rows, and a fold in place of the files it retired (manifest.AddFold;
// this sink's keys number files by a counter, which stands for the epoch).
func (s *sink) fold(rows []row) *manifest.Manifest {
	f := s.write("base", rows)
	return s.commit(func(m *manifest.Manifest, mt *manifest.Table) {
		at := s.now
		from := uint64(1) // the snapshot base's key
		if mt.Base != nil && mt.Base.CompactedAt != nil {
			from = mt.Base.Epoch
		}
		m.AddFold(mt, from, uint64(s.n), m.Version+1, at, time.Hour, mt.Files())
		mt.Base = &manifest.Base{Epoch: uint64(s.n), MaxLSN: m.EndLSN, RowCount: int64(len(rows)), Files: []manifest.File{f},
			CompactedAt: &at, SortedBy: []string{"id", "__lsn", "__seq"}}
		mt.Deltas = nil
	})
}

// TestChangelogBehindAFold: a publisher that last published before a major
// compaction folded deltas it never published finds them in the sink's
// history (the manifest's fold names a range, not files) and publishes
// them, so the changelog holds every change; the folded files it had
// published stay inside the retention. Without a history it says so
// rather than publish a changelog with a gap.
func TestChangelogBehindAFold(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	cat, ad := openCatalog(t, s)
	clock := time.Now()
	logReads := &countingStore{Store: s.store}
	opts := catalog.Options{Catalog: ad, Retention: time.Hour, Now: func() time.Time { return clock }, Positions: positions(s), History: manifest.NewHistory(logReads)}
	p := catalog.New(opts)
	id := catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")
	m := s.delta([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}})
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	s.delta([]row{{cdc.OpDelete, 0x300, 2, "", 0}})
	s.delta([]row{{cdc.OpInsert, 0x400, 4, "d", 0}})
	s.fold([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpInsert, 0x100, 3, "c", 0}, {cdc.OpInsert, 0x400, 4, "d", 0}})
	m = s.delta([]row{{cdc.OpInsert, 0x500, 5, "e", 0}})
	if len(m.Garbage) != 0 || len(m.Folds) != 1 {
		t.Fatalf("garbage %v, folds %+v: want the compaction recorded as one fold", m.Garbage, m.Folds)
	}

	noHistory := opts
	noHistory.History = nil
	if _, err := catalog.New(noHistory).Publish(ctx, m); err == nil || !strings.Contains(err.Error(), "public.t") {
		t.Fatalf("a publisher without the history published across a fold: %v", err)
	}
	equal(t, "nothing published without the history", scan(t, cat, id), "I:1:a", "I:2:b", "I:3:c", "U:1:a2")

	// catalog status asks the same question again: the walk is not redone.
	for i := range 2 {
		if _, err := p.Inspect(ctx, m); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			logReads.reset()
		}
	}
	if n := logReads.count(); n != 0 {
		t.Errorf("a second drift check read %d history objects; the walk over the same versions is remembered", n)
	}
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	equal(t, "behind a fold", scan(t, cat, id), "I:1:a", "I:2:b", "I:3:c", "U:1:a2", "D:2:-", "I:4:d", "I:5:e")

	clock = clock.Add(2 * time.Hour)
	m = s.delta([]row{{cdc.OpInsert, 0x600, 6, "f", 0}})
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	equal(t, "past the retention", scan(t, cat, id), "I:5:e", "I:6:f")
}

// countingStore counts the objects read under the history log.
type countingStore struct {
	blob.Store
	mu sync.Mutex
	n  int
}

func (c *countingStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if strings.HasPrefix(key, manifest.LogPrefix) {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
	return c.Store.Get(ctx, key)
}

func (c *countingStore) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *countingStore) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = 0
}
