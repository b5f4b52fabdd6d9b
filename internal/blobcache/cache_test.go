package blobcache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
)

const dataKey = "public/orders/g0001/delta/00000041/part-00000.parquet"

func TestAcquireServesWholeFiles(t *testing.T) {
	s := newCounting(memory.New())
	a := put(t, s, dataKey, "parquet bytes")
	b := put(t, s, "public/orders/g0001/base/part-00000.parquet", "other bytes")
	dir := filepath.Join(t.TempDir(), "a", "cache")
	c := newCache(t, s, 1<<20, dir)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache directory: %v, mode %v; want 0700", err, fi.Mode())
	}
	paths, release := mustAcquire(t, c, a, b, a) // a repeat is served twice, downloaded once
	defer release()
	if len(paths) != 3 || paths[0] != paths[2] {
		t.Fatalf("paths %q", paths)
	}
	for i, want := range []string{"parquet bytes", "other bytes", "parquet bytes"} {
		if got := readPath(t, paths[i]); got != want {
			t.Errorf("paths[%d] holds %q, want %q", i, got, want)
		}
		if filepath.Dir(paths[i]) != c.Dir() || !strings.HasSuffix(paths[i], ".parquet") {
			t.Errorf("path %s: want a .parquet file directly in %s", paths[i], c.Dir())
		}
		if fi, err := os.Stat(paths[i]); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("cached file %s: %v, mode %v; want 0600", paths[i], err, fi.Mode())
		}
	}
	if s.count(a.Key) != 1 || s.count(b.Key) != 1 {
		t.Errorf("gets %v, want one per key", s.gets)
	}
	p, err := c.Path(testCtx(t), a.Key, a.Size)
	if err != nil || p != paths[0] {
		t.Errorf("Path = %q, %v; want %q", p, err, paths[0])
	}
	if s.count(a.Key) != 1 {
		t.Errorf("Path of a cached file downloaded it again")
	}
	if got := cached(t, c); !sameKeys(got, a.Key, b.Key) {
		t.Errorf("cached %q", got)
	}
	empty, rel, err := c.Acquire(testCtx(t), nil)
	if err != nil || len(empty) != 0 {
		t.Errorf("Acquire(nil) = %q, %v", empty, err)
	}
	rel()
}

// TestConcurrentReaders: many callers asking for the same and different
// keys at once, while every download is held up, get whole files and cause
// exactly one download per key.
func TestConcurrentReaders(t *testing.T) {
	s := newCounting(memory.New())
	var files []File
	for i := range 10 {
		files = append(files, put(t, s, fmt.Sprintf("t/g0001/delta/%08d/part-00000.parquet", i), content(100+i, byte(i))))
	}
	gate := make(chan struct{})
	s.gate = gate
	c := newCache(t, s, 1<<20, "")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			if g%4 == 0 {
				f := files[rng.IntN(len(files))]
				p, err := c.Path(context.Background(), f.Key, f.Size)
				if err != nil {
					errs <- err
					return
				}
				if got, err := os.ReadFile(p); err != nil || len(got) != int(f.Size) {
					errs <- fmt.Errorf("Path(%s): %d bytes, %v", f.Key, len(got), err)
				}
				return
			}
			var set []File
			for _, i := range rng.Perm(len(files))[:1+rng.IntN(len(files))] {
				set = append(set, files[i])
			}
			paths, release, err := c.Acquire(context.Background(), set)
			if err != nil {
				errs <- err
				return
			}
			defer release()
			for i, p := range paths {
				want := content(int(set[i].Size), byte(set[i].Size-100))
				if got, err := os.ReadFile(p); err != nil || string(got) != want {
					errs <- fmt.Errorf("Acquire: %s holds %d bytes (%v), want %d", set[i].Key, len(got), err, len(want))
				}
			}
		})
	}
	// Let the first downloads start and the other callers pile up behind
	// them, then let everything through.
	waitFor(t, "downloads to start", func() bool { return s.running() == DefaultDownloads })
	time.Sleep(20 * time.Millisecond)
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, f := range files {
		if n := s.count(f.Key); n != 1 {
			t.Errorf("%s downloaded %d times", f.Key, n)
		}
	}
	if s.maxActive > DefaultDownloads {
		t.Errorf("%d downloads at once, bound %d", s.maxActive, DefaultDownloads)
	}
	cached(t, c)
}

