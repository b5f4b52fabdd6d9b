package blobcache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

// DefaultDownloads is how many downloads run at once unless
// Options.Downloads says otherwise.
const DefaultDownloads = 4

// Options configure a Cache.
type Options struct {
	// Dir holds the cached files. It is created (0700) if missing and must
	// not be accessible by group or others; the cache treats it as its own.
	Dir string
	// MaxBytes bounds the bytes of cached files not in use (see doc.go).
	MaxBytes int64
	// Downloads bounds concurrent downloads; 0 means DefaultDownloads.
	Downloads int
	// Log gets one debug line per eviction burst; nil discards.
	Log *slog.Logger
}

// Cache is a bounded read-through cache of immutable sink files in a local
// directory (see doc.go). It is safe for concurrent use.
type Cache struct {
	store     blob.Store
	dir       string // absolute, symbolic links resolved
	max       int64
	downloads int
	log       *slog.Logger
	sem       chan struct{} // one token per running download
	lock      *os.File      // holds the flock on Dir/.lock

	mu      sync.Mutex
	entries map[string]*entry // by local name
	lru     list.List         // of *entry, ready ones only, most recently used first
	used    int64             // bytes of ready entries and of downloads under way
	closed  bool
}

type state int

const (
	absent      state = iota // not on disk; the next caller downloads it
	downloading              // a caller is downloading it; flight says when it ends
	ready                    // on disk, whole, under its local name
)

// entry is one (key, size). It stays in Cache.entries while it is ready or
// while refs > 0.
type entry struct {
	file   File // Key is "" for a file found at start until a caller names it
	name   string
	state  state
	flight *flight       // while downloading
	refs   int           // leases and callers waiting on it: never evicted while > 0
	elem   *list.Element // in Cache.lru while ready
}

// flight is one download attempt. err and abandoned are written before
// done is closed.
type flight struct {
	done chan struct{}
	err  error
	// abandoned: the downloading caller's context ended, so the failure
	// says nothing about the object and a waiter should try itself.
	abandoned bool
}

