// Package blobtest is the conformance suite every blob sink runs: memory,
// filesystem, and later S3 and GCS. A sink that passes it keeps the
// contracts of the blob package that the durability path relies on
// (design.md §1, §2): atomic replacement, ErrNotFound for a missing key,
// sorted listing that never shows a sink's own scratch files, and, where
// offered, a compare-and-swap that exactly one concurrent writer wins.
//
// The optional capabilities (blob.Conditional, blob.Locker) are found by
// type assertion, as callers find them, and their tests are skipped when a
// store does not offer them.
package blobtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

// Run runs the suite. newStore must return an empty store that is private
// to the test it is given (each subtest gets its own).
func Run(t *testing.T, newStore func(t *testing.T) blob.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s blob.Store)
	}{
		{"PutGet", testPutGet},
		{"Overwrite", testOverwrite},
		{"GetMissing", testGetMissing},
		{"List", testList},
		{"Delete", testDelete},
		{"InvalidKeys", testInvalidKeys},
		{"PutFailedReaderKeepsOld", testPutFailedReader},
		{"PutCanceled", testPutCanceled},
		{"LargeObject", testLargeObject},
		{"PutFailedReaderLarge", testPutFailedReaderLarge},
		{"ConcurrentPutGet", testConcurrentPutGet},
		{"ReadVersionMissing", conditional(testReadVersionMissing)},
		{"PutIfCreate", conditional(testPutIfCreate)},
		{"PutIfCurrent", conditional(testPutIfCurrent)},
		{"PutIfStale", conditional(testPutIfStale)},
		{"PutIfMissing", conditional(testPutIfMissing)},
		{"PutIfAfterDelete", conditional(testPutIfAfterDelete)},
		{"PutIfRaceCreate", conditional(testPutIfRaceCreate)},
		{"PutIfRaceUpdate", conditional(testPutIfRaceUpdate)},
		{"PutIfInvalidKeys", conditional(testPutIfInvalidKeys)},
		{"LockWriter", locker(testLockWriter)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// ctx bounds every call, so that a hanging sink fails the test instead of
// stalling the run.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func conditional(fn func(*testing.T, blob.Store, blob.Conditional)) func(*testing.T, blob.Store) {
	return func(t *testing.T, s blob.Store) {
		c, ok := s.(blob.Conditional)
		if !ok {
			t.Skip("store does not implement blob.Conditional")
		}
		fn(t, s, c)
	}
}

func locker(fn func(*testing.T, blob.Store, blob.Locker)) func(*testing.T, blob.Store) {
	return func(t *testing.T, s blob.Store) {
		l, ok := s.(blob.Locker)
		if !ok {
			t.Skip("store does not implement blob.Locker")
		}
		fn(t, s, l)
	}
}

func put(t *testing.T, s blob.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(ctx(t), key, bytes.NewReader(data)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func get(t *testing.T, s blob.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	return data
}

func wantContent(t *testing.T, s blob.Store, key string, want []byte) {
	t.Helper()
	if got := get(t, s, key); !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %d bytes %.40q, want %d bytes %.40q", key, len(got), got, len(want), want)
	}
}

func listKeys(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	infos, err := s.List(ctx(t), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	keys := make([]string, 0, len(infos))
	for _, i := range infos {
		keys = append(keys, i.Key)
	}
	return keys
}

func wantKeys(t *testing.T, s blob.Store, prefix string, want ...string) {
	t.Helper()
	got := listKeys(t, s, prefix)
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %q, want %q", prefix, got, want)
	}
}

// pattern returns n bytes that differ by seed, so a torn or mixed-up
// object is detected.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	return b
}

func testPutGet(t *testing.T, s blob.Store) {
	cases := map[string][]byte{
		"a":                    []byte("hello"),
		"empty":                {},
		"_pgcdc/manifest.json": []byte(`{"format_version":1}`),
		"public/orders/g0001/delta/00000001/part-00000.parquet": pattern(1<<20+7, 1),
		"sch%C3%A9ma/t%20x/with space.bin":                      []byte("escaped names"),
		".hidden/.dotfile":                                      []byte("dot files are ordinary keys"),
	}
	for k, v := range cases {
		put(t, s, k, v)
	}
	for k, v := range cases {
		wantContent(t, s, k, v)
	}
	// The caller's buffer is not retained.
	buf := []byte("original")
	put(t, s, "buf", buf)
	copy(buf, "XXXXXXXX")
	wantContent(t, s, "buf", []byte("original"))
}

func testOverwrite(t *testing.T, s blob.Store) {
	put(t, s, "k/v", pattern(5000, 1))
	put(t, s, "k/v", []byte("short"))
	wantContent(t, s, "k/v", []byte("short"))
	put(t, s, "k/v", pattern(9000, 2))
	wantContent(t, s, "k/v", pattern(9000, 2))
	wantKeys(t, s, "", "k/v")
}

func testGetMissing(t *testing.T, s blob.Store) {
	put(t, s, "dir/present", []byte("x"))
	for _, key := range []string{"missing", "dir/missing", "nodir/missing", "dir"} {
		rc, err := s.Get(ctx(t), key)
		if err == nil {
			rc.Close()
			t.Errorf("Get(%q) succeeded on a missing key", key)
			continue
		}
		if !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want an error matching blob.ErrNotFound", key, err)
		}
	}
}

