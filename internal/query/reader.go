package query

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blobcache"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

// Sink is what the read path needs of the storage: objects and the
// conditional reads of the manifest and the refs.
type Sink interface {
	blob.Store
	blob.Conditional
}

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	Sink Sink
	// CacheDir and CacheBytes bound the local copies of an object store's
	// files (internal/blobcache); a filesystem sink is read in place.
	CacheDir   string
	CacheBytes int64
	// TempDir is DuckDB's private spill directory; Limits bound every
	// request.
	TempDir string
	Limits  Limits
	// Isolation is where each engine's DuckDB runs (Options.Isolation).
	Isolation string
	// Engines is how many versions (with their bound) keep a ready engine
	// (0: DefaultEngines).
	Engines int
	// Grace lets a request for the newest version be answered from the
	// previous one while the newest's engine builds, for at most Grace
	// after the Reader first saw it (0: every request waits for the
	// newest). A server sets it: with a version every second, waiting for
	// each new engine would put a build in front of nearly every request.
	// The answer names the version it read, which is whole either way.
	Grace time.Duration
	// PrivateCacheIn, when set, is where a private cache is made when
	// another process (or Reader) holds CacheDir: a second terminal's query
	// on an object-store sink beside a server gets its own copies, removed
	// at Close, rather than failing with ErrCacheInUse.
	PrivateCacheIn string
	Log            *slog.Logger
}

// ErrPoint is the class of an error for a point that names nothing
// (readpath.ErrPoint).
var ErrPoint = readpath.ErrPoint

// ErrCacheInUse is the class of NewReader's error when another process
// (or Reader) holds ReaderOptions.CacheDir: one cache per directory.
var ErrCacheInUse = blobcache.ErrInUse

// pointError is an error of class ErrPoint, its message unchanged.
type pointError struct{ error }

func (e pointError) Is(target error) bool { return target == ErrPoint }
func (e pointError) Unwrap() error        { return e.error }

// DefaultEngines is how many ready engines a Reader keeps.
const DefaultEngines = 4

// Reader answers SQL over the sink's committed versions (design.md §11):
// every captured table as its current state under its PostgreSQL name, its
// change rows under changes.<schema>.<table>, at the newest version or at
// any point the history still holds. It is safe for concurrent use.
type Reader struct {
	o       ReaderOptions
	files   blobcache.Source
	private string // the private cache directory made for this Reader (PrivateCacheIn), removed at Close
	history *manifest.History

	// warm owns the background builds of Grace; Close cancels and waits.
	warm   sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	engines map[string]*list.Element // key → element of lru, whose value is *engineEntry
	lru     *list.List
	// newest is the newest version's engine key Resolve saw, and since
	// when (Grace).
	newest      string
	newestSince time.Time
	// answered is the newest version Resolve("") has answered with.
	answered uint64
}

// engineEntry is one ready engine: the views of one version (and bound),
// the leases on the local files they read.
type engineEntry struct {
	key     string
	at      At
	ready   chan struct{} // closed once engine or err is set
	engine  *Engine
	paths   []string // the local files its views read
	err     error
	release func()
	users   int  // requests running on it
	evicted bool // out of the LRU: closed when the last user is done

	// counts are the live rows of its views, counted once (Reader.Tables).
	countMu sync.Mutex
	counts  map[string]int64
}

// isReady reports whether en finished building, without an error.
func (en *engineEntry) isReady() bool {
	select {
	case <-en.ready:
		return en.err == nil
	default:
		return false
	}
}

