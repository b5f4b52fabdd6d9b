package memory

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

var (
	_ blob.Store       = (*Store)(nil)
	_ blob.Conditional = (*Store)(nil)
	_ blob.Locker      = (*Store)(nil)
)

type object struct {
	data     []byte
	version  uint64
	modified time.Time
}

// Store is an in-memory object store. The zero value is not usable; call New.
type Store struct {
	mu      sync.Mutex
	objects map[string]object
	next    uint64 // last version handed out
	owner   string // writer lock holder; "" when free
	lockGen uint64 // identifies the current lock, so a stale release is a no-op
}

// New returns an empty store.
func New() *Store {
	return &Store{objects: map[string]object{}}
}

func (s *Store) store(key string, data []byte) blob.Version {
	s.next++
	s.objects[key] = object{data: data, version: s.next, modified: time.Now()}
	return versionOf(s.next)
}

func versionOf(n uint64) blob.Version { return blob.Version(strconv.FormatUint(n, 10)) }

// Put stores a copy of r's bytes. The object appears only after r has been
// read to the end, so a failing reader leaves the old object in place.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	if err := blob.ValidKey(key); err != nil {
		return fmt.Errorf("put object: %w", err)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("put object %q: read content: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put object %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.store(key, data)
	return nil
}

// Get returns a reader over a copy of the object.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	data, _, err := s.ReadVersion(ctx, key)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// List returns the objects whose key starts with prefix, sorted by key.
func (s *Store) List(ctx context.Context, prefix string) ([]blob.ObjectInfo, error) {
	if err := blob.ValidPrefix(prefix); err != nil {
		return nil, fmt.Errorf("list objects: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list objects %q: %w", prefix, err)
	}
	s.mu.Lock()
	out := []blob.ObjectInfo{}
	for k, o := range s.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, blob.ObjectInfo{Key: k, Size: int64(len(o.data)), Modified: o.modified})
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete removes the object; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := blob.ValidKey(key); err != nil {
		return fmt.Errorf("delete object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete object %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, key)
	return nil
}

// ReadVersion returns a copy of the object and its version.
func (s *Store) ReadVersion(ctx context.Context, key string) ([]byte, blob.Version, error) {
	if err := blob.ValidKey(key); err != nil {
		return nil, "", fmt.Errorf("get object: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("get object %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return nil, "", fmt.Errorf("get object %q: %w", key, blob.ErrNotFound)
	}
	return bytes.Clone(o.data), versionOf(o.version), nil
}

// PutIf stores a copy of data if the object's version is expected ("" means
// absent), atomically with the check.
func (s *Store) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (blob.Version, error) {
	if err := blob.ValidKey(key); err != nil {
		return "", fmt.Errorf("put object if version: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("put object %q if version %q: %w", key, expected, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, exists := s.objects[key]
	current := blob.Version("")
	if exists {
		current = versionOf(o.version)
	}
	if current != expected {
		return "", fmt.Errorf("put object %q if version %q: current version is %q: %w", key, expected, current, blob.ErrPrecondition)
	}
	return s.store(key, bytes.Clone(data)), nil
}

// LockWriter takes the store's writer lock. It is held until release; a
// second call fails at once with blob.ErrLocked naming the holder.
func (s *Store) LockWriter(ctx context.Context, owner string) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lock writer: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != "" {
		return nil, fmt.Errorf("lock writer: held by %q: %w", s.owner, blob.ErrLocked)
	}
	if owner == "" {
		owner = "(unnamed owner)"
	}
	s.owner = owner
	s.lockGen++
	gen := s.lockGen
	return func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.lockGen == gen && s.owner != "" {
			s.owner = ""
		}
		return nil
	}, nil
}
