package blobcache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Idle keep-alive connections of the S3 SDK's HTTP client in the
		// S3 test, which offers no way to close them.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// countingStore wraps a store, counts Get calls per key and how many run at
// once, and can hold every Get until its gate opens.
type countingStore struct {
	blob.Store

	mu        sync.Mutex
	gets      map[string]int
	active    int
	maxActive int
	gate      chan struct{} // nil: no wait; else Get waits until it is closed
	getErr    error         // returned by every Get when set
	listErr   error         // returned by every List when set
}

func newCounting(s blob.Store) *countingStore {
	return &countingStore{Store: s, gets: map[string]int{}}
}

func (s *countingStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	s.mu.Lock()
	s.gets[key]++
	s.active++
	s.maxActive = max(s.maxActive, s.active)
	gate, getErr := s.gate, s.getErr
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.active--
		s.mu.Unlock()
	}()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if getErr != nil {
		return nil, getErr
	}
	return s.Store.Get(ctx, key)
}

func (s *countingStore) List(ctx context.Context, prefix string) ([]blob.ObjectInfo, error) {
	s.mu.Lock()
	err := s.listErr
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.Store.List(ctx, prefix)
}

func (s *countingStore) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[key]
}

func (s *countingStore) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.gets {
		n += c
	}
	return n
}

func (s *countingStore) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, s blob.Store, key, content string) File {
	t.Helper()
	if err := s.Put(context.Background(), key, strings.NewReader(content)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return File{Key: key, Size: int64(len(content))}
}

func newCache(t *testing.T, s blob.Store, maxBytes int64, dir string) *Cache {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "cache")
	}
	c, err := New(s, Options{Dir: dir, MaxBytes: maxBytes})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// cached lists the keys of the files the cache has on disk, sorted, and
// checks that the disk, the index and the byte count agree (no download may
// be under way).
func cached(t *testing.T, c *Cache) []string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	des, err := os.ReadDir(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var bytesOnDisk int64
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			t.Errorf("temporary file %s left in the cache", name)
			continue
		}
		if _, ok := parseName(name); !ok {
			continue // .lock, or not the cache's
		}
		fi, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		e := c.entries[name]
		if e == nil || e.state != ready {
			t.Errorf("file %s on disk is not a ready entry", name)
			continue
		}
		bytesOnDisk += fi.Size()
		keys = append(keys, e.file.Key)
	}
	nready := 0
	for _, e := range c.entries {
		if e.state == ready {
			nready++
		}
	}
	if nready != len(keys) || c.lru.Len() != nready {
		t.Errorf("%d ready entries, %d in the LRU list, %d files on disk", nready, c.lru.Len(), len(keys))
	}
	if c.used != bytesOnDisk {
		t.Errorf("cache counts %d bytes, %d on disk", c.used, bytesOnDisk)
	}
	sort.Strings(keys)
	return keys
}

func readPath(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read cached file: %v", err)
	}
	return string(b)
}

func mustAcquire(t *testing.T, c *Cache, files ...File) ([]string, func()) {
	t.Helper()
	paths, release, err := c.Acquire(testCtx(t), files)
	if err != nil {
		t.Fatalf("Acquire(%v): %v", files, err)
	}
	return paths, release
}

// touch acquires and releases at once: the files become most recently used.
func touch(t *testing.T, c *Cache, files ...File) {
	t.Helper()
	_, release := mustAcquire(t, c, files...)
	release()
}

func sameKeys(got []string, want ...string) bool {
	sort.Strings(want)
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func content(n int, seed byte) string {
	return string(bytes.Repeat([]byte{'a' + seed%26}, n))
}

var errStore = errors.New("store exploded")