// TestDownloadsBounded: different keys download in parallel, never more
// than the bound at once, across callers.
func TestDownloadsBounded(t *testing.T) {
	s := newCounting(memory.New())
	var one, two []File
	for i := range 12 {
		f := put(t, s, fmt.Sprintf("k/%02d", i), content(10, byte(i)))
		if i%2 == 0 {
			one = append(one, f)
		} else {
			two = append(two, f)
		}
	}
	gate := make(chan struct{})
	s.gate = gate
	c := newCache(t, s, 1<<20, "")
	var wg sync.WaitGroup
	for _, set := range [][]File{one, two} {
		wg.Go(func() {
			_, release, err := c.Acquire(context.Background(), set)
			if err != nil {
				t.Error(err)
				return
			}
			release()
		})
	}
	waitFor(t, "4 downloads at once", func() bool { return s.running() == DefaultDownloads })
	time.Sleep(50 * time.Millisecond) // time for a fifth to start, if it could
	if n := s.running(); n != DefaultDownloads {
		t.Errorf("%d downloads at once, want %d", n, DefaultDownloads)
	}
	close(gate)
	wg.Wait()
	if s.maxActive != DefaultDownloads || s.total() != 12 {
		t.Errorf("at most %d downloads at once, %d in all; want %d and 12", s.maxActive, s.total(), DefaultDownloads)
	}
}

func TestEvictionLeastRecentlyUsed(t *testing.T) {
	s := newCounting(memory.New())
	a := put(t, s, "a", content(10, 0))
	b := put(t, s, "b", content(10, 1))
	c3 := put(t, s, "c", content(10, 2))
	d := put(t, s, "d", content(10, 3))
	c := newCache(t, s, 30, "")
	touch(t, c, a)
	touch(t, c, b)
	touch(t, c, c3)
	if _, err := c.Path(testCtx(t), a.Key, a.Size); err != nil { // a is now the most recent
		t.Fatal(err)
	}
	touch(t, c, d)
	if got := cached(t, c); !sameKeys(got, "a", "c", "d") {
		t.Fatalf("after a, b, c, a, d in a cache of three: %q, want b evicted", got)
	}
	touch(t, c, b) // downloaded again; c is the least recent now
	if got := cached(t, c); !sameKeys(got, "a", "b", "d") {
		t.Fatalf("after b again: %q, want c evicted", got)
	}
	if s.count("b") != 2 || s.count("a") != 1 {
		t.Errorf("gets %v: want b twice (evicted once), a once", s.gets)
	}
}

