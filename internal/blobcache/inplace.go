package blobcache

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
)

// Source is what the read path needs from either kind of sink: local paths
// of sink files for as long as a query runs. *Cache and *InPlace implement
// it; Open picks one.
type Source interface {
	// Acquire returns a local path per file, in order, valid until release
	// is called (see Cache.Acquire).
	Acquire(ctx context.Context, files []File) (paths []string, release func(), err error)
	// Path returns the local path of one file without a lease.
	Path(ctx context.Context, key string, size int64) (string, error)
	// Dir is the directory every path lies under, for DuckDB's
	// allowed_directories.
	Dir() string
	Close() error
}

var (
	_ Source = (*Cache)(nil)
	_ Source = (*InPlace)(nil)
)

// Open returns an InPlace over a filesystem sink (its files are already
// local and are never copied) and a Cache in o.Dir over any other store. For
// a filesystem sink o is not used and no directory is created.
func Open(store blob.Store, o Options) (Source, error) {
	if s, ok := store.(*fs.Store); ok {
		return NewInPlace(s.Root()), nil
	}
	return New(store, o)
}

// InPlace serves the files of a filesystem sink where they lie, under the
// sink's root (fs.Store.Root). It copies nothing and leases nothing: the
// sink's garbage collection, which keeps every file a retained version
// needs, is what keeps a file there while a query reads it. Each file is
// checked with a stat: a missing one matches blob.ErrNotFound and one of
// the wrong length is a *SizeError, as from a Cache.
type InPlace struct {
	root string
}

// NewInPlace serves files under root, the directory of a filesystem sink
// (absolute, with symbolic links resolved, as fs.Store.Root returns it).
func NewInPlace(root string) *InPlace { return &InPlace{root: root} }

// Dir returns the sink's root.
func (p *InPlace) Dir() string { return p.root }

// Close does nothing: InPlace holds no resources.
func (p *InPlace) Close() error { return nil }

// Acquire checks every file and returns its path in the sink; release does
// nothing.
func (p *InPlace) Acquire(ctx context.Context, files []File) ([]string, func(), error) {
	paths := make([]string, len(files))
	for i, f := range files {
		path, err := p.Path(ctx, f.Key, f.Size)
		if err != nil {
			return nil, nil, err
		}
		paths[i] = path
	}
	return paths, func() {}, nil
}

// Path checks one file and returns its path in the sink.
func (p *InPlace) Path(ctx context.Context, key string, size int64) (string, error) {
	f := File{Key: key, Size: size}
	if err := f.check(); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("sink file %q: %w", key, err)
	}
	path := filepath.Join(p.root, filepath.FromSlash(key))
	fi, err := os.Stat(path)
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return "", fmt.Errorf("sink file %q: %w", key, blob.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("sink file %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("sink file %q: %s is not a regular file", key, path)
	}
	if fi.Size() != size {
		return "", &SizeError{Key: key, Expected: size, Actual: fi.Size()}
	}
	return path, nil
}