// NewReader opens the read path on a sink.
func NewReader(o ReaderOptions) (*Reader, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Engines <= 0 {
		o.Engines = DefaultEngines
	}
	if err := CheckIsolation(o.Isolation); err != nil {
		return nil, fmt.Errorf("read path: %w", err)
	}
	files, err := blobcache.Open(o.Sink, blobcache.Options{Dir: o.CacheDir, MaxBytes: o.CacheBytes, Log: o.Log})
	private := ""
	if errors.Is(err, ErrCacheInUse) && o.PrivateCacheIn != "" {
		var perr error
		if private, perr = os.MkdirTemp(o.PrivateCacheIn, "cache-run-"); perr != nil {
			return nil, fmt.Errorf("read path: %w; and a private cache: %w", err, perr)
		}
		o.Log.Debug("the shared file cache is in use; this reader uses a private one", "dir", private)
		files, err = blobcache.Open(o.Sink, blobcache.Options{Dir: private, MaxBytes: o.CacheBytes, Log: o.Log})
	}
	if err != nil {
		if private != "" {
			os.RemoveAll(private)
		}
		return nil, fmt.Errorf("read path: %w", err)
	}
	r := &Reader{o: o, files: files, private: private, history: manifest.NewHistory(o.Sink), engines: map[string]*list.Element{}, lru: list.New()}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// Close closes every engine and the file cache, after the background
// builds (Grace) finished.
func (r *Reader) Close() error {
	r.cancel()
	r.warm.Wait()
	r.mu.Lock()
	var entries []*engineEntry
	for e := r.lru.Front(); e != nil; e = e.Next() {
		entries = append(entries, e.Value.(*engineEntry))
	}
	r.lru.Init()
	clear(r.engines)
	r.mu.Unlock()
	var errs []error
	for _, en := range entries {
		<-en.ready
		if en.engine != nil {
			errs = append(errs, en.engine.Close())
			en.release()
		}
	}
	errs = append(errs, r.files.Close())
	if r.private != "" {
		errs = append(errs, os.RemoveAll(r.private))
	}
	return errors.Join(errs...)
}

// At is a point of the sink's history, resolved (readpath.At).
type At = readpath.At

// Resolve finds a point: "" (the newest version), a branch (staging,
// main), a tag (raw@<time>), epoch:N, lsn:X/Y, an RFC 3339 time, or a
// manifest version number. A point the history no longer holds is an
// error matching manifest.ErrOutsideRetention that names the oldest point
// available.
func (r *Reader) Resolve(ctx context.Context, point string) (At, error) {
	if point == "" || point == "latest" {
		m, _, err := manifest.Load(ctx, r.o.Sink)
		if err != nil {
			return At{}, err
		}
		at := At{Name: point, Manifest: m}
		if r.o.Grace > 0 {
			at = r.latest(at)
		}
		return at, nil
	}
	p, err := manifest.ParsePoint(point)
	if err != nil {
		return At{}, pointError{err}
	}
	if p.Kind == manifest.PointRef {
		var branch bool
		if p, branch, err = r.ref(ctx, point); err != nil {
			return At{}, err
		}
		if branch {
			// A branch pins its version: garbage collection keeps its log
			// and files past the retention window, so it is read whatever
			// the window's oldest version is.
			m, err := r.history.At(ctx, p.Version)
			if err != nil {
				return At{}, fmt.Errorf("branch %s: %w", point, err)
			}
			return At{Name: point, Manifest: m}, nil
		}
	}
	res, err := r.history.Resolve(ctx, p)
	if err != nil {
		return At{}, err
	}
	m, err := r.history.At(ctx, res.Version)
	if err != nil {
		return At{}, err
	}
	return At{Name: point, Manifest: m, Bound: mergesql.Bound{LSN: res.UpToLSN, Time: res.UpToTime}}, nil
}

// ref turns a branch or tag name into the point it names; branch says
// which it was.
func (r *Reader) ref(ctx context.Context, name string) (p manifest.Point, branch bool, err error) {
	if t, ok := refs.ParseTag(name); ok {
		hd, found, err := r.history.FlushVersion(ctx, t)
		if err != nil {
			return manifest.Point{}, false, err
		}
		if !found {
			if oldest, err := r.history.Oldest(ctx); err == nil && t.Before(oldest.FlushedAt) {
				// The tag's flush has left the window: say so, with the window.
				newest, _ := r.history.Latest(ctx)
				return manifest.Point{}, false, &manifest.OutsideRetentionError{Point: manifest.Point{Kind: manifest.PointRef, Ref: name}, Oldest: oldest, Newest: newest}
			}
			return manifest.Point{}, false, pointError{fmt.Errorf("tag %s names no flush the history holds (pg-cdc refs lists the newest)", name)}
		}
		// A tag names its flush, whose epoch is whole in the last version
		// that has it (see History.Resolve).
		return manifest.Point{Kind: manifest.PointEpoch, Epoch: hd.Epoch}, false, nil
	}
	rf, _, err := refs.Load(ctx, r.o.Sink)
	if err != nil && !errors.Is(err, refs.ErrNoRefs) {
		return manifest.Point{}, false, err
	}
	if b, ok := rf.Branch(name); ok {
		return manifest.Point{Kind: manifest.PointVersion, Version: b.ManifestVersion}, true, nil
	}
	return manifest.Point{}, false, pointError{fmt.Errorf("point %q: not a branch (%s), a tag (raw@<RFC 3339 time>), epoch:N, lsn:X/Y, an RFC 3339 time or a version number",
		name, strings.Join(branchNames(rf), ", "))}
}

func branchNames(rf *refs.Refs) []string {
	if rf == nil {
		return []string{"none yet"}
	}
	var out []string
	for name := range rf.Branches {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Query runs one SQL query at a point. A query that fails because files
// of its version were deleted meanwhile (the version left the history's
// retention and garbage collection took them) fails with ErrCollected,
// never with fewer rows: DuckDB reads the files the views name, and a
// missing one is an error, not an empty part.
func (r *Reader) Query(ctx context.Context, at At, sql string, args ...any) (*Result, error) {
	en, done, err := r.engine(ctx, at)
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := en.engine.Query(ctx, sql, args...)
	if err != nil && !errors.Is(err, ErrRefused) && ctx.Err() == nil {
		if gone := missing(en.paths); gone != "" {
			r.forget(en)
			return nil, &CollectedError{Version: at.Version(), File: gone, Err: err}
		}
	}
	return res, err
}

// ErrCollected is the class of a query that failed because garbage
// collection deleted files of its version (readpath.CollectedError).
var ErrCollected = readpath.ErrCollected

// CollectedError names the version and one of its files that is gone.
type CollectedError = readpath.CollectedError

// missing returns the first of paths that no longer exists, or "".
func missing(paths []string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return p
		}
	}
	return ""
}

// forget takes en out of the LRU (its files are gone); it closes when its
// last user is done.
func (r *Reader) forget(en *engineEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.engines[en.key]; ok && el.Value == en {
		r.lru.Remove(el)
		delete(r.engines, en.key)
		en.evicted = true
		en.users++ // the reference done drops below
	} else {
		return
	}
	go r.done(en)
}

// latest returns the point to answer a request for the newest version,
// at: at itself when its engine is ready, Grace has passed since at was
// first seen, or the version last answered as the newest has no ready
// engine any more; else that version, while at's engine builds in the
// background. Only the version last answered as the newest stands in, so
// the newest never goes backwards between two answers (an older version's
// engine, ready for a request as of it, may have lost its files to
// garbage collection since).
func (r *Reader) latest(at At) At {
	key := engineKey(at)
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if key != r.newest {
		r.newest, r.newestSince = key, now
	}
	el, building := r.engines[key]
	answer := func(a At) At {
		r.answered = max(r.answered, a.Version())
		return a
	}
	if building && el.Value.(*engineEntry).isReady() || now.Sub(r.newestSince) >= r.o.Grace {
		return answer(at)
	}
	var prev *engineEntry
	for e := r.lru.Front(); e != nil; e = e.Next() {
		en := e.Value.(*engineEntry)
		// A whole version, never a point inside one.
		if en.at.Bound.IsZero() && en.at.Version() == r.answered && en.at.Version() < at.Version() && en.isReady() {
			prev = en
			break
		}
	}
	if prev == nil {
		return answer(at)
	}
	if !building {
		r.warm.Add(1)
		go func() {
			defer r.warm.Done()
			if _, done, err := r.engine(r.ctx, at); err == nil {
				done()
			} else if r.ctx.Err() == nil {
				// The request that waits for it once Grace is over meets
				// the error itself; here it is only noted.
				r.o.Log.Debug("building the newest version's engine", "version", at.Version(), "err", err)
			}
		}()
	}
	out := prev.at
	out.Name = at.Name
	return out
}

// engineKey names the views of a point.
func engineKey(at At) string {
	return fmt.Sprintf("%d/%d/%d", at.Manifest.Version, int64(at.Bound.LSN), at.Bound.Time.UnixMicro())
}

// engine returns the ready engine of at, building it once, and the
// function the caller calls when done with it.
func (r *Reader) engine(ctx context.Context, at At) (*engineEntry, func(), error) {
	key := engineKey(at)
	r.mu.Lock()
	var en *engineEntry
	if el, ok := r.engines[key]; ok {
		r.lru.MoveToFront(el)
		en = el.Value.(*engineEntry)
		en.users++
		r.mu.Unlock()
	} else {
		en = &engineEntry{key: key, at: at, ready: make(chan struct{}), users: 1}
		r.engines[key] = r.lru.PushFront(en)
		evict := r.trim()
		r.mu.Unlock()
		for _, old := range evict {
			r.done(old)
		}
		en.engine, en.paths, en.release, en.err = r.build(context.WithoutCancel(ctx), at)
		close(en.ready)
	}
	select {
	case <-en.ready:
	case <-ctx.Done():
		r.done(en)
		return nil, nil, ctx.Err()
	}
	if en.err != nil {
		r.mu.Lock()
		if el, ok := r.engines[key]; ok && el.Value == en {
			r.lru.Remove(el)
			delete(r.engines, key)
		}
		r.mu.Unlock()
		r.done(en)
		return nil, nil, en.err
	}
	return en, func() { r.done(en) }, nil
}

// trim takes the least recently used engines past the bound out of the
// LRU; the caller drops their reference (done).
func (r *Reader) trim() []*engineEntry {
	var out []*engineEntry
	for r.lru.Len() > r.o.Engines {
		el := r.lru.Back()
		en := el.Value.(*engineEntry)
		r.lru.Remove(el)
		delete(r.engines, en.key)
		en.evicted = true
		en.users++ // the reference trim's caller drops
		out = append(out, en)
	}
	return out
}

// done drops one reference to en; an evicted engine closes with its last.
func (r *Reader) done(en *engineEntry) {
	r.mu.Lock()
	en.users--
	closing := en.evicted && en.users == 0
	r.mu.Unlock()
	if !closing {
		return
	}
	go func() { // the builder may still be building it
		<-en.ready
		if en.engine != nil {
			if err := en.engine.Close(); err != nil {
				r.o.Log.Warn("closing a query engine", "err", err)
			}
			en.release()
		}
	}()
}

// build opens an engine with the views of at, leasing the files they read.
func (r *Reader) build(ctx context.Context, at At) (*Engine, []string, func(), error) {
	started := time.Now()
	var files []blobcache.File
	for _, key := range slices.Sorted(maps.Keys(at.Manifest.Tables)) {
		files = append(files, tableFiles(at.Manifest.Tables[key])...)
	}
	paths, release, err := r.files.Acquire(ctx, files)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, nil, nil, &CollectedError{Version: at.Version(), File: "(one of its files)", Err: err}
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read the files of version %d: %w", at.Version(), err)
	}
	local := make(map[string]string, len(files))
	for i, f := range files {
		local[f.Key] = paths[i]
	}
	setup, err := Views(at.Manifest, at.Bound, func(key string) (string, error) {
		p, ok := local[key]
		if !ok {
			return "", fmt.Errorf("file %s was not fetched", key)
		}
		return p, nil
	})
	if err != nil {
		release()
		return nil, nil, nil, err
	}
	en, err := Open(ctx, Options{DataDirs: []string{r.files.Dir()}, TempDir: r.o.TempDir, Limits: r.o.Limits, Isolation: r.o.Isolation}, setup)
	if err != nil {
		release()
		if gone := missing(paths); gone != "" { // deleted between the check and the views' binding
			return nil, nil, nil, &CollectedError{Version: at.Version(), File: gone, Err: err}
		}
		return nil, nil, nil, err
	}
	r.o.Log.Debug("query engine ready", "version", at.Version(), "tables", len(at.Manifest.Tables), "files", len(files), "ms", time.Since(started).Milliseconds())
	return en, paths, release, nil
}

// tableFiles are the files of a table's current generation.
func tableFiles(mt *manifest.Table) []blobcache.File {
	var out []blobcache.File
	if mt.Base != nil {
		for _, f := range mt.Base.Files {
			out = append(out, blobcache.File{Key: f.Path, Size: f.Bytes})
		}
	}
	for _, d := range mt.Deltas {
		for _, f := range d.Files {
			out = append(out, blobcache.File{Key: f.Path, Size: f.Bytes})
		}
	}
	return out
}

// History is the history log the Reader resolves points in (the change
// feed reads the window's oldest version from it).
func (r *Reader) History() *manifest.History { return r.history }