func TestLeasesAreNotEvicted(t *testing.T) {
	s := newCounting(memory.New())
	f := map[string]File{}
	for i, k := range []string{"a", "b", "c", "d", "e"} {
		f[k] = put(t, s, k, content(10, byte(i)))
	}
	c := newCache(t, s, 30, "")
	paths, releaseA := mustAcquire(t, c, f["a"]) // a is the oldest, but leased
	touch(t, c, f["b"])
	touch(t, c, f["c"])
	touch(t, c, f["d"])
	if got := cached(t, c); !sameKeys(got, "a", "c", "d") {
		t.Fatalf("with a leased: %q, want b evicted instead of a", got)
	}
	if readPath(t, paths[0]) != content(10, 0) {
		t.Fatal("leased file changed")
	}
	// Everything cached is leased: a new file is served beyond the bound.
	_, releaseCD := mustAcquire(t, c, f["c"], f["d"])
	_, releaseE := mustAcquire(t, c, f["e"])
	if got := cached(t, c); !sameKeys(got, "a", "c", "d", "e") {
		t.Fatalf("all leased: %q, want a, c, d, e served beyond the bound", got)
	}
	releaseA()
	releaseA() // a second release changes nothing
	if got := cached(t, c); !sameKeys(got, "c", "d", "e") {
		t.Fatalf("after a's release: %q, want a evicted back to the bound", got)
	}
	releaseCD()
	releaseE()
	if got := cached(t, c); !sameKeys(got, "c", "d", "e") {
		t.Fatalf("after every release: %q", got)
	}
	c.mu.Lock()
	for name, e := range c.entries {
		if e.refs != 0 {
			t.Errorf("entry %s (%s) keeps %d references", name, e.file.Key, e.refs)
		}
	}
	c.mu.Unlock()

	// A lease's own downloads never evict the files it already has, even
	// the least recently used: c is older than d and e, and a and b are
	// downloaded for the same lease.
	paths, release := mustAcquire(t, c, f["c"], f["a"], f["b"])
	defer release()
	if got := cached(t, c); !sameKeys(got, "a", "b", "c") {
		t.Fatalf("lease of c, a, b: %q cached, want exactly those", got)
	}
	for i, want := range []string{content(10, 2), content(10, 0), content(10, 1)} {
		if readPath(t, paths[i]) != want {
			t.Errorf("paths[%d] does not hold its file", i)
		}
	}
}

// TestOneFileLargerThanTheBound is served, held while leased, and evicted
// when its lease ends; a set of files larger than the bound is refused
// before any download.
func TestOneFileLargerThanTheBound(t *testing.T) {
	s := newCounting(memory.New())
	big := put(t, s, "big.parquet", content(25, 0))
	small := put(t, s, "small.parquet", content(5, 1))
	other := put(t, s, "other.parquet", content(6, 2))
	c := newCache(t, s, 10, "")

	paths, release := mustAcquire(t, c, big)
	if readPath(t, paths[0]) != content(25, 0) {
		t.Fatal("big file not served whole")
	}
	if got := cached(t, c); !sameKeys(got, "big.parquet") {
		t.Fatalf("cached %q", got)
	}
	release()
	if got := cached(t, c); len(got) != 0 {
		t.Fatalf("after its release the big file stays: %q", got)
	}
	// Path serves it too, and leaves it until the cache next needs room.
	p, err := c.Path(testCtx(t), big.Key, big.Size)
	if err != nil || readPath(t, p) != content(25, 0) {
		t.Fatalf("Path of the big file: %v", err)
	}
	touch(t, c, small)
	if got := cached(t, c); !sameKeys(got, "small.parquet") {
		t.Fatalf("after the next download: %q, want the big file evicted", got)
	}

	before := s.total()
	_, _, err = c.Acquire(testCtx(t), []File{small, other})
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Files != 2 || tl.Bytes != 11 || tl.MaxBytes != 10 {
		t.Fatalf("Acquire of 11 bytes in a cache of 10: %v, want a *TooLargeError{2, 11, 10}", err)
	}
	if !strings.Contains(err.Error(), "11 bytes") || !strings.Contains(err.Error(), "(10 bytes)") {
		t.Errorf("error %q does not give both sizes", err)
	}
	if s.total() != before {
		t.Errorf("a refused set was downloaded: %v", s.gets)
	}
	// The same file twice counts once.
	touch(t, c, small, small)
}

func TestSizeMismatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     int64
		listErr  error
		actual   int64
		atLeast  bool
		inMsgArg string
	}{
		{name: "short body", size: 9, actual: 5},
		{name: "long body", size: 4, actual: 5},
		{name: "long body, list fails", size: 3, listErr: errStore, actual: 4, atLeast: true},
		{name: "empty file expected", size: 0, actual: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newCounting(memory.New())
			f := put(t, s, dataKey, "12345")
			s.listErr = tc.listErr
			c := newCache(t, s, 100, "")
			for _, call := range []func() error{
				func() error { _, err := c.Path(testCtx(t), f.Key, tc.size); return err },
				func() error {
					_, _, err := c.Acquire(testCtx(t), []File{{Key: f.Key, Size: tc.size}})
					return err
				},
			} {
				err := call()
				var se *SizeError
				if !errors.As(err, &se) {
					t.Fatalf("size %d for 5 bytes: %v, want a *SizeError", tc.size, err)
				}
				want := SizeError{Key: f.Key, Expected: tc.size, Actual: tc.actual, AtLeast: tc.atLeast}
				if *se != want {
					t.Errorf("error %+v, want %+v", *se, want)
				}
				msg := err.Error()
				if !strings.Contains(msg, f.Key) || !strings.Contains(msg, fmt.Sprint(tc.size)) || !strings.Contains(msg, fmt.Sprint(tc.actual)) {
					t.Errorf("error %q does not name the key and both sizes", msg)
				}
				if got := cached(t, c); len(got) != 0 {
					t.Errorf("a file of the wrong size was cached: %q", got)
				}
			}
			// The right size is served.
			p, err := c.Path(testCtx(t), f.Key, 5)
			if err != nil || readPath(t, p) != "12345" {
				t.Fatalf("Path with the right size: %v", err)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	s := newCounting(memory.New())
	c := newCache(t, s, 100, "")

	_, err := c.Path(testCtx(t), dataKey, 5)
	if !errors.Is(err, blob.ErrNotFound) || !strings.Contains(err.Error(), dataKey) {
		t.Errorf("missing object: %v, want blob.ErrNotFound naming the key", err)
	}
	_, _, err = c.Acquire(testCtx(t), []File{{Key: dataKey, Size: 5}})
	if !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Acquire of a missing object: %v, want blob.ErrNotFound", err)
	}

	s.getErr = fmt.Errorf("get object s3://b/x: %w: %w", blob.ErrUnavailable, errStore)
	_, err = c.Path(testCtx(t), dataKey, 5)
	if !errors.Is(err, errStore) || !errors.Is(err, blob.ErrUnavailable) || !strings.Contains(err.Error(), dataKey) {
		t.Errorf("store failure: %v, want it wrapped with the key", err)
	}
	if errors.Is(err, blob.ErrNotFound) {
		t.Errorf("store failure %v reported as not found", err)
	}
	s.getErr = nil

	for _, key := range []string{"", "../x", "a/../../b", "/etc/passwd", "a//b", "a/./b", "a/"} {
		if _, err := c.Path(testCtx(t), key, 1); err == nil {
			t.Errorf("Path(%q) succeeded", key)
		}
		if _, _, err := c.Acquire(testCtx(t), []File{{Key: key, Size: 1}}); err == nil {
			t.Errorf("Acquire(%q) succeeded", key)
		}
	}
	if _, err := c.Path(testCtx(t), "k", -1); err == nil {
		t.Error("negative size accepted")
	}
	if _, _, err := c.Acquire(testCtx(t), []File{{Key: "k", Size: 1}, {Key: "k", Size: 2}}); err == nil {
		t.Error("one key with two sizes accepted")
	}
	if s.total() != 3 {
		t.Errorf("gets %v: invalid requests reached the store", s.gets)
	}
	c.mu.Lock()
	if len(c.entries) != 0 {
		t.Errorf("failed requests left entries %v", c.entries)
	}
	c.mu.Unlock()
}

// TestDownloaderLeaves: when the caller downloading a file gives up, a
// caller waiting for the same file downloads it itself; a waiter that gives
// up does not disturb the download.
func TestDownloaderLeaves(t *testing.T) {
	s := newCounting(memory.New())
	f := put(t, s, dataKey, "12345")
	gate := make(chan struct{})
	s.gate = gate
	c := newCache(t, s, 100, "")

	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := c.Path(leaderCtx, f.Key, f.Size)
		leaderErr <- err
	}()
	waitFor(t, "the first download", func() bool { return s.running() == 1 })

	waiterCtx, cancelWaiter := context.WithCancel(context.Background())
	waiterErr := make(chan error, 1)
	go func() {
		_, _, err := c.Acquire(waiterCtx, []File{f})
		waiterErr <- err
	}()
	type result struct {
		path string
		err  error
	}
	patient := make(chan result, 1)
	go func() {
		p, err := c.Path(context.Background(), f.Key, f.Size)
		patient <- result{p, err}
	}()
	waitFor(t, "two waiters", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		e := c.entries[localName(f)]
		return e != nil && e.refs == 3
	})
	cancelWaiter()
	if err := <-waiterErr; !errors.Is(err, context.Canceled) {
		t.Errorf("canceled waiter: %v, want context.Canceled", err)
	}
	cancelLeader()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Errorf("canceled downloader: %v, want context.Canceled", err)
	}
	waitFor(t, "the patient waiter's download", func() bool { return s.count(f.Key) == 2 })
	close(gate)
	r := <-patient
	if r.err != nil || readPath(t, r.path) != "12345" {
		t.Fatalf("patient waiter: %v", r.err)
	}
	if got := cached(t, c); !sameKeys(got, f.Key) {
		t.Errorf("cached %q", got)
	}
}

