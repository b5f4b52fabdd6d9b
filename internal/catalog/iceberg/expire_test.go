package iceberg_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	iceberg "github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	adapter "github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// metadataDir is the local directory of table id's Iceberg metadata.
func metadataDir(s *sink, id catalog.Ident) string {
	return filepath.Join(append(append([]string{s.dir, "_pgcdc", "iceberg"}, id.Namespace...), id.Name, "metadata")...)
}

// deletesDir is the local directory of state table id's position delete
// files.
func deletesDir(s *sink, id catalog.Ident) string {
	return filepath.Join(filepath.Dir(metadataDir(s, id)), "deletes")
}

// localPath is the local file of a file:// location.
func localPath(t *testing.T, loc string) string {
	t.Helper()
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "file" {
		t.Fatalf("location %q: not a file:// location (%v)", loc, err)
	}
	return filepath.FromSlash(u.Path)
}

// named returns, by snapshot id, the manifest list and the manifests each
// snapshot of table id names (local paths), read with iceberg-go alone.
func named(t *testing.T, cat icecat.Catalog, id catalog.Ident) map[int64][]string {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, append(table.Identifier{}, append(id.Namespace, id.Name)...))
	if err != nil {
		t.Fatal(err)
	}
	fio, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]string{}
	for _, snap := range tbl.Metadata().Snapshots() {
		mfs, err := snap.Manifests(fio)
		if err != nil {
			t.Fatalf("%s: manifests of snapshot %d: %v", id, snap.SnapshotID, err)
		}
		paths := []string{localPath(t, snap.ManifestList)}
		for _, mf := range mfs {
			paths = append(paths, localPath(t, mf.FilePath()))
		}
		out[snap.SnapshotID] = paths
	}
	return out
}

// deleteFiles returns, by snapshot id, the position delete files each
// snapshot of table id names live (local paths), read with iceberg-go
// alone.
func deleteFiles(t *testing.T, cat icecat.Catalog, id catalog.Ident) map[int64][]string {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, append(table.Identifier{}, append(id.Namespace, id.Name)...))
	if err != nil {
		t.Fatal(err)
	}
	fio, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]string{}
	for _, snap := range tbl.Metadata().Snapshots() {
		mfs, err := snap.Manifests(fio)
		if err != nil {
			t.Fatalf("%s: manifests of snapshot %d: %v", id, snap.SnapshotID, err)
		}
		out[snap.SnapshotID] = nil
		for _, mf := range mfs {
			if mf.ManifestContent() != iceberg.ManifestContentDeletes {
				continue
			}
			es, err := mf.FetchEntries(fio, true)
			if err != nil {
				t.Fatalf("%s: manifest %s: %v", id, mf.FilePath(), err)
			}
			for _, e := range es {
				out[snap.SnapshotID] = append(out[snap.SnapshotID], localPath(t, e.DataFile().FilePath()))
			}
		}
	}
	return out
}

// union is every path of refs.
func union(refs map[int64][]string) map[string]bool {
	out := map[string]bool{}
	for _, paths := range refs {
		for _, p := range paths {
			out[p] = true
		}
	}
	return out
}

// avros are the .avro files directly in dir.
func avros(t *testing.T, dir string) map[string]bool { return files(t, dir, ".avro") }

// files are the files ending in ext directly in dir (none when there is no
// dir).
func files(t *testing.T, dir, ext string) map[string]bool {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range es {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ext) {
			out[filepath.Join(dir, e.Name())] = true
		}
	}
	return out
}

