//go:build !nodb

package query_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/refs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

// change is one row of a test table (id bigint, note text): op, LSN, note.
type change struct {
	op   cdc.Op
	lsn  int
	id   int
	note string
}

// testSink is a filesystem sink whose manifest versions a test commits by
// hand, for two tables of the same name in two schemas and a third.
type testSink struct {
	t      *testing.T
	dir    string
	store  *fs.Store
	mc     *manifest.Committer
	tables map[string]*cdc.Table
	now    time.Time
}

func newTestSink(t *testing.T) *testSink {
	t.Helper()
	return newTestSinkOf(t, "public.orders", "shop.orders", "public.items")
}

// newTestSinkOf is a test sink with the tables keys name (schema.table).
func newTestSinkOf(t *testing.T, keys ...string) *testSink {
	t.Helper()
	dir := t.TempDir()
	store, err := fs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &testSink{t: t, dir: dir, store: store, tables: map[string]*cdc.Table{}, now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	m := &manifest.Manifest{Source: manifest.Source{SystemIdentifier: "1"}, EndLSN: 0x100, Tables: map[string]*manifest.Table{}}
	for i, key := range keys {
		schema, name, _ := strings.Cut(key, ".")
		tbl := &cdc.Table{ID: cdc.TableID{Schema: schema, Name: name}, OID: uint32(100 + i), ReplicaIdentity: cdc.ReplicaIdentityDefault, SchemaVersion: 1,
			Columns: []cdc.Column{
				{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", FieldID: 1, NotNull: true},
				{Name: "note", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
			}}
		ps, err := parquetfile.NewSchema(tbl)
		if err != nil {
			t.Fatal(err)
		}
		s.tables[key] = tbl
		m.Tables[key] = &manifest.Table{Schema: schema, Name: name, OID: tbl.OID, Generation: "g0001", PrimaryKey: []string{"id"},
			ReplicaIdentity: "default", SchemaVersion: 1, Schemas: []manifest.SchemaVersion{{Version: 1, Columns: ps.ManifestColumns(tbl)}}}
	}
	m.AppendHistory(manifest.EpochRecord{Epoch: 0, EndLSN: 0x100, MaxCommitTime: s.now, FlushedAt: s.now})
	if s.mc, err = manifest.Create(context.Background(), store, m, s.now); err != nil {
		t.Fatal(err)
	}
	return s
}

// flush commits one epoch: a delta file per table given.
func (s *testSink) flush(epoch uint64, rows map[string][]change) *manifest.Manifest {
	s.t.Helper()
	s.now = s.now.Add(time.Second)
	m, err := s.mc.Commit(context.Background(), func(m *manifest.Manifest) error {
		maxLSN := m.EndLSN
		for key, cs := range rows {
			f := s.writeFile(key, epoch, cs)
			for _, c := range cs {
				maxLSN = max(maxLSN, cdc.LSN(c.lsn))
			}
			mt := m.Tables[key]
			mt.Deltas = append(mt.Deltas, manifest.Delta{Epoch: epoch, SchemaVersion: 1, Rows: f.Rows, Files: []manifest.File{f}})
		}
		m.Epoch, m.EndLSN = epoch, maxLSN
		m.AppendHistory(manifest.EpochRecord{Epoch: epoch, EndLSN: maxLSN, MaxCommitTime: s.now, FlushedAt: s.now})
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return m
}

func (s *testSink) writeFile(key string, epoch uint64, cs []change) manifest.File {
	s.t.Helper()
	tbl := s.tables[key]
	ps, err := parquetfile.NewSchema(tbl)
	if err != nil {
		s.t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, ps)
	for i, c := range cs {
		vals := []cdc.Datum{{Kind: cdc.DatumText, Text: []byte(strconv.Itoa(c.id))}, {Kind: cdc.DatumText, Text: []byte(c.note)}}
		meta := cdc.RowMeta{Op: c.op, LSN: cdc.LSN(c.lsn), Seq: int64(i), XID: cdc.XID(c.lsn), CommitTime: s.now}
		if err := w.Write(meta, vals); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		s.t.Fatal(err)
	}
	path := filepath.ToSlash(filepath.Join(tbl.ID.Schema, tbl.ID.Name, "g0001", "delta", strconv.Itoa(int(epoch)), "part-00000.parquet"))
	if err := s.store.Put(context.Background(), path, bytes.NewReader(buf.Bytes())); err != nil {
		s.t.Fatal(err)
	}
	return manifest.File{Path: path, Rows: int64(len(cs)), Bytes: int64(buf.Len())}
}

func newReader(t *testing.T, s *testSink) *query.Reader {
	t.Helper()
	r, err := query.NewReader(query.ReaderOptions{Sink: s.store, TempDir: filepath.Join(t.TempDir(), "query"), Engines: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// one runs a query that returns one value.
func one(t *testing.T, r *query.Reader, at query.At, sql string) any {
	t.Helper()
	res, err := r.Query(context.Background(), at, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		t.Fatalf("%s: %d rows", sql, len(res.Rows))
	}
	return res.Rows[0][0]
}

// TestReaderNamesAndPoints: the current state under schema.table, a bare
// name only where one schema has it, the change rows under changes.…;
// every version readable by number, epoch and tag; an unknown point is
// ErrPoint and one past the newest is outside the retention window.
func TestReaderNamesAndPoints(t *testing.T) {
	ctx := context.Background()
	s := newTestSink(t)
	s.flush(1, map[string][]change{
		"public.orders": {{cdc.OpInsert, 0x200, 1, "a"}, {cdc.OpInsert, 0x200, 2, "b"}},
		"shop.orders":   {{cdc.OpInsert, 0x200, 7, "x"}},
		"public.items":  {{cdc.OpInsert, 0x200, 1, "i"}},
	})
	v3 := s.flush(2, map[string][]change{"public.orders": {{cdc.OpUpdate, 0x300, 1, "a2"}, {cdc.OpDelete, 0x300, 2, ""}, {cdc.OpInsert, 0x300, 3, "c"}}})
	r := newReader(t, s)
	latest, err := r.Resolve(ctx, "")
	if err != nil || latest.Version() != v3.Version {
		t.Fatalf("newest version: %v, %v", latest.Version(), err)
	}
	if got := one(t, r, latest, `SELECT string_agg(id || ':' || note, ',' ORDER BY id) FROM public.orders`); got != "1:a2,3:c" {
		t.Errorf("public.orders now = %v", got)
	}
	if got := one(t, r, latest, `SELECT count(*) FROM items`); got != int64(1) {
		t.Errorf("items (one schema has it) = %v", got)
	}
	if _, err := r.Query(ctx, latest, `SELECT count(*) FROM orders`); !errors.Is(err, query.ErrInvalid) {
		t.Errorf("orders, which two schemas have, resolved: %v", err)
	}
	if got := one(t, r, latest, `SELECT count(*) FILTER (WHERE __op = 'D') FROM changes.public.orders`); got != int64(1) {
		t.Errorf("change rows: %v deletes", got)
	}
	for point, want := range map[string]string{"2": "1:a,2:b", "epoch:1": "1:a,2:b", "epoch:2": "1:a2,3:c", "lsn:0/200": "1:a,2:b", "lsn:0/2FF": "1:a,2:b"} {
		at, err := r.Resolve(ctx, point)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", point, err)
		}
		if got := one(t, r, at, `SELECT string_agg(id || ':' || note, ',' ORDER BY id) FROM public.orders`); got != want {
			t.Errorf("as of %s: %v, want %s", point, got, want)
		}
	}
	l, err := r.Refs(ctx, 10)
	if err != nil || len(l.Tags) != 3 {
		t.Fatalf("refs: %+v, %v; want 3 tags (the create and two flushes)", l, err)
	}
	at, err := r.Resolve(ctx, l.Tags[1].Name)
	if err != nil || at.Manifest.Epoch != 1 {
		t.Errorf("tag %s: epoch %d, %v", l.Tags[1].Name, at.Manifest.Epoch, err)
	}
	tagTime, _ := refs.ParseTag(l.Tags[1].Name)
	for _, bad := range []string{"nosuchbranch", refs.Tag(tagTime.Add(time.Nanosecond))} {
		if _, err := r.Resolve(ctx, bad); !errors.Is(err, query.ErrPoint) {
			t.Errorf("Resolve(%s) = %v, want ErrPoint", bad, err)
		}
	}
	// A tag older than the window's oldest flush is outside it, and says so.
	if _, err := r.Resolve(ctx, "raw@2020-01-01T00:00:00Z"); !errors.Is(err, manifest.ErrOutsideRetention) {
		t.Errorf("Resolve(raw@2020-01-01T00:00:00Z) = %v, want ErrOutsideRetention", err)
	}
	if _, err := r.Resolve(ctx, "epoch:9"); !errors.Is(err, manifest.ErrOutsideRetention) {
		t.Errorf("Resolve(epoch:9) = %v, want ErrOutsideRetention", err)
	}
	ts, err := r.Tables(ctx, latest)
	if err != nil || len(ts) != 3 || ts[0].Name != "public.items" || ts[1].Rows != 2 || ts[2].Rows != 1 {
		t.Errorf("tables: %+v, %v", ts, err)
	}
	from, _ := r.Resolve(ctx, "epoch:1")
	verdict, changes, err := r.Compare(ctx, from, latest, nil)
	if err != nil || verdict != "safe" || len(changes) != 1 || changes[0].Inserted != 1 || changes[0].Deleted != 1 || changes[0].Changed != 1 {
		t.Errorf("compare epoch:1 → latest: %s %+v, %v", verdict, changes, err)
	}
}

// TestReaderCaseCollisions: PostgreSQL's public."T" and public.t are two
// tables, DuckDB's are one name. Each reads by its alias, none by any case
// of the plain name (which would read one of them silently), the tables
// list shows the aliases, and a diff keeps them apart.
func TestReaderCaseCollisions(t *testing.T) {
	ctx := context.Background()
	s := newTestSinkOf(t, "public.T", "public.t", "Shop.x", "shop.y")
	v := s.flush(1, map[string][]change{
		"public.T": {{cdc.OpInsert, 0x200, 1, "upper"}},
		"public.t": {{cdc.OpInsert, 0x200, 1, "lower"}, {cdc.OpInsert, 0x200, 2, "lower"}},
		"Shop.x":   {{cdc.OpInsert, 0x200, 1, "x"}},
		"shop.y":   {{cdc.OpInsert, 0x200, 1, "y"}},
	})
	r := newReader(t, s)
	at, err := r.Resolve(ctx, "")
	if err != nil || at.Version() != v.Version {
		t.Fatalf("newest: %v, %v", at.Version(), err)
	}
	names := query.ViewNames(at.Manifest)
	upper, lower := names["public.T"].String(), names["public.t"].String()
	if upper == lower || strings.EqualFold(upper, lower) {
		t.Fatalf("aliases %s and %s are one name to DuckDB", upper, lower)
	}
	if got := one(t, r, at, "SELECT string_agg(note, ',') FROM "+upper); got != "upper" {
		t.Errorf("%s = %v, want the rows of public.\"T\"", upper, got)
	}
	if got := one(t, r, at, "SELECT count(*) FROM "+lower); got != int64(2) {
		t.Errorf("%s = %v rows, want public.t's 2", lower, got)
	}
	for _, plain := range []string{`public."T"`, `public.t`, `T`, `t`} {
		if _, err := r.Query(ctx, at, "SELECT count(*) FROM "+plain); !errors.Is(err, query.ErrInvalid) {
			t.Errorf("%s resolved (%v); it names two tables and must fail", plain, err)
		}
	}
	// Schemas that differ only in case share one DuckDB schema; their
	// tables keep their own names.
	if got := one(t, r, at, `SELECT (SELECT note FROM "Shop".x) || (SELECT note FROM shop.y)`); got != "xy" {
		t.Errorf("Shop.x and shop.y: %v", got)
	}
	ts, err := r.Tables(ctx, at)
	if err != nil || len(ts) != 4 {
		t.Fatalf("tables: %+v, %v", ts, err)
	}
	views := map[string]string{}
	for _, tb := range ts {
		views[tb.Name] = tb.View
	}
	if views["public.T"] != upper || views["public.t"] != lower || views["Shop.x"] != "" {
		t.Errorf("tables list the views %v, want %s, %s and none for the others", views, upper, lower)
	}
	from, _ := r.Resolve(ctx, "epoch:0")
	counts, err := r.Diff(ctx, from, at, nil)
	if err != nil || counts["public.T"].Inserted != 1 || counts["public.t"].Inserted != 2 {
		t.Errorf("diff: %+v, %v", counts, err)
	}
}

// TestReaderBranchPastRetention: a branch pins its version, so it is read
// even once the window's oldest version is past it; the same version asked
// for by number is outside the window.
func TestReaderBranchPastRetention(t *testing.T) {
	ctx := context.Background()
	s := newTestSink(t)
	v2 := s.flush(1, map[string][]change{"public.orders": {{cdc.OpInsert, 0x200, 1, "a"}}})
	if _, err := refs.Follow(ctx, s.store, v2, refs.ModeManual, s.now); err != nil {
		t.Fatal(err)
	}
	v3 := s.flush(2, map[string][]change{"public.orders": {{cdc.OpInsert, 0x300, 2, "b"}}})
	r := newReader(t, s)
	l, err := r.Refs(ctx, 10)
	if err != nil || len(l.Tags) != 3 {
		t.Fatalf("refs: %+v, %v", l, err)
	}
	if err := manifest.NewHistory(s.store).SetOldest(ctx, v3.Version); err != nil {
		t.Fatal(err)
	}
	// The tag of a flush that left the window names the window.
	if _, err := r.Resolve(ctx, l.Tags[1].Name); !errors.Is(err, manifest.ErrOutsideRetention) {
		t.Errorf("tag %s of version %d, before the window: %v, want ErrOutsideRetention", l.Tags[1].Name, v2.Version, err)
	}
	at, err := r.Resolve(ctx, "main")
	if err != nil {
		t.Fatalf("main, pinned at version %d before the window: %v", v2.Version, err)
	}
	if at.Version() != v2.Version {
		t.Fatalf("main resolved to version %d, want %d", at.Version(), v2.Version)
	}
	if got := one(t, r, at, `SELECT count(*) FROM public.orders`); got != int64(1) {
		t.Errorf("main reads %v rows, want 1", got)
	}
	if _, err := r.Resolve(ctx, strconv.FormatUint(v2.Version, 10)); !errors.Is(err, manifest.ErrOutsideRetention) {
		t.Errorf("version %d by number: %v, want ErrOutsideRetention", v2.Version, err)
	}
}

// TestReaderCollected: a version whose file was deleted (garbage
// collection took it) fails with ErrCollected, whether its engine was
// built before or is built after the deletion, never with fewer rows.
func TestReaderCollected(t *testing.T) {
	ctx := context.Background()
	s := newTestSink(t)
	v2 := s.flush(1, map[string][]change{"public.orders": {{cdc.OpInsert, 0x200, 1, "a"}, {cdc.OpInsert, 0x200, 2, "b"}}})
	s.flush(2, map[string][]change{"public.orders": {{cdc.OpInsert, 0x300, 3, "c"}}})
	r := newReader(t, s)
	at, err := r.Resolve(ctx, "2")
	if err != nil {
		t.Fatal(err)
	}
	if got := one(t, r, at, `SELECT count(*) FROM public.orders`); got != int64(2) {
		t.Fatalf("version 2: %v rows", got)
	}
	if err := os.Remove(filepath.Join(s.dir, v2.Tables["public.orders"].Deltas[0].Files[0].Path)); err != nil {
		t.Fatal(err)
	}
	_, err = r.Query(ctx, at, `SELECT count(*) FROM public.orders`)
	if !errors.Is(err, query.ErrCollected) {
		t.Fatalf("a query on the built engine after its file was deleted: %v, want ErrCollected", err)
	}
	// The engine was dropped: the next one is built, and fails the same way.
	_, err = r.Query(ctx, at, `SELECT count(*) FROM public.orders`)
	if !errors.Is(err, query.ErrCollected) {
		t.Fatalf("a new engine on the version: %v, want ErrCollected", err)
	}
	latest, _ := r.Resolve(ctx, "")
	if _, err := r.Query(ctx, latest, `SELECT count(*) FROM public.orders`); !errors.Is(err, query.ErrCollected) {
		t.Errorf("the newest version names the deleted file too: %v", err)
	}
}

// The read path's transports find the aliases through this capability.
var _ changefeed.ViewNamer = (*query.Reader)(nil)

// TestReaderGrace: with Grace, a request for the newest version right after
// a new one lands is answered from the previous (ready) version while the
// new one's engine builds in the background, then from the new one; with
// Grace over (or none), it is the new one at once. Either answer is one
// whole version, named by At.
func TestReaderGrace(t *testing.T) {
	ctx := context.Background()
	s := newTestSink(t)
	v2 := s.flush(1, map[string][]change{"public.orders": {{cdc.OpInsert, 0x200, 1, "a"}}})
	openN := func(grace time.Duration, engines int) *query.Reader {
		r, err := query.NewReader(query.ReaderOptions{Sink: s.store, TempDir: filepath.Join(t.TempDir(), "query"), Grace: grace, Engines: engines})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	open := func(grace time.Duration) *query.Reader { return openN(grace, 0) }
	count := func(r *query.Reader, at query.At) any {
		return one(t, r, at, `SELECT count(*) FROM public.orders`)
	}
	graced, strict := open(time.Hour), open(0)
	for _, r := range []*query.Reader{graced, strict} {
		at, err := r.Resolve(ctx, "")
		if err != nil || at.Version() != v2.Version || count(r, at) != int64(1) {
			t.Fatalf("first version: %d, %v", at.Version(), err)
		}
	}
	v3 := s.flush(2, map[string][]change{"public.orders": {{cdc.OpInsert, 0x300, 2, "b"}}})

	at, err := graced.Resolve(ctx, "")
	if err != nil || at.Version() != v2.Version {
		t.Fatalf("graced, right after version %d landed: version %d, %v; want the ready %d", v3.Version, at.Version(), err, v2.Version)
	}
	if got := count(graced, at); got != int64(1) {
		t.Errorf("graced answer from version %d: %v rows, want 1", at.Version(), got)
	}
	deadline := time.Now().Add(30 * time.Second)
	for at.Version() != v3.Version {
		if time.Now().After(deadline) {
			t.Fatalf("graced: still version %d after 30 s; the background build of %d never became ready", at.Version(), v3.Version)
		}
		time.Sleep(10 * time.Millisecond)
		if at, err = graced.Resolve(ctx, ""); err != nil {
			t.Fatal(err)
		}
	}
	if got := count(graced, at); got != int64(2) {
		t.Errorf("graced, version %d: %v rows, want 2", at.Version(), got)
	}

	if at, err := strict.Resolve(ctx, ""); err != nil || at.Version() != v3.Version || count(strict, at) != int64(2) {
		t.Errorf("without grace: version %d, %v; want %d at once", at.Version(), err, v3.Version)
	}

	// An older version's engine, ready because a request read as of it,
	// never stands in: the newest never goes backwards. (One engine: the
	// request as of the older version evicts the newest's.)
	older := openN(time.Hour, 1)
	for _, point := range []string{"", strconv.FormatUint(v2.Version, 10)} {
		at, err := older.Resolve(ctx, point)
		if err != nil {
			t.Fatal(err)
		}
		count(older, at)
	}
	v4 := s.flush(3, map[string][]change{"public.orders": {{cdc.OpInsert, 0x400, 3, "c"}}})
	if at := mustResolve(t, older); at.Version() != v4.Version {
		t.Errorf("graced, after version %d landed, the last answered (%d) evicted: version %d, want %d itself, never the older %d",
			v4.Version, v3.Version, at.Version(), v4.Version, v2.Version)
	}

	// Grace over: the newest is answered (and waited for) however long
	// its engine takes.
	short := open(time.Nanosecond)
	if _, err := short.Resolve(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := short.Query(ctx, mustResolve(t, short), `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	v5 := s.flush(4, map[string][]change{"public.orders": {{cdc.OpInsert, 0x500, 4, "d"}}})
	mustResolve(t, short) // first seen now: Grace runs from here
	time.Sleep(time.Millisecond)
	if at := mustResolve(t, short); at.Version() != v5.Version {
		t.Errorf("grace over: version %d, want the newest %d", at.Version(), v5.Version)
	}
}

func mustResolve(t *testing.T, r *query.Reader) query.At {
	t.Helper()
	at, err := r.Resolve(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// TestReaderCountsOnce: Tables counts each view once per version, and a
// new version counts again.
func TestReaderCountsOnce(t *testing.T) {
	ctx := context.Background()
	s := newTestSinkOf(t, "public.orders")
	s.flush(1, map[string][]change{"public.orders": {{cdc.OpInsert, 0x200, 1, "a"}, {cdc.OpInsert, 0x200, 2, "b"}}})
	r := newReader(t, s)
	at := mustResolve(t, r)
	for range 2 {
		ts, err := r.Tables(ctx, at)
		if err != nil || len(ts) != 1 || ts[0].Rows != 2 {
			t.Fatalf("tables: %+v, %v", ts, err)
		}
	}
	s.flush(2, map[string][]change{"public.orders": {{cdc.OpDelete, 0x300, 1, ""}}})
	ts, err := r.Tables(ctx, mustResolve(t, r))
	if err != nil || len(ts) != 1 || ts[0].Rows != 1 {
		t.Fatalf("tables after a delete: %+v, %v", ts, err)
	}
}