// New opens the cache in o.Dir on store (see doc.go for what it does with
// files found there). Close releases the directory.
func New(store blob.Store, o Options) (*Cache, error) {
	if store == nil {
		return nil, errors.New("open blob cache: no store")
	}
	if o.Dir == "" {
		return nil, errors.New("open blob cache: no directory given")
	}
	if o.MaxBytes <= 0 {
		return nil, fmt.Errorf("open blob cache %s: the size bound must be positive, not %d", o.Dir, o.MaxBytes)
	}
	if o.Downloads < 0 {
		return nil, fmt.Errorf("open blob cache %s: negative number of downloads %d", o.Dir, o.Downloads)
	}
	if o.Downloads == 0 {
		o.Downloads = DefaultDownloads
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	dir, err := privateDir(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("open blob cache: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open blob cache: %w", err)
	}
	c := &Cache{
		store:     store,
		dir:       dir,
		max:       o.MaxBytes,
		downloads: o.Downloads,
		log:       o.Log,
		sem:       make(chan struct{}, o.Downloads),
		lock:      lock,
		entries:   map[string]*entry{},
	}
	if err := c.load(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("open blob cache %s: %w", dir, err)
	}
	c.mu.Lock()
	ev := c.evictLocked()
	c.mu.Unlock()
	c.logEviction(ev)
	return c, nil
}

// privateDir creates dir 0700 if missing and returns it absolute with
// symbolic links resolved (DuckDB compares resolved paths against its
// allowed directories). An existing directory open to group or others is
// refused rather than chmod-ed: it may be shared (/tmp), and the cache
// removes files in it.
func privateDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("create directory %s: %w", dir, err)
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("directory %s: %w", dir, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("directory %s: not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("directory %s is accessible by other users (mode %#o): use a private directory (chmod 0700) that holds nothing else", dir, perm)
	}
	return abs, nil
}

// lockDir takes an exclusive flock on dir/.lock, failing at once if another
// Cache holds it.
func lockDir(dir string) (*os.File, error) {
	p := filepath.Join(dir, lockName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock directory %s: %w", dir, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close() // our own descriptor: the holder keeps its lock
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("directory %s: %w by another blob cache (this process or another)", dir, ErrInUse)
		}
		return nil, fmt.Errorf("lock directory %s: %w", dir, err)
	}
	return f, nil
}

// load indexes the files a previous process left: temporary files are
// removed, whole files are kept (oldest least recently used), files whose
// length is not the size in their name are removed, and names the cache
// does not make are left alone.
func (c *Cache) load() error {
	des, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("read directory: %w", err)
	}
	type found struct {
		e       *entry
		modTime time.Time
	}
	var kept []found
	for _, de := range des {
		name := de.Name()
		p := filepath.Join(c.dir, name)
		if strings.HasPrefix(name, tmpPrefix) {
			if err := os.Remove(p); err != nil && !errors.Is(err, iofs.ErrNotExist) {
				return fmt.Errorf("remove leftover download: %w", err)
			}
			continue
		}
		size, ok := parseName(name)
		if !ok || !de.Type().IsRegular() {
			continue // not ours (or .lock)
		}
		fi, err := de.Info()
		if errors.Is(err, iofs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("stat cached file: %w", err)
		}
		if fi.Size() != size {
			if err := os.Remove(p); err != nil && !errors.Is(err, iofs.ErrNotExist) {
				return fmt.Errorf("remove cached file of the wrong size: %w", err)
			}
			continue
		}
		kept = append(kept, found{&entry{file: File{Size: size}, name: name, state: ready}, fi.ModTime()})
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].modTime.Before(kept[j].modTime) })
	for _, k := range kept {
		k.e.elem = c.lru.PushFront(k.e)
		c.entries[k.e.name] = k.e
		c.used += k.e.file.Size
	}
	return nil
}

// Dir returns the cache directory, under which every path lies: absolute,
// with symbolic links resolved.
func (c *Cache) Dir() string { return c.dir }

// Close releases the directory for another Cache; call it once no Acquire
// or Path is under way (a download still running could lose its temporary
// file to the next Cache's start). Files stay, and paths already handed out
// stay valid; Acquire and Path fail with ErrClosed afterwards.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if err := c.lock.Close(); err != nil {
		return fmt.Errorf("close blob cache %s: %w", c.dir, err)
	}
	return nil
}

// Acquire returns a local path for each file, in order, downloading the
// ones not cached, and leases them: none is evicted until release is
// called (release may be called more than once). On error nothing is
// leased. Two or more files adding up to more than MaxBytes are refused
// with a *TooLargeError; a missing object matches blob.ErrNotFound; a body
// of the wrong length is a *SizeError.
func (c *Cache) Acquire(ctx context.Context, files []File) (paths []string, release func(), err error) {
	distinct, err := distinctFiles(files)
	if err != nil {
		return nil, nil, err
	}
	var total int64
	for _, f := range distinct {
		total += f.Size
	}
	if len(distinct) > 1 && total > c.max {
		return nil, nil, &TooLargeError{Files: len(distinct), Bytes: total, MaxBytes: c.max}
	}
	pinned, missing, err := c.pin(distinct)
	if err != nil {
		return nil, nil, err
	}
	var once sync.Once
	release = func() { once.Do(func() { c.unpin(pinned, true) }) }
	if err := c.ensureAll(ctx, missing); err != nil {
		release()
		return nil, nil, err
	}
	paths = make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(c.dir, localName(f))
	}
	return paths, release, nil
}

