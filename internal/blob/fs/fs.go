package fs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

var (
	_ blob.Store       = (*Store)(nil)
	_ blob.Conditional = (*Store)(nil)
	_ blob.Locker      = (*Store)(nil)
)

// Names of the sink's own files (see doc.go).
const (
	tmpPrefix     = ".tmp-"
	lockPrefix    = ".lock-"
	writerLockKey = "_pgcdc/.writer.lock"
)

// maxSyncedDirs bounds the cache of directories known to be durable. Past
// it the cache is cleared, which costs only extra fsyncs.
const maxSyncedDirs = 4096

// Store is a sink rooted at a local directory. It is safe for concurrent use
// by many goroutines and, for PutIf and LockWriter, by many processes.
type Store struct {
	root string // absolute and clean

	mu     sync.Mutex
	synced map[string]bool // directories created or seen, with their entry fsynced in the parent
}

// New returns a store rooted at root. It creates the directory (and its
// parents) if needed.
func New(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("open filesystem sink: no root directory given")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open filesystem sink %s: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o777); err != nil {
		return nil, fmt.Errorf("open filesystem sink %s: %w", root, err)
	}
	// Resolve a symlinked root (storage.path -> /mnt/data): List walks
	// without following links, and would see an empty sink otherwise.
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("open filesystem sink %s: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("open filesystem sink %s: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open filesystem sink %s: not a directory", root)
	}
	// The root itself may have just been created: make its entry durable.
	if err := syncDir(filepath.Dir(abs)); err != nil {
		return nil, fmt.Errorf("open filesystem sink %s: %w", root, err)
	}
	return &Store{root: abs, synced: map[string]bool{}}, nil
}

// Root returns the root directory: absolute, with symbolic links resolved.
func (s *Store) Root() string { return s.root }