// outsideIceberg is every file of the sink outside the tables' Iceberg
// locations (_pgcdc/iceberg/), by path: its size and SHA-256 (pg-cdc's
// Parquet files and its manifest).
func outsideIceberg(t *testing.T, s *sink) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(s.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.dir, p)
		if e.IsDir() {
			if filepath.ToSlash(rel) == "_pgcdc/iceberg" {
				return fs.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%d %x", len(b), sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// currentFilesExist reads table id's current snapshot with iceberg-go and
// checks that every data and delete file it names is on disk: the table
// is whole. It returns how many files it names.
func currentFilesExist(t *testing.T, cat icecat.Catalog, id catalog.Ident) int {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, append(table.Identifier{}, append(id.Namespace, id.Name)...))
	if err != nil {
		t.Fatal(err)
	}
	fio, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := tbl.CurrentSnapshot().Manifests(fio)
	if err != nil {
		t.Fatalf("%s: the current snapshot's manifest list: %v", id, err)
	}
	n := 0
	for _, mf := range mfs {
		es, err := mf.FetchEntries(fio, true)
		if err != nil {
			t.Fatalf("%s: manifest %s: %v", id, mf.FilePath(), err)
		}
		for _, e := range es {
			n++
			if _, err := os.Stat(localPath(t, e.DataFile().FilePath())); err != nil {
				t.Errorf("%s: the current snapshot names %s: %v", id, e.DataFile().FilePath(), err)
			}
		}
	}
	return n
}

// TestExpireDeletesExpiredMetadata publishes a changelog and a state
// table (compactions among the versions, so the state table has position
// delete files, replaced ones too), expires most of their snapshots, and
// checks the metadata files and position delete files only expired
// snapshots named are gone, those of the retained snapshots all there, the
// tables whole and read the same (the state table's tombstones masked as
// before), and every file of the sink outside the Iceberg locations
// untouched, byte for byte.
func TestExpireDeletesExpiredMetadata(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	cat, ad := openCatalog(t, s)
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, SnapshotMaxAge: 24 * time.Hour, Positions: positions(s)})
	const commits, compactions = 30, 3
	for i := range commits {
		lsn := 0x200 + i
		m := s.delta([]row{{cdc.OpInsert, lsn, 10 + i, "x", 0}})
		if i%10 == 9 {
			m = s.compact([]row{{cdc.OpInsert, lsn, 1, "a", 0}, {cdc.OpDelete, lsn, 2, "", 0}, {cdc.OpInsert, lsn, 10 + i, "x", 0}}, 1)
		}
		if _, err := p.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	tables := []struct {
		id    catalog.Ident
		keep  int
		state bool
	}{
		{catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t"), 5, false},
		{catalog.StateIdent(catalog.DefaultPrefix, "public", "t"), 1, true},
	}
	outside := outsideIceberg(t, s)
	type state struct {
		refs, dels map[int64][]string
		avros      map[string]bool
		parquets   map[string]bool // the position delete files on disk
		rows       []string
	}
	before := map[string]state{}
	for _, tb := range tables {
		before[tb.id.String()] = state{named(t, cat, tb.id), deleteFiles(t, cat, tb.id), avros(t, metadataDir(s, tb.id)),
			files(t, deletesDir(s, tb.id), ".parquet"), scan(t, cat, tb.id)}
	}
	if st := before[tables[1].id.String()]; len(st.parquets) != compactions || len(union(st.dels)) != compactions {
		t.Fatalf("the state table: %d position delete files on disk, its snapshots name %d, want %d", len(st.parquets), len(union(st.dels)), compactions)
	}
	equal(t, "the state table (key 2's tombstone masked)", before[tables[1].id.String()].rows, "I:1:a", "I:39:x")
	time.Sleep(5 * time.Millisecond) // every snapshot older than the max age

	// goneOf is what the snapshots of before, not of after, named, and
	// no snapshot of after names; kept is what after names.
	goneOf := func(before, after map[int64][]string) (gone, kept map[string]bool) {
		kept = union(after)
		gone = map[string]bool{}
		for snap, paths := range before {
			if _, ok := after[snap]; ok {
				continue
			}
			for _, p := range paths {
				if !kept[p] {
					gone[p] = true
				}
			}
		}
		return gone, kept
	}
	// check: (a) what only expired snapshots named is gone; (b) what the
	// retained ones name is all there; (c) nothing else went.
	check := func(id catalog.Ident, what string, onDisk, had, gone, kept map[string]bool) {
		t.Helper()
		for p := range gone {
			if onDisk[p] {
				t.Errorf("%s: %s %s, named by expired snapshots only, is still there", id, what, filepath.Base(p))
			}
		}
		for p := range kept {
			if !onDisk[p] {
				t.Errorf("%s: %s %s, named by a retained snapshot, is gone", id, what, filepath.Base(p))
			}
		}
		want := maps.Clone(had)
		maps.DeleteFunc(want, func(p string, _ bool) bool { return gone[p] })
		if !maps.Equal(onDisk, want) {
			t.Errorf("%s: %d %s files left, want %d: those there before less the %d only expired snapshots named", id, len(onDisk), what, len(want), len(gone))
		}
	}
	for _, tb := range tables {
		b := before[tb.id.String()]
		n, err := ad.Expire(ctx, tb.id, time.Millisecond, tb.keep)
		if err != nil {
			t.Fatalf("%s: %v", tb.id, err)
		}
		after := named(t, cat, tb.id)
		if len(after) != tb.keep || len(b.refs) < tb.keep+5 {
			t.Fatalf("%s: %d snapshots, then %d retained, want many then %d", tb.id, len(b.refs), len(after), tb.keep)
		}
		gone, kept := goneOf(b.refs, after)
		if len(gone) < len(b.refs)-tb.keep {
			t.Errorf("%s: only %d files named by expired snapshots alone, fewer than the %d expired manifest lists", tb.id, len(gone), len(b.refs)-tb.keep)
		}
		check(tb.id, "metadata", avros(t, metadataDir(s, tb.id)), b.avros, gone, kept)
		// The position delete files the replacements superseded are
		// gone, the one the retained snapshot names is there.
		goneDels, keptDels := goneOf(b.dels, deleteFiles(t, cat, tb.id))
		if tb.state && (len(goneDels) != compactions-1 || len(keptDels) != 1) {
			t.Errorf("%s: %d position delete files named by expired snapshots only, %d by the retained one, want %d and 1", tb.id, len(goneDels), len(keptDels), compactions-1)
		}
		check(tb.id, "position delete", files(t, deletesDir(s, tb.id), ".parquet"), b.parquets, goneDels, keptDels)
		if n != len(gone)+len(goneDels) {
			t.Errorf("%s: Expire says it deleted %d files, %d were named by expired snapshots only", tb.id, n, len(gone)+len(goneDels))
		}
		// The table loads, scans the same (the tombstones masked as
		// before), and every file its current snapshot names is there.
		equal(t, tb.id.String()+" after expiry", scan(t, cat, tb.id), b.rows...)
		if currentFilesExist(t, cat, tb.id) == 0 {
			t.Errorf("%s: the current snapshot names no file", tb.id)
		}
		// Nothing more to expire: nothing more deleted.
		if n, err := ad.Expire(ctx, tb.id, time.Millisecond, tb.keep); n != 0 || err != nil {
			t.Errorf("%s: a second expiry deleted %d files (%v)", tb.id, n, err)
		}
	}
	// Every data file and pg-cdc file is as it was, byte for byte.
	after := outsideIceberg(t, s)
	if !maps.Equal(after, outside) {
		for _, k := range slices.Sorted(maps.Keys(outside)) {
			if after[k] != outside[k] {
				t.Errorf("%s: %q before expiry, %q after", k, outside[k], after[k])
			}
		}
		for k := range after {
			if _, ok := outside[k]; !ok {
				t.Errorf("%s: new after expiry", k)
			}
		}
	}
	data := 0
	for k := range outside {
		if strings.HasSuffix(k, ".parquet") {
			data++
		}
	}
	if data != 1+commits+compactions {
		t.Errorf("the sink holds %d data files, want %d", data, 1+commits+compactions)
	}
}

// TestExpireBoundsMetadataDir publishes a table 200 times, a minute
// apart on the adapter's clock, expiring at each commit down to the 3
// newest snapshots: its metadata directory stays within a bound that does
// not grow with the commits, and every data file stays. The directory
// holds what the retained snapshots name, and else only manifests younger
// than the sweep's hour of grace: iceberg-go leaves the manifest of a
// commit's new files behind when it merges it into another (once every
// 100 or so commits), and only the sweep deletes those.
func TestExpireBoundsMetadataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("200 commits")
	}
	ctx := context.Background()
	s := newSink(t)
	cat, ad := openCatalog(t, s)
	clock := time.Now()
	adapter.SetNow(ad, func() time.Time { return clock })
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, SnapshotMaxAge: time.Millisecond, SnapshotMinKeep: 3, Positions: positions(s)})
	id := catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")
	dir := metadataDir(s, id)
	// The current metadata file and the 20 its log names; 3 manifest
	// lists; the manifests they name, which iceberg-go merges once a
	// snapshot would name 100 (commit.manifest.min-count-to-merge); and
	// the manifests merges left within the last hours (2 hours: the grace
	// and the time between sweeps).
	const bound = 21 + 3 + (100 + 2) + 3
	const cycles = 200
	most := 0
	born := map[string]int{} // the commit after which a file appeared
	for i := range cycles {
		clock = clock.Add(time.Minute)
		m := s.delta([]row{{cdc.OpInsert, 0x200 + i, 10 + i, "x", 0}})
		if _, err := p.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if _, ok := born[e.Name()]; !ok {
				born[e.Name()] = i
			}
		}
		most = max(most, len(es))
		if len(es) > bound {
			t.Fatalf("after %d commits the metadata directory holds %d files, want at most %d", i+1, len(es), bound)
		}
	}
	t.Logf("at most %d files in the metadata directory over %d commits", most, cycles)
	// Every file was written in the first seconds of real time, past the
	// grace from the clock's first hour on: a file no retained snapshot
	// names is one written since the last sweep, within the last hour.
	want := union(named(t, cat, id))
	for p := range avros(t, dir) {
		if b := born[filepath.Base(p)]; !want[p] && b < cycles-60 {
			t.Errorf("%s: named by no retained snapshot, and there since commit %d of %d: the sweeps left it", filepath.Base(p), b+1, cycles)
		}
	}
	for p := range want {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("named by a retained snapshot: %v", err)
		}
	}
	if n := len(snapshots(t, cat, id)); n != 3 {
		t.Errorf("%d snapshots retained, want 3", n)
	}
	files := catalog.ChangeFiles(s.mc.Current().Tables["public.t"])
	if len(files) != 1+cycles {
		t.Fatalf("%d change files, want %d", len(files), 1+cycles)
	}
	for _, f := range files {
		if st, err := os.Stat(filepath.Join(s.dir, f.Path)); err != nil || st.Size() != f.Bytes {
			t.Errorf("data file %s: %v (written %d bytes)", f.Path, err, f.Bytes)
		}
	}
	if got := len(scan(t, cat, id)); got != 3+cycles {
		t.Errorf("the changelog reads %d rows, want %d", got, 3+cycles)
	}
}