// Path returns the local path of one file, downloading it if it is not
// cached. It leases nothing: the file may be evicted as soon as another
// download or release needs room (see doc.go).
func (c *Cache) Path(ctx context.Context, key string, size int64) (string, error) {
	f := File{Key: key, Size: size}
	if err := f.check(); err != nil {
		return "", err
	}
	pinned, missing, err := c.pin([]File{f})
	if err != nil {
		return "", err
	}
	err = c.ensureAll(ctx, missing)
	// No eviction on the way out: that would remove a file larger than
	// the bound before the caller could open it.
	c.unpin(pinned, false)
	if err != nil {
		return "", err
	}
	return filepath.Join(c.dir, localName(f)), nil
}

// distinctFiles checks every file and drops repeats; one key with two sizes
// is refused.
func distinctFiles(files []File) ([]File, error) {
	sizes := make(map[string]int64, len(files))
	var out []File
	for _, f := range files {
		if err := f.check(); err != nil {
			return nil, err
		}
		if s, ok := sizes[f.Key]; ok {
			if s != f.Size {
				return nil, fmt.Errorf("cache file %q: asked for with sizes %d and %d", f.Key, s, f.Size)
			}
			continue
		}
		sizes[f.Key] = f.Size
		out = append(out, f)
	}
	return out, nil
}

// pin takes a reference on the entry of every file, creating those not
// known, and marks the cached ones recently used. missing are the entries
// not ready yet.
func (c *Cache) pin(files []File) (pinned, missing []*entry, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, ErrClosed
	}
	for _, f := range files {
		name := localName(f)
		e := c.entries[name]
		if e == nil {
			e = &entry{file: f, name: name}
			c.entries[name] = e
		}
		if e.file.Key == "" {
			e.file.Key = f.Key // found at start: the key was not known
		}
		e.refs++
		pinned = append(pinned, e)
		if e.state == ready {
			c.lru.MoveToFront(e.elem)
		} else {
			missing = append(missing, e)
		}
	}
	return pinned, missing, nil
}

// unpin drops the references pin took; evict says whether to evict down to
// the bound afterwards.
func (c *Cache) unpin(pinned []*entry, evict bool) {
	c.mu.Lock()
	for _, e := range pinned {
		e.refs--
		if e.refs == 0 && e.state == absent && c.entries[e.name] == e {
			delete(c.entries, e.name) // a failed download nobody waits for
		}
	}
	var ev eviction
	if evict {
		ev = c.evictLocked()
	}
	c.mu.Unlock()
	c.logEviction(ev)
}

// ensureAll makes every entry ready, up to c.downloads at a time; the first
// error cancels the others.
func (c *Cache) ensureAll(ctx context.Context, entries []*entry) error {
	if len(entries) == 1 {
		return c.ensure(ctx, entries[0])
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.downloads)
	for _, e := range entries {
		g.Go(func() error { return c.ensure(gctx, e) })
	}
	return g.Wait()
}

// ensure returns once e is ready: at once if it is, after the download
// under way if there is one, else after downloading it. The caller holds a
// reference on e.
func (c *Cache) ensure(ctx context.Context, e *entry) error {
	for {
		c.mu.Lock()
		file := e.file
		switch e.state {
		case ready:
			c.mu.Unlock()
			return nil
		case downloading:
			f := e.flight
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return fmt.Errorf("wait for download of %q: %w", file.Key, ctx.Err())
			}
			if f.err == nil {
				return nil
			}
			if f.abandoned && ctx.Err() == nil {
				continue // the downloader left; try ourselves
			}
			return f.err
		default:
			f := &flight{done: make(chan struct{})}
			e.state, e.flight = downloading, f
			c.mu.Unlock()
			err := c.download(ctx, file, e.name)
			c.mu.Lock()
			e.flight = nil
			if err == nil {
				e.state = ready
				e.elem = c.lru.PushFront(e)
			} else {
				e.state = absent
			}
			f.err, f.abandoned = err, err != nil && ctx.Err() != nil
			close(f.done)
			c.mu.Unlock()
			return err
		}
	}
}