func testList(t *testing.T, s blob.Store) {
	wantKeys(t, s, "")
	objects := map[string]int{
		"a/b/1":                1,
		"a/b/2":                22,
		"a/b-x":                3, // '-' sorts before '/': the order is by full key, not per directory
		"a/bz":                 4,
		"a/c/d/e":              5,
		"ab":                   6,
		"b":                    7,
		"_pgcdc/manifest.json": 8,
	}
	for k, n := range objects {
		put(t, s, k, pattern(n, byte(n)))
	}
	wantKeys(t, s, "", "_pgcdc/manifest.json", "a/b-x", "a/b/1", "a/b/2", "a/bz", "a/c/d/e", "ab", "b")
	wantKeys(t, s, "a/", "a/b-x", "a/b/1", "a/b/2", "a/bz", "a/c/d/e")
	wantKeys(t, s, "a/b", "a/b-x", "a/b/1", "a/b/2", "a/bz") // a prefix, not a directory
	wantKeys(t, s, "a/b/", "a/b/1", "a/b/2")
	wantKeys(t, s, "a", "a/b-x", "a/b/1", "a/b/2", "a/bz", "a/c/d/e", "ab")
	wantKeys(t, s, "a/c/d/e", "a/c/d/e")
	wantKeys(t, s, "nothing/")
	wantKeys(t, s, "a/b/3")

	infos, err := s.List(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if want := int64(objects[info.Key]); info.Size != want {
			t.Errorf("List: %q has size %d, want %d", info.Key, info.Size, want)
		}
		// Garbage collection ages unreferenced objects by this time; the
		// store's clock may differ from ours by a little, never by hours.
		if age := time.Since(info.Modified); info.Modified.IsZero() || age < -time.Hour || age > time.Hour {
			t.Errorf("List: %q modified %v, want about now", info.Key, info.Modified)
		}
	}

	for _, bad := range []string{"/", "/a", "../", "a/../", "a//"} {
		if infos, err := s.List(ctx(t), bad); err == nil {
			t.Errorf("List(%q) = %v, want an invalid prefix error", bad, infos)
		}
	}
}

func testDelete(t *testing.T, s blob.Store) {
	put(t, s, "d/one", []byte("1"))
	put(t, s, "d/two", []byte("2"))
	if err := s.Delete(ctx(t), "d/one"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx(t), "d/one"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get after Delete = %v, want blob.ErrNotFound", err)
	}
	wantKeys(t, s, "", "d/two")
	for _, key := range []string{"d/one", "never", "no/such/dir"} {
		if err := s.Delete(ctx(t), key); err != nil {
			t.Errorf("Delete(%q) of a missing key = %v, want nil", key, err)
		}
	}
	if err := s.Delete(ctx(t), "d/two"); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, s, "")
	// A deleted key can be written again.
	put(t, s, "d/one", []byte("again"))
	wantContent(t, s, "d/one", []byte("again"))
}

var invalidKeys = []string{"", "/x", "../x", "a/../../x", "a//b", "a/./b", "a/", ".", ".."}

func testInvalidKeys(t *testing.T, s blob.Store) {
	for _, key := range invalidKeys {
		if err := s.Put(ctx(t), key, strings.NewReader("x")); err == nil {
			t.Errorf("Put(%q) succeeded", key)
		}
		if rc, err := s.Get(ctx(t), key); err == nil {
			rc.Close()
			t.Errorf("Get(%q) succeeded", key)
		} else if errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Get(%q) = %v: an invalid key is not a missing object", key, err)
		}
		if err := s.Delete(ctx(t), key); err == nil {
			t.Errorf("Delete(%q) succeeded", key)
		}
	}
	wantKeys(t, s, "")
}

