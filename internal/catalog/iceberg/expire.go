package iceberg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unique"

	iceberg "github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
)

// Expiry deletes the Iceberg files that only expired snapshots named,
// and nothing else: iceberg-go's own post-commit deletion would delete
// the data files too, which are pg-cdc's (its garbage collection owns
// them). It deletes only two kinds of file, each directly in a directory
// of the table's own, and never one a retained snapshot names: an .avro
// file in the metadata directory (location + "/metadata/": manifest lists
// and manifests), and a .parquet file in the directory where
// writePositionDeletes puts the state tables' position delete files
// (tableLocation + "/deletes/": a state-table replacement supersedes the
// previous one's). Two passes:
//
//   - the difference: once the expiry has committed, the manifest lists of
//     the expired snapshots, the manifests they name and the position
//     delete files those name, less those any snapshot of the table names
//     as it is right before the deletes (loaded afresh: another process
//     sharing the catalog may have committed or expired since the expiry
//     committed). Exact, immediate, and needing only the table's IO to
//     read and remove. What it fails to delete (or to read) is deleted at
//     the table's next expiry (Adapter.retry, in memory).
//   - the sweep, when the table's IO can list (the filesystem can): every
//     such file in the two directories that no retained snapshot names
//     and that was last modified more than sweepGrace ago. It catches
//     what the difference cannot: the files of an expiry whose process
//     stopped before deleting them, of a commit that failed after writing
//     its manifests or its position deletes, the manifest iceberg-go
//     writes for a commit's new files and leaves behind when it merges it
//     into another (once every 100 or so commits:
//     commit.manifest.min-count-to-merge), and the backlog of a table
//     published before expiry deleted anything. It runs at the first
//     expiry of each table after the adapter opens, then at most every
//     sweepEvery.
//
// The current snapshot is always retained. A reader at an expired
// snapshot loses it, as with any Iceberg expiry: that includes a reader
// of metadata loaded before a newer commit, whose expiry removes what
// that metadata held (the snapshot current then too, once older than
// snapshot_max_age and beyond snapshot_min_keep: a state table's
// replacement adds two snapshots at once).
const (
	// sweepGrace is how old an unnamed file must be for the sweep to
	// delete it: a younger one may be a concurrent writer's (another
	// process sharing the catalog) whose commit has not landed yet.
	sweepGrace = time.Hour
	// sweepEvery is how often each table's directories are swept.
	sweepEvery = time.Hour
	// sweepMax bounds the files one sweep deletes in a directory, so a
	// table's backlog does not hold one publication up: a sweep cut short
	// runs again at the table's next expiry.
	sweepMax = 1000
)

// Expire removes the snapshots older than maxAge, keeping the keep newest,
// then deletes the manifest lists, manifests and position delete files
// only the removed snapshots named (never a data file: see above), and
// returns how many files it deleted. An error after the expiry committed leaves
// it committed; the next expiry deletes what this one could not.
func (a *Adapter) Expire(ctx context.Context, id catalog.Ident, maxAge time.Duration, keep int) (int, error) {
	before, err := a.cat.LoadTable(ctx, ident(id))
	if err != nil {
		return 0, err
	}
	tx := before.NewTransaction()
	if err := tx.ExpireSnapshots(table.WithOlderThan(maxAge), table.WithRetainLast(keep), table.WithPostCommit(false)); err != nil {
		return 0, err
	}
	after, err := tx.Commit(ctx)
	if err != nil {
		return 0, err
	}
	n, err := a.collect(ctx, id, before, after)
	if err != nil {
		return n, fmt.Errorf("%s: snapshots expired, deleting the files only they named: %w", id, err)
	}
	return n, nil
}