// TestRestart: a new cache on the same directory reuses whole files,
// removes leftovers and files of the wrong length, leaves foreign files
// alone, and evicts down to its own bound, oldest first.
func TestRestart(t *testing.T) {
	s := newCounting(memory.New())
	a := put(t, s, "a.parquet", content(10, 0))
	b := put(t, s, "b.parquet", content(10, 1))
	cf := put(t, s, "c.parquet", content(10, 2))
	d := put(t, s, "d.parquet", content(10, 3))
	dir := filepath.Join(t.TempDir(), "cache")
	first := newCache(t, s, 100, dir)
	paths, release := mustAcquire(t, first, a, b, cf, d)
	release()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Path(testCtx(t), a.Key, a.Size); !errors.Is(err, ErrClosed) {
		t.Errorf("Path after Close: %v, want ErrClosed", err)
	}
	// Ages: a oldest, then b, then d; c is cut short (a crash mid-write of
	// a file that was never fsynced would look like this).
	now := time.Now()
	for i, p := range []string{paths[0], paths[1], paths[3]} {
		if err := os.Chtimes(p, now, now.Add(time.Duration(i-10)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Truncate(paths[2], 4); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, tmpPrefix+"123")
	foreign := filepath.Join(dir, "notes.txt")
	for _, p := range []string{leftover, foreign} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	fresh := newCounting(s.Store)
	second := newCache(t, fresh, 25, dir) // room for two of the three whole files
	if got := cached(t, second); !sameKeys(got, "", "") {
		t.Fatalf("after restart: %d files (%q), want the two most recent whole ones (keys unknown until asked)", len(got), got)
	}
	for _, p := range []string{paths[0], paths[2], leftover} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the restart: %v", filepath.Base(p), err)
		}
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("a file the cache did not make was removed: %v", err)
	}
	got, release2 := mustAcquire(t, second, b, d)
	defer release2()
	if got[0] != paths[1] || got[1] != paths[3] || fresh.total() != 0 {
		t.Errorf("reused files %q (gets %v), want %q and %q without a download", got, fresh.gets, paths[1], paths[3])
	}
	if readPath(t, got[0]) != content(10, 1) || readPath(t, got[1]) != content(10, 3) {
		t.Error("reused files changed")
	}
	if got := cached(t, second); !sameKeys(got, "b.parquet", "d.parquet") {
		t.Errorf("cached %q", got)
	}
}