// failingReader yields some bytes, then an error, like a network stream
// that breaks mid-upload.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func testPutFailedReader(t *testing.T, s blob.Store) {
	put(t, s, "x/obj", []byte("old"))
	boom := errors.New("boom")
	err := s.Put(ctx(t), "x/obj", &failingReader{data: pattern(100000, 3), err: boom})
	if err == nil {
		t.Fatal("Put with a failing reader succeeded")
	}
	if !errors.Is(err, boom) {
		t.Errorf("Put error %v does not wrap the reader's error", err)
	}
	wantContent(t, s, "x/obj", []byte("old"))
	err = s.Put(ctx(t), "x/new", &failingReader{data: []byte("partial"), err: boom})
	if err == nil {
		t.Fatal("Put with a failing reader succeeded")
	}
	if _, err := s.Get(ctx(t), "x/new"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("a failed Put left an object behind: Get = %v", err)
	}
	wantKeys(t, s, "", "x/obj") // and no scratch file is listed
}

// largeSize is more than two parts of the smallest S3 multipart part size
// (5 MiB), and not a multiple of it: stores that upload in parts should be
// built with a part size of at most 5 MiB for this suite, so that the
// multipart path is the one tested.
const largeSize = 12<<20 + 12345

// largePattern is pattern for large objects: 4 KiB blocks, each stamped
// with its index, so that parts stored out of order are detected. It costs
// a memmove per block, not a loop per byte (which is slow under -race).
func largePattern(n int, seed byte) []byte {
	const block = 4096
	base := pattern(block, seed)
	b := make([]byte, n)
	for i := 0; i < n; i += block {
		copy(b[i:], base)
		if i+8 <= n {
			binary.BigEndian.PutUint64(b[i:], uint64(i/block))
		}
	}
	return b
}

func testLargeObject(t *testing.T, s blob.Store) {
	big := largePattern(largeSize, 5)
	put(t, s, "big/obj", big)
	wantContent(t, s, "big/obj", big)
	infos, err := s.List(ctx(t), "big/")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Size != largeSize {
		t.Fatalf("List(big/) = %v, want one object of %d bytes", infos, largeSize)
	}
	// Replaced by a small object, and then by another large one.
	put(t, s, "big/obj", []byte("small"))
	wantContent(t, s, "big/obj", []byte("small"))
	big2 := largePattern(largeSize-1000, 6)
	put(t, s, "big/obj", big2)
	wantContent(t, s, "big/obj", big2)
}

// testPutFailedReaderLarge is testPutFailedReader past the first part of a
// multipart upload: parts already sent must never become visible.
func testPutFailedReaderLarge(t *testing.T, s blob.Store) {
	put(t, s, "big/obj", []byte("old"))
	boom := errors.New("boom")
	for _, key := range []string{"big/obj", "big/new"} {
		err := s.Put(ctx(t), key, &failingReader{data: largePattern(11<<20, 7), err: boom})
		if err == nil {
			t.Fatalf("Put(%q) with a reader failing after 11 MiB succeeded", key)
		}
		if !errors.Is(err, boom) {
			t.Errorf("Put(%q) error %v does not wrap the reader's error", key, err)
		}
	}
	wantContent(t, s, "big/obj", []byte("old"))
	if _, err := s.Get(ctx(t), "big/new"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("a failed large Put left an object behind: Get = %v", err)
	}
	wantKeys(t, s, "", "big/obj")
}

func testPutCanceled(t *testing.T, s blob.Store) {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(c, "canceled", strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a canceled context = %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx(t), "canceled"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a canceled Put wrote the object: Get = %v", err)
	}
}

// testConcurrentPutGet checks atomic replacement: readers racing a writer
// see one whole version or the other, never a mix or a truncated object.
func testConcurrentPutGet(t *testing.T, s blob.Store) {
	versions := [][]byte{pattern(64<<10, 1), pattern(96<<10, 2)}
	put(t, s, "race/obj", versions[0])
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				rc, err := s.Get(ctx(t), "race/obj")
				if err != nil {
					errc <- fmt.Errorf("Get during Put: %w", err)
					return
				}
				data, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					errc <- fmt.Errorf("read during Put: %w", err)
					return
				}
				if !bytes.Equal(data, versions[0]) && !bytes.Equal(data, versions[1]) {
					errc <- fmt.Errorf("Get during Put saw a torn object of %d bytes", len(data))
					return
				}
			}
		})
	}
	for i := range 40 {
		if err := s.Put(ctx(t), "race/obj", bytes.NewReader(versions[i%2])); err != nil {
			t.Error(err)
			break
		}
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	wantKeys(t, s, "race/", "race/obj")
}