// path maps a key to its file, refusing keys that are invalid or that name
// the sink's own scratch files.
func (s *Store) path(key string) (string, error) {
	if err := blob.ValidKey(key); err != nil {
		return "", err
	}
	if key == writerLockKey {
		return "", fmt.Errorf("invalid object key %q: reserved for the writer lock", key)
	}
	for _, part := range strings.Split(key, "/") {
		if strings.HasPrefix(part, tmpPrefix) || strings.HasPrefix(part, lockPrefix) {
			return "", fmt.Errorf("invalid object key %q: names starting with %q or %q are reserved by the filesystem sink", key, tmpPrefix, lockPrefix)
		}
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// hidden reports whether a file is one of the sink's own.
func hidden(name, key string) bool {
	return strings.HasPrefix(name, tmpPrefix) || strings.HasPrefix(name, lockPrefix) || key == writerLockKey
}

// notFound reports errors that mean "no such object": the file is missing,
// or a parent "directory" is a file.
func notFound(err error) bool {
	return errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// refused classifies a write the operating system refused for want of
// permission (EACCES, EPERM) as a configuration error (exit 2): retrying
// it for minutes as if the disk were busy only hides that the sink's
// directory must be made writable. A read-only file system (EROFS) stays
// transient: a remount or a storage failover puts it back, and the stream
// survives it by retrying (deploy/test-harness inject-sink-failure
// readonly). Other errors are unchanged.
func (s *Store) refused(err error) error {
	if err == nil || !errors.Is(err, iofs.ErrPermission) {
		return err
	}
	return &cdc.Error{Class: cdc.ErrUsage, Msg: fmt.Sprintf("filesystem sink %s refused a write", s.root), Cause: err,
		Hint: fmt.Sprintf("make %s and everything under it writable by the user pg-cdc runs as (uid %d), or point storage.path at a directory it owns", s.root, os.Getuid())}
}

// Put writes the object atomically and durably (see doc.go). A reader
// error or a canceled ctx leaves the old object in place.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (err error) {
	defer func() { err = s.refused(err) }()
	p, err := s.path(key)
	if err != nil {
		return fmt.Errorf("put object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	err = s.writeAtomic(ctx, p, func(w io.Writer) error {
		if _, err := io.Copy(w, ctxReader{ctx: ctx, r: r}); err != nil {
			return fmt.Errorf("copy content: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	return nil
}

// ctxReader stops a long copy when ctx is canceled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// writeAtomic writes the file at p through a temporary file in the same
// directory: write, fsync, rename, fsync the directory. ctx is checked
// again just before the rename, so a canceled write is never published.
func (s *Store) writeAtomic(ctx context.Context, p string, write func(io.Writer) error) error {
	dir := filepath.Dir(p)
	tmp, err := s.writeTemp(dir, write)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		os.Remove(tmp) // best effort: a leftover temp file is invisible anyway
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename into place: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	return nil
}

// writeTemp writes a new temporary file in dir, fsyncs and closes it, and
// returns its path. On error the file is removed.
func (s *Store) writeTemp(dir string, write func(io.Writer) error) (_ string, err error) {
	f, err := s.createIn(dir, createTemp)
	if err != nil {
		return "", err
	}
	closed := false
	defer func() {
		if err != nil {
			if !closed {
				f.Close() // the error is moot here
			}
			os.Remove(f.Name()) // best effort: a leftover temp file is invisible anyway
		}
	}()
	if err := write(f); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("fsync temporary file: %w", err)
	}
	closed = true
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("close temporary file: %w", err)
	}
	return f.Name(), nil
}

// createTemp creates a new, uniquely named temporary file in dir. The mode
// is 0666 before the umask, like any file the operator's tools create.
func createTemp(dir string) (*os.File, error) {
	var b [8]byte
	for range 10 {
		rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
		name := filepath.Join(dir, tmpPrefix+hex.EncodeToString(b[:]))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, iofs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("create temporary file in %s: too many name collisions", dir)
}

// createIn makes dir durable and opens a file in it. If a concurrent Delete
// (in this process or another) removes the directory in between, open
// fails with ENOENT, and it starts again. So does a directory whose parent
// the cache remembers but another process removed (a compaction's garbage
// collection pruning an emptied delta/ directory under a running daemon):
// mkdir fails with ENOENT, the cache forgets the path, and the walk makes
// it again from the root.
func (s *Store) createIn(dir string, open func(dir string) (*os.File, error)) (*os.File, error) {
	const attempts = 10
	var err error
	for range attempts {
		if err = s.ensureDir(dir); err != nil {
			if !errors.Is(err, iofs.ErrNotExist) {
				return nil, err
			}
			s.forgetDirs(dir)
			continue
		}
		var f *os.File
		f, err = open(dir)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, iofs.ErrNotExist) {
			return nil, err
		}
		s.forgetDirs(dir)
	}
	return nil, fmt.Errorf("create file in %s: directory keeps disappearing: %w", dir, err)
}

// ensureDir creates dir and its missing parents below the root. Each
// directory's entry is fsynced in its parent before the directory is used,
// whether this call created it or found it (a concurrent creator may not
// have fsynced yet), so that a file made durable inside it cannot vanish
// with the directory in a crash. Directories done once are cached.
func (s *Store) ensureDir(dir string) error {
	rel, err := filepath.Rel(s.root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("directory %s is outside the sink root", dir)
	}
	if rel == "." {
		return nil
	}
	cur := s.root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		parent := cur
		cur = filepath.Join(cur, part)
		s.mu.Lock()
		done := s.synced[cur]
		s.mu.Unlock()
		if done {
			continue
		}
		if err := os.Mkdir(cur, 0o777); err != nil && !errors.Is(err, iofs.ErrExist) {
			return fmt.Errorf("create directory: %w", err)
		}
		if err := syncDir(parent); err != nil {
			return err
		}
		s.mu.Lock()
		if len(s.synced) >= maxSyncedDirs {
			clear(s.synced)
		}
		s.synced[cur] = true
		s.mu.Unlock()
	}
	return nil
}

// forgetDirs drops dir and its parents from the cache, because a Delete may
// have removed them.
func (s *Store) forgetDirs(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for d := dir; d != s.root && len(d) > len(s.root); d = filepath.Dir(d) {
		delete(s.synced, d)
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for fsync: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// Get opens the object for reading.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	f, err := s.open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get object: %w", err)
	}
	return f, nil
}

// open opens the regular file of key; a directory is no object.
func (s *Store) open(ctx context.Context, key string) (*os.File, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%q: %w", key, err)
	}
	f, err := os.Open(p)
	if notFound(err) {
		return nil, fmt.Errorf("%q: %w", key, blob.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%q: %w", key, blob.ErrNotFound)
	}
	return f, nil
}

// List walks only the directories that can hold matching keys and returns
// the regular files whose key starts with prefix, sorted by key. Symbolic
// links are not followed, and the sink's own files are skipped.
func (s *Store) List(ctx context.Context, prefix string) ([]blob.ObjectInfo, error) {
	if err := blob.ValidPrefix(prefix); err != nil {
		return nil, fmt.Errorf("list objects: %w", err)
	}
	start := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
	}
	out := []blob.ObjectInfo{}
	err := filepath.WalkDir(start, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			if notFound(err) {
				return nil // not there, or removed while walking: nothing to list
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if p == start {
				return nil
			}
			dirKey := key + "/"
			if !strings.HasPrefix(dirKey, prefix) && !strings.HasPrefix(prefix, dirKey) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || hidden(d.Name(), key) || !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if notFound(err) {
				return nil // deleted while walking
			}
			return err
		}
		out = append(out, blob.ObjectInfo{Key: key, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list objects %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete removes the object and fsyncs its directory, then removes the
// directories it leaves empty. Deleting a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) (err error) {
	defer func() { err = s.refused(err) }()
	p, err := s.path(key)
	if err != nil {
		return fmt.Errorf("delete object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	fi, err := os.Lstat(p)
	if notFound(err) || err == nil && fi.IsDir() {
		return nil // a directory is not an object: there is nothing to delete
	}
	if err != nil {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	if err := os.Remove(p); err != nil && !notFound(err) {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	dir := filepath.Dir(p)
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	s.pruneDirs(dir)
	return nil
}

// pruneDirs removes dir and its parents while they are empty, stopping
// below the root. It is tidying, not part of Delete's contract, so errors
// end it quietly: the usual one is ENOTEMPTY, which means "done".
func (s *Store) pruneDirs(dir string) {
	for dir != s.root && len(dir) > len(s.root) {
		s.forgetDirs(dir)
		if err := os.Remove(dir); err != nil {
			return
		}
		dir = filepath.Dir(dir)
		if err := syncDir(dir); err != nil {
			return
		}
	}
}