// download fetches f into its local name, reserving its size first.
func (c *Cache) download(ctx context.Context, f File, name string) (err error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("download %q: %w", f.Key, ctx.Err())
	}
	defer func() { <-c.sem }()
	c.mu.Lock()
	c.used += f.Size
	ev := c.evictLocked()
	c.mu.Unlock()
	c.logEviction(ev)
	defer func() {
		if err != nil {
			c.mu.Lock()
			c.used -= f.Size
			c.mu.Unlock()
		}
	}()
	return c.fetch(ctx, f, filepath.Join(c.dir, name))
}

// fetch copies the object to a temporary file in Dir and renames it to dst
// once it is whole and fsynced.
func (c *Cache) fetch(ctx context.Context, f File, dst string) error {
	rc, err := c.store.Get(ctx, f.Key)
	if err != nil {
		return fmt.Errorf("download %q: %w", f.Key, err)
	}
	defer rc.Close() // read to the point we need; a close error changes nothing
	tmp, err := os.CreateTemp(c.dir, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("download %q: %w", f.Key, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()           // already closed on the success path; moot here
			os.Remove(tmp.Name()) // best effort: New removes leftovers anyway
		}
	}()
	// One byte past the size tells a long body without reading all of it.
	n, err := io.Copy(tmp, io.LimitReader(rc, f.Size+1))
	if err != nil {
		return fmt.Errorf("download %q: %w", f.Key, err)
	}
	if n != f.Size {
		se := &SizeError{Key: f.Key, Expected: f.Size, Actual: n}
		if n > f.Size {
			se.Actual, se.AtLeast = c.storedSize(ctx, f.Key, n)
		}
		return se
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("download %q: fsync: %w", f.Key, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("download %q: %w", f.Key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("download %q: %w", f.Key, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("download %q: %w", f.Key, err)
	}
	renamed = true
	return nil
}

// storedSize asks the store for the length of a body found longer than the
// manifest's size, so the error can name it; failing that, atLeast is the
// lower bound the download saw.
func (c *Cache) storedSize(ctx context.Context, key string, atLeast int64) (int64, bool) {
	infos, err := c.store.List(ctx, key)
	if err != nil {
		return atLeast, true
	}
	for _, i := range infos {
		if i.Key == key && i.Size >= atLeast {
			return i.Size, false
		}
	}
	return atLeast, true
}

// eviction is what one burst removed, for its log line.
type eviction struct {
	files int
	bytes int64
	used  int64
	err   error // the first unlink that failed
}

// evictLocked removes ready entries nobody holds, least recently used
// first, while used exceeds the bound. It unlinks under c.mu, so that a new
// download of the same name cannot land between the index update and the
// unlink.
func (c *Cache) evictLocked() eviction {
	var ev eviction
	for el := c.lru.Back(); el != nil && c.used > c.max; {
		prev := el.Prev()
		e := el.Value.(*entry)
		if e.refs == 0 {
			err := os.Remove(filepath.Join(c.dir, e.name))
			if err != nil && !errors.Is(err, iofs.ErrNotExist) {
				// Keep the entry: the file still takes its space, and
				// the next burst tries again. Failing an unrelated
				// query for our housekeeping would not free the space.
				if ev.err == nil {
					ev.err = err
				}
			} else {
				c.lru.Remove(el)
				e.elem = nil
				delete(c.entries, e.name)
				c.used -= e.file.Size
				ev.files++
				ev.bytes += e.file.Size
			}
		}
		el = prev
	}
	ev.used = c.used
	return ev
}

func (c *Cache) logEviction(ev eviction) {
	if ev.files > 0 {
		c.log.Debug("blob cache evicted files", "files", ev.files, "bytes", ev.bytes, "cached_bytes", ev.used, "max_bytes", c.max)
	}
	if ev.err != nil {
		c.log.Warn("blob cache could not remove a file it evicts; it stays counted and is retried", "dir", c.dir, "err", ev.err)
	}
}