// TestExpireSweepsLeftovers: the metadata files expired snapshots left
// behind (a process that died between the expiry and the deletion, or a
// table expired before expiry deleted anything) are deleted by the first
// expiry of a newly opened adapter once older than an hour; a younger
// unnamed file (a concurrent writer's commit in flight), a file in a
// subdirectory and one that is no .avro stay.
func TestExpireSweepsLeftovers(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	cat, ad := openCatalog(t, s)
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, SnapshotMaxAge: 24 * time.Hour, Positions: positions(s)})
	id := catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")
	for i := range 20 {
		if _, err := p.Publish(ctx, s.delta([]row{{cdc.OpInsert, 0x200 + i, 10 + i, "x", 0}})); err != nil {
			t.Fatal(err)
		}
	}
	rows := scan(t, cat, id)
	time.Sleep(5 * time.Millisecond)
	// Expiry as before: no file deleted.
	tbl, err := cat.LoadTable(ctx, table.Identifier{"pgcdc_changelog", "public", "t"})
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.ExpireSnapshots(table.WithOlderThan(time.Millisecond), table.WithRetainLast(2), table.WithPostCommit(false)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	dir := metadataDir(s, id)
	kept := union(named(t, cat, id))
	left := avros(t, dir)
	maps.DeleteFunc(left, func(p string, _ bool) bool { return kept[p] })
	if len(left) < 18 {
		t.Fatalf("%d files left behind by the expiry, want at least the 18 manifest lists", len(left))
	}
	old := time.Now().Add(-2 * time.Hour)
	for p := range avros(t, dir) {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	put := func(p string, at time.Time) { putFile(t, p, at) }
	inFlight := filepath.Join(dir, "00000000-0000-0000-0000-000000000000-m0.avro")
	put(inFlight, time.Now())
	stay := []string{inFlight, filepath.Join(dir, "sub", "old.avro"), filepath.Join(dir, "notes.txt")}
	put(stay[1], old)
	put(stay[2], old)

	ad2 := adapter.New(cat, "file://"+s.dir) // a new process: the first expiry sweeps
	n, err := ad2.Expire(ctx, id, 24*time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	assertSwept(t, n, left, kept, stay)
	equal(t, "after the sweep", scan(t, cat, id), rows...)

	// Within the hour the same adapter does not sweep again.
	late := filepath.Join(dir, "00000000-0000-0000-0000-000000000001-m0.avro")
	put(late, old)
	if n, err := ad2.Expire(ctx, id, 24*time.Hour, 1); n != 0 || err != nil {
		t.Errorf("a second expiry within the hour deleted %d files (%v)", n, err)
	}
	if _, err := os.Stat(late); err != nil {
		t.Errorf("swept again within the hour: %v", err)
	}
}

// TestExpireSweepsPositionDeletes: the position delete files of state
// table replacements whose snapshots were expired without deleting them
// (by an earlier pg-cdc, or a process that died in between) are deleted
// by the first expiry of a newly opened adapter once older than an hour;
// the one the retained snapshot names, a younger unnamed one (a
// concurrent replacement in flight), a temporary file of the writer and
// a file in a subdirectory stay, the table reads the same, and every
// file outside the Iceberg locations is untouched.
func TestExpireSweepsPositionDeletes(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	cat, ad := openCatalog(t, s)
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, SnapshotMaxAge: 24 * time.Hour, Positions: positions(s)})
	id := catalog.StateIdent(catalog.DefaultPrefix, "public", "t")
	const compactions = 4
	for i := range compactions {
		lsn := 0x200 + i
		s.delta([]row{{cdc.OpDelete, lsn, 2 + i, "", 0}})
		rows := []row{{cdc.OpInsert, lsn, 1, "a", 0}}
		for k := range i + 1 {
			rows = append(rows, row{cdc.OpDelete, lsn, 2 + k, "", 0})
		}
		if _, err := p.Publish(ctx, s.compact(append(rows, row{cdc.OpInsert, lsn, 10 + i, "x", 0}), int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	rows := scan(t, cat, id)
	equal(t, "the state table (the tombstones masked)", rows, "I:1:a", "I:13:x")
	outside := outsideIceberg(t, s)
	time.Sleep(5 * time.Millisecond)
	// Expiry as before: no file deleted.
	tbl, err := cat.LoadTable(ctx, table.Identifier{"pgcdc", "public", "t"})
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.ExpireSnapshots(table.WithOlderThan(time.Millisecond), table.WithRetainLast(1), table.WithPostCommit(false)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	dir := deletesDir(s, id)
	kept := union(deleteFiles(t, cat, id))
	left := files(t, dir, ".parquet")
	maps.DeleteFunc(left, func(p string, _ bool) bool { return kept[p] })
	if len(kept) != 1 || len(left) != compactions-1 {
		t.Fatalf("%d position delete files named by the retained snapshot, %d left behind, want 1 and %d", len(kept), len(left), compactions-1)
	}
	old := time.Now().Add(-2 * time.Hour)
	for p := range files(t, dir, ".parquet") {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	put := func(p string, at time.Time) { putFile(t, p, at) }
	stay := []string{filepath.Join(dir, "99-inflight.parquet"), filepath.Join(dir, ".posdel-1"), filepath.Join(dir, "sub", "1-x.parquet")}
	put(stay[0], time.Now())
	put(stay[1], old)
	put(stay[2], old)

	ad2 := adapter.New(cat, "file://"+s.dir) // a new process: the first expiry sweeps
	n, err := ad2.Expire(ctx, id, 24*time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	assertSwept(t, n, left, kept, stay)
	equal(t, "after the sweep", scan(t, cat, id), rows...)
	if got := outsideIceberg(t, s); !maps.Equal(got, outside) {
		t.Errorf("files outside the Iceberg locations changed: %d before, %d after", len(outside), len(got))
	}
}

// failingFS is the local filesystem whose Remove fails while fail is set.
type failingFS struct {
	icebergio.LocalFS
	fail atomic.Bool
}

func (f *failingFS) Remove(name string) error {
	if f.fail.Load() {
		return &fs.PathError{Op: "remove", Path: name, Err: errors.New("503 from the store")}
	}
	return f.LocalFS.Remove(name)
}

// fsCatalog is a catalog whose tables read and write through fio.
type fsCatalog struct {
	icecat.Catalog
	fio icebergio.IO
}

func (c *fsCatalog) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(),
		func(context.Context) (icebergio.IO, error) { return c.fio, nil }, c), nil
}

// TestExpireRetriesFailedDeletes: a deletion that fails leaves the expiry
// committed and reports the error; the next expiry deletes the files,
// though it expires nothing itself.
func TestExpireRetriesFailedDeletes(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	cat, _ := openCatalog(t, s)
	ffs := &failingFS{}
	ad := adapter.New(&fsCatalog{Catalog: cat, fio: ffs}, "file://"+s.dir)
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, SnapshotMaxAge: 24 * time.Hour, Positions: positions(s)})
	id := catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")
	for i := range 10 {
		if _, err := p.Publish(ctx, s.delta([]row{{cdc.OpInsert, 0x200 + i, 10 + i, "x", 0}})); err != nil {
			t.Fatal(err)
		}
	}
	before := named(t, cat, id)
	time.Sleep(5 * time.Millisecond)
	ffs.fail.Store(true)
	n, err := ad.Expire(ctx, id, time.Millisecond, 2)
	if err == nil || n != 0 {
		t.Fatalf("an expiry whose deletes fail: %d deleted, err %v", n, err)
	}
	after := named(t, cat, id)
	if len(after) != 2 {
		t.Fatalf("%d snapshots retained, want 2: the expiry stands", len(after))
	}
	kept := union(after)
	var gone []string
	for p := range union(before) {
		if !kept[p] {
			gone = append(gone, p)
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: %v, though its delete failed", filepath.Base(p), err)
			}
		}
	}
	ffs.fail.Store(false)
	n, err = ad.Expire(ctx, id, time.Millisecond, 2)
	if err != nil || n != len(gone) {
		t.Errorf("the next expiry deleted %d files (%v), want the %d the first could not", n, err, len(gone))
	}
	for _, p := range gone {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there (%v)", filepath.Base(p), err)
		}
	}
	if currentFilesExist(t, cat, id) != 1+10 {
		t.Errorf("the current snapshot does not name the 11 change files")
	}
}

// putFile writes a one-byte file at p (its directory made) modified at at.
func putFile(t *testing.T, p string, at time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
}

// assertSwept checks a sweep that deleted n files: exactly the files left
// behind are gone, and those a retained snapshot names and those the sweep
// must not touch are there.
func assertSwept(t *testing.T, n int, left, kept map[string]bool, stay []string) {
	t.Helper()
	if n != len(left) {
		t.Errorf("the sweep deleted %d files, want the %d left behind", n, len(left))
	}
	for p := range left {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s, left behind, is still there (%v)", filepath.Base(p), err)
		}
	}
	for p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s, named by a retained snapshot: %v", filepath.Base(p), err)
		}
	}
	for _, p := range stay {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
