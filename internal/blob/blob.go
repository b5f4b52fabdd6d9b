// Package blob is the object-store port every sink implements: put, get,
// list and delete, plus an optional conditional put used for the manifest.
//
// Keys are slash-separated paths relative to the sink root. They never start
// with "/" and never contain a ".." element (see ValidKey).
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

var (
	// ErrNotFound is returned by Get and ReadVersion for a missing key.
	ErrNotFound = errors.New("object not found")
	// ErrPrecondition is returned by PutIf when the object's current version
	// is not the one expected.
	ErrPrecondition = errors.New("precondition failed")
)

// Store is the minimal object store.
type Store interface {
	// Put writes the object atomically: a reader sees the old object or the
	// whole new one, never a part. An existing object is replaced. When Put
	// returns nil the object is durable.
	Put(ctx context.Context, key string, r io.Reader) error
	// Get opens the object. A missing key gives an error matching ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// List returns every object whose key starts with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes the object. Deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// ObjectInfo describes one listed object.
type ObjectInfo struct {
	Key  string
	Size int64
	// Modified is when the object was last written, as the store reports
	// it; garbage collection deletes unreferenced objects only once they
	// are older than its grace period.
	Modified time.Time
}

// Version is an opaque token naming one version of an object (an ETag, a
// GCS generation, a content hash). The empty Version means "absent".
type Version string

// Conditional is implemented by stores that can compare-and-swap an object.
type Conditional interface {
	// ReadVersion returns the object's content and its current version. A
	// missing key gives an error matching ErrNotFound.
	ReadVersion(ctx context.Context, key string) ([]byte, Version, error)
	// PutIf writes data only if the object's current version is expected
	// (expected == "" means the object must not exist). Otherwise it returns
	// an error matching ErrPrecondition and changes nothing. On success it
	// returns the new version, and the object is durable.
	PutIf(ctx context.Context, key string, data []byte, expected Version) (Version, error)
}

// Locker is implemented by stores that can hold an exclusive writer lock for
// the life of a process, so that a second writer on the same sink fails fast.
type Locker interface {
	// LockWriter takes the lock or fails at once with an error matching
	// ErrLocked. The returned function releases it. The lock is released by
	// the operating system if the process dies.
	LockWriter(ctx context.Context, owner string) (release func() error, err error)
}

// ErrUnavailable marks an error of the store itself (a request that failed
// after the store's own retries: a network error, a 5xx, a timeout), as
// opposed to a verdict such as ErrNotFound or ErrPrecondition. Callers that
// can redo their work from the manifest (the streamer) retry on it with
// backoff; it says nothing about whether a failed write was applied. It is
// transient (cdc.IsTransient).
var ErrUnavailable = cdc.NewTransient("sink request failed")

// ErrLocked is returned by LockWriter when another process holds the lock.
var ErrLocked = errors.New("sink writer lock is held by another process")

// ValidKey reports an error for keys that could escape the sink root.
func ValidKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") {
		return fmt.Errorf("invalid object key %q", key)
	}
	for _, part := range strings.Split(key, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("invalid object key %q", key)
		}
	}
	return nil
}

// ValidPrefix accepts "" and any prefix of a valid key: the part before a
// trailing "/" must itself be a valid key, so "../" and "/x" are refused.
func ValidPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidKey(strings.TrimSuffix(prefix, "/")); err != nil {
		return fmt.Errorf("invalid prefix %q: %w", prefix, err)
	}
	return nil
}