// collect deletes the files named by the snapshots the expiry
// removed (those of before that after, the table once the expiry
// committed, no longer holds) and those an earlier expiry of the table
// failed to delete, less what any snapshot of the table names right
// before the deletes (retained), and sweeps the table's directories when
// due. It returns how many files it deleted.
func (a *Adapter) collect(ctx context.Context, id catalog.Ident, before, after *table.Table) (int, error) {
	key := id.String()
	kept := map[int64]bool{}
	for _, s := range after.Metadata().Snapshots() {
		kept[s.SnapshotID] = true
	}
	var expired []table.Snapshot
	for _, s := range before.Metadata().Snapshots() {
		if !kept[s.SnapshotID] {
			expired = append(expired, s)
		}
	}
	now := a.now()
	a.mu.Lock()
	retry := a.retry[key]
	sweep := now.Sub(a.swept[key]) >= sweepEvery
	a.mu.Unlock()
	if len(expired) == 0 && len(retry) == 0 && !sweep {
		return 0, nil
	}
	dir, err := metadataDir(after.Location())
	if err != nil {
		return 0, err
	}
	dels := deletesDir(a.tableLocation(id))
	fio, err := after.FS(ctx)
	if err != nil {
		return 0, err
	}
	doomed := map[string]bool{}
	for _, p := range retry {
		doomed[p] = true
	}
	var errs []error
	for _, s := range expired {
		ms, err := a.listed(fio, s)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted already, by a concurrent expiry
		}
		if err != nil {
			errs = append(errs, err) // its files are left to the sweep
			continue
		}
		doomed[s.ManifestList] = true
		for _, m := range ms {
			doomed[m.Value()] = true
		}
	}
	a.mu.Lock()
	for _, s := range expired {
		delete(a.lists, s.ManifestList) // no snapshot will name it again
	}
	a.mu.Unlock()
	retained, err := a.retained(ctx, id, fio)
	if err != nil {
		// What the retained snapshots name is unknown: delete nothing
		// now, all of it at the next expiry, which checks it against
		// them again.
		a.mu.Lock()
		a.retry[key] = slices.Sorted(maps.Keys(doomed))
		a.mu.Unlock()
		return 0, errors.Join(append(errs, err)...)
	}
	var paths []string
	for p := range doomed {
		if !retained[p] && (dir.name(p) != "" || dels.name(p) != "") {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	n, failed, err := remove(ctx, fio, paths)
	if err != nil {
		errs = append(errs, err)
	}
	a.mu.Lock()
	if len(failed) > 0 {
		a.retry[key] = failed
	} else {
		delete(a.retry, key)
	}
	for p := range doomed {
		if !retained[p] {
			delete(a.manifests, p)
		}
	}
	a.mu.Unlock()
	if sweep {
		more := false
		for _, d := range []metaDir{dir, dels} {
			keep := map[string]bool{}
			for p := range retained {
				if name := d.name(p); name != "" {
					keep[name] = true
				}
			}
			m, cut, err := sweepDir(ctx, fio, d, keep, now.Add(-sweepGrace))
			n += m
			more = more || cut
			if err != nil {
				errs = append(errs, fmt.Errorf("sweep %s: %w", d, err))
			}
		}
		if !more {
			a.mu.Lock()
			a.swept[key] = now
			a.mu.Unlock()
		}
	}
	return n, errors.Join(errs...)
}

// retainedAttempts bounds how many times retained reads the table again
// when a concurrent expiry deletes a manifest list while it reads.
const retainedAttempts = 3

// retained returns every manifest list, manifest and position delete file
// that a snapshot of table id names (listed), as its metadata is now: loaded afresh right before the
// deletes, not the metadata the expiry committed. Another process sharing
// the catalog (pg-cdc start, compact, catalog sync) may have committed
// since, and its snapshots name what they carried forward; or expired
// since, and deleted the manifest lists of snapshots the committed
// metadata still held, which then cannot be read. A manifest list gone
// while this reads is such an expiry committing meanwhile: it reads the
// table again, a few times.
func (a *Adapter) retained(ctx context.Context, id catalog.Ident, fio icebergio.IO) (map[string]bool, error) {
	var err error
	for range retainedAttempts {
		var cur *table.Table
		if cur, err = a.cat.LoadTable(ctx, ident(id)); err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for _, s := range cur.Metadata().Snapshots() {
			var ms []unique.Handle[string]
			if ms, err = a.listed(fio, s); err != nil {
				break
			}
			out[s.ManifestList] = true
			for _, m := range ms {
				out[m.Value()] = true
			}
		}
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return nil, err
}

// listed returns the manifests snap's manifest list names and the
// position delete files its delete manifests name (live), read once per
// list (the handles share each path's bytes among the lists naming it). A
// changelog has no delete manifest: listing its snapshots reads only
// their manifest lists.
func (a *Adapter) listed(fio icebergio.IO, snap table.Snapshot) ([]unique.Handle[string], error) {
	a.mu.Lock()
	ms, ok := a.lists[snap.ManifestList]
	a.mu.Unlock()
	if ok {
		return ms, nil
	}
	mfs, err := snap.Manifests(fio)
	if err != nil {
		return nil, fmt.Errorf("manifests of snapshot %d: %w", snap.SnapshotID, err)
	}
	ms = make([]unique.Handle[string], 0, len(mfs))
	for _, mf := range mfs {
		ms = append(ms, unique.Make(mf.FilePath()))
		if mf.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		files, err := a.manifestPaths(fio, mf)
		if err != nil {
			return nil, fmt.Errorf("snapshot %d: %w", snap.SnapshotID, err)
		}
		for _, f := range files {
			ms = append(ms, unique.Make(f))
		}
	}
	if snap.ManifestList != "" {
		a.mu.Lock()
		a.lists[snap.ManifestList] = ms
		a.mu.Unlock()
	}
	return ms, nil
}

// metaDir is a directory expiry deletes from (the table's metadata
// directory, or its position deletes directory), and the suffix of the
// only files it deletes there; a zero metaDir holds none.
type metaDir struct {
	u   *url.URL
	ext string
}

func metadataDir(location string) (metaDir, error) { return tableDir(location, "metadata", ".avro") }

// deletesDir is the directory writePositionDeletes writes the position
// delete files of the table at location in: none when the location holds
// an escape, since writePositionDeletes writes at its literal path and the
// table's IO addresses the unescaped one, which may be another table's.
func deletesDir(location string) metaDir {
	d, err := tableDir(location, deletesSubdir, ".parquet")
	if err != nil || strings.Contains(location, "%") {
		return metaDir{}
	}
	return d
}

// tableDir is the directory sub of the table at location.
func tableDir(location, sub, ext string) (metaDir, error) {
	u, err := url.Parse(strings.TrimSuffix(location, "/"))
	if err != nil || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" || u.Path == "" {
		return metaDir{}, fmt.Errorf("table location %q is no directory expiry can delete from", location)
	}
	return metaDir{u.JoinPath(sub), ext}, nil
}

func (d metaDir) String() string {
	if d.u == nil {
		return ""
	}
	return d.u.String()
}

// name is the file name of the location p when p is a file of d's suffix
// directly in d, "" otherwise: expiry deletes nothing else.
func (d metaDir) name(p string) string {
	if d.u == nil {
		return ""
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != d.u.Scheme || u.Host != d.u.Host || u.User != nil || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" {
		return ""
	}
	name, ok := strings.CutPrefix(u.Path, d.u.Path+"/")
	if !ok || strings.Contains(name, "/") || !strings.HasSuffix(name, d.ext) || name == d.ext {
		return ""
	}
	return name
}

// file is the location of the file name in d.
func (d metaDir) file(name string) string { return d.u.JoinPath(name).String() }

// sweepDir deletes, through fio when it can list, the files of d's suffix
// directly in d whose name is not in keep and that were last modified before
// cutoff, at most sweepMax of them; more reports that it stopped there.
func sweepDir(ctx context.Context, fio icebergio.IO, d metaDir, keep map[string]bool, cutoff time.Time) (n int, more bool, err error) {
	lister, ok := fio.(icebergio.ListableIO)
	if !ok || d.u == nil {
		return 0, false, nil // the difference alone, then
	}
	var paths []string
	root := true
	err = lister.WalkDir(d.String(), func(p string, e fs.DirEntry, err error) error {
		if root {
			root = false
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if err != nil {
			return err
		}
		if e.IsDir() {
			return fs.SkipDir
		}
		// Walked paths are URIs or local paths, by IO: the name is the
		// same in both.
		name := path.Base(filepath.ToSlash(p))
		if !strings.HasSuffix(name, d.ext) || name == d.ext || keep[name] {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !info.ModTime().Before(cutoff) {
			return nil
		}
		if len(paths) == sweepMax {
			more = true
			return fs.SkipAll
		}
		paths = append(paths, d.file(name))
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	n, _, err = remove(ctx, fio, paths)
	return n, more, err
}

// remove deletes paths through fio, a file already gone counting as done
// (a concurrent expiry deleted it, or an earlier attempt whose answer was
// lost), and returns how many it deleted and those it could not.
func remove(ctx context.Context, fio icebergio.IO, paths []string) (int, []string, error) {
	if len(paths) == 0 {
		return 0, nil, nil
	}
	if bulk, ok := fio.(icebergio.BulkRemovableIO); ok {
		deleted, err := bulk.DeleteFiles(ctx, paths)
		if err == nil {
			return len(deleted), nil, nil
		}
		done := map[string]bool{}
		for _, p := range deleted {
			done[p] = true
		}
		failed := slices.DeleteFunc(slices.Clone(paths), func(p string) bool { return done[p] })
		return len(deleted), failed, fmt.Errorf("%d of %d files not deleted: %w", len(failed), len(paths), err)
	}
	n := 0
	var failed []string
	var first error
	for i, p := range paths {
		if err := ctx.Err(); err != nil {
			failed = append(failed, paths[i:]...)
			first = cmp.Or(first, err)
			break
		}
		switch err := fio.Remove(p); {
		case err == nil:
			n++
		case errors.Is(err, fs.ErrNotExist):
		default:
			failed = append(failed, p)
			first = cmp.Or(first, err)
		}
	}
	if len(failed) > 0 {
		return n, failed, fmt.Errorf("%d of %d files not deleted, the first: %w", len(failed), len(paths), first)
	}
	return n, nil, nil
}