func TestDirectory(t *testing.T) {
	s := memory.New()
	dir := filepath.Join(t.TempDir(), "cache")
	c := newCache(t, s, 10, dir)
	if _, err := New(s, Options{Dir: dir, MaxBytes: 10}); !errors.Is(err, ErrInUse) {
		t.Errorf("second cache on %s: %v, want it refused", dir, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := New(s, Options{Dir: dir, MaxBytes: 10})
	if err != nil {
		t.Fatalf("New after Close: %v", err)
	}
	again.Close()

	shared := t.TempDir()
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := New(s, Options{Dir: shared, MaxBytes: 10}); err == nil || !strings.Contains(err.Error(), "other users") {
		t.Errorf("directory open to others: %v, want it refused", err)
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{
		{Dir: notDir, MaxBytes: 10},
		{Dir: "", MaxBytes: 10},
		{Dir: dir, MaxBytes: 0},
		{Dir: dir, MaxBytes: 10, Downloads: -1},
	} {
		if c, err := New(s, o); err == nil {
			c.Close()
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

func TestLocalNames(t *testing.T) {
	long := strings.Repeat("x", 300) + "/" + strings.Repeat("y", 300) + ".parquet"
	for _, f := range []File{
		{dataKey, 41},
		{"a/b", 0},
		{"a/b/c", 7},
		{"A/B", 0},
		{long, 1 << 40},
		{"x.tar.gz", 3},
		{"weird.par-quet", 3},
		{"noext", 3},
	} {
		name := localName(f)
		if len(name) > 255 || strings.ContainsAny(name, "/\\") {
			t.Errorf("local name %q of %q is not one short file name", name, f.Key)
		}
		size, ok := parseName(name)
		if !ok || size != f.Size {
			t.Errorf("parseName(%q) = %d, %t; want %d", name, size, ok, f.Size)
		}
	}
	for key, ext := range map[string]string{dataKey: ".parquet", "x.tar.gz": ".gz", "weird.par-quet": "", "noext": "", "dir.d/file": ""} {
		if got := extension(key); got != ext {
			t.Errorf("extension(%q) = %q, want %q", key, got, ext)
		}
	}
	if localName(File{"a/b", 0}) == localName(File{"A/B", 0}) || localName(File{"k", 1}) == localName(File{"k", 2}) {
		t.Error("distinct files share a local name")
	}
	for _, name := range []string{lockName, "notes.txt", tmpPrefix + "1", localName(File{"k", 1})[:64],
		strings.Repeat("g", 64) + "-1", strings.Repeat("a", 64) + "-01", strings.Repeat("a", 64) + "--1",
		strings.Repeat("a", 64) + "-1.", strings.Repeat("a", 64) + "-1.a-b", strings.Repeat("A", 64) + "-1"} {
		if _, ok := parseName(name); ok {
			t.Errorf("parseName(%q) accepted a name localName never makes", name)
		}
	}
	// Keys that cannot both be paths in one tree are both served.
	s := memory.New()
	ab := put(t, s, "a/b", "file")
	abc := put(t, s, "a/b/c", "file under it")
	c := newCache(t, s, 100, "")
	paths, release := mustAcquire(t, c, ab, abc)
	defer release()
	if readPath(t, paths[0]) != "file" || readPath(t, paths[1]) != "file under it" {
		t.Error("a/b and a/b/c not both served")
	}
}

// TestReleaseTwice: a second call of one lease's release does not drop
// another lease on the same file.
func TestReleaseTwice(t *testing.T) {
	s := memory.New()
	x := put(t, s, "x", content(10, 0))
	y := put(t, s, "y", content(10, 1))
	c := newCache(t, s, 10, "")
	_, first := mustAcquire(t, c, x)
	paths, second := mustAcquire(t, c, x)
	first()
	first()
	// y needs x's room, but x is still leased: y is served beyond the
	// bound and, unleased, is the one evicted when its lease ends.
	touch(t, c, y)
	if got := cached(t, c); !sameKeys(got, "x") {
		t.Fatalf("with x leased once more: %q cached, want x kept", got)
	}
	if readPath(t, paths[0]) != content(10, 0) {
		t.Fatal("leased file changed")
	}
	second()
	touch(t, c, y)
	if got := cached(t, c); !sameKeys(got, "y") {
		t.Fatalf("after the last release: %q, want x evicted for y", got)
	}
}
