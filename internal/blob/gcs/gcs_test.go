package gcs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/googleapis/gax-go/v2"
	"go.uber.org/goleak"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/blobtest"
	"github.com/pg-cdc/pg-cdc/internal/blob/gcs/gcstest"
)

func TestMain(m *testing.M) {
	// Retries wait milliseconds, not seconds, so the fault tests are fast.
	backoff = gax.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond, Multiplier: 2}
	goleak.VerifyTestMain(m,
		// Started by go.opencensus.io's init, which the storage client
		// imports; it lives for the process.
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
	)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// open returns a store on endpoint over HTTP, closed when the test ends.
func open(t *testing.T, endpoint string, opts Options) *Store {
	t.Helper()
	opts.Endpoint, opts.NoAuth = endpoint, true
	s, err := New(ctx(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// newStore starts a fake server with an empty bucket and opens a store on
// it through the real client's HTTP path.
func newStore(t *testing.T, opts Options) *Store {
	t.Helper()
	endpoint, bucket := gcstest.Start(t)
	opts.Bucket = bucket
	return open(t, endpoint, opts)
}

// TestConformance runs the suite through the real client's HTTP path, on
// a store under a prefix, in a bucket that also holds objects just outside
// the prefix (siblings whose names start with the same characters) and
// objects inside it that no key can name (folder placeholders). The
// suite's exact listings fail if any of them leaks in. The chunk size is
// below the suite's large object, so that is uploaded in chunks.
//
// The suite runs once: under -race it takes most of this package's time
// budget. The bucket root (Prefix "") is covered by TestPrefixIsolation.
func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store {
		endpoint, bucket := gcstest.Start(t)
		root := open(t, endpoint, Options{Bucket: bucket})
		for _, name := range []string{"tenant/a", "tenant/a-x/k", "tenant/ab", "tenant/ab/_pgcdc/manifest.json", "tenant/b/a/k", "a/k"} {
			putString(t, root, name, "neighbour")
		}
		for _, name := range []string{"tenant/a/", "tenant/a/x/"} {
			rawPut(t, root, name, "")
		}
		return open(t, endpoint, Options{Bucket: bucket, Prefix: "tenant/a", ChunkSize: 4 << 20})
	})
}

// TestReadyClient: a client made by the fake itself (in-memory transport,
// XML reads), passed as Options.Client.
func TestReadyClient(t *testing.T) {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "ready"})
	c := srv.Client()
	t.Cleanup(func() { c.Close() })
	s, err := New(ctx(t), Options{Bucket: "ready", Prefix: "p/", Client: c})
	if err != nil {
		t.Fatal(err)
	}
	putString(t, s, "a/k", "v")
	if got := string(read(t, s, "a/k")); got != "v" {
		t.Fatalf("Get = %q", got)
	}
	v, err := s.PutIf(ctx(t), "_pgcdc/manifest.json", []byte("1"), "")
	if err != nil {
		t.Fatal(err)
	}
	if data, rv, err := s.ReadVersion(ctx(t), "_pgcdc/manifest.json"); err != nil || rv != v || string(data) != "1" {
		t.Fatalf("ReadVersion = %q, %q, %v; want 1, %q", data, rv, err, v)
	}
	if _, err := s.PutIf(ctx(t), "_pgcdc/manifest.json", []byte("2"), ""); !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("second create = %v, want ErrPrecondition", err)
	}
	wantKeys(t, s, "", "_pgcdc/manifest.json", "a/k")
	if err := s.Close(); err != nil { // not ours: stays open
		t.Fatal(err)
	}
	if _, err := c.Bucket("ready").Object("p/a/k").Attrs(ctx(t)); err != nil {
		t.Fatalf("the caller's client after Store.Close: %v", err)
	}
}

func putString(t *testing.T, s *Store, key, data string) {
	t.Helper()
	if err := s.Put(ctx(t), key, strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
}

// rawPut writes an object under any name, valid key or not, as another
// GCS client would.
func rawPut(t *testing.T, s *Store, name, data string) {
	t.Helper()
	w := s.bucket.Object(name).NewWriter(ctx(t))
	if _, err := io.WriteString(w, data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, s blob.Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return data
}

func keys(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	infos, err := s.List(ctx(t), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, i := range infos {
		ks = append(ks, i.Key)
	}
	return ks
}

func wantKeys(t *testing.T, s blob.Store, prefix string, want ...string) {
	t.Helper()
	if got := keys(t, s, prefix); !slices.Equal(got, want) {
		t.Fatalf("List(%q) = %q, want %q", prefix, got, want)
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i/251) ^ seed
	}
	return b
}

// proxy sits between the client and the fake's handler: it logs requests
// and injects faults.
type proxy struct {
	h http.Handler

	mu sync.Mutex
	// fault decides per request: code 0 passes it on; otherwise the
	// client gets code, and the request reaches the fake first if after
	// is set (a response lost on the way back).
	fault func(r *http.Request) (code int, after bool)
	log   []string
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.log = append(p.log, r.Method+" "+r.URL.Path+" "+r.URL.Query().Get("uploadType"))
	code, after := 0, false
	if p.fault != nil {
		code, after = p.fault(r)
	}
	p.mu.Unlock()
	switch {
	case code == 0:
		p.h.ServeHTTP(w, r)
	case after:
		p.h.ServeHTTP(httptest.NewRecorder(), r)
		http.Error(w, "injected after forwarding", code)
	default:
		_, _ = io.Copy(io.Discard, r.Body)
		http.Error(w, "injected", code)
	}
}

func (p *proxy) setFault(f func(r *http.Request) (int, bool)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
}

// requests returns the log since the last call.
func (p *proxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.log
	p.log = nil
	return l
}

func count(log []string, substr string) int {
	n := 0
	for _, l := range log {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// withProxy starts a fake with a bucket behind a proxy on loopback and
// opens a store through the proxy.
func withProxy(t *testing.T, opts Options) (*Store, *proxy) {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	opts.Bucket = "proxied"
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: opts.Bucket})
	p := &proxy{h: srv.HTTPHandler()}
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	return open(t, hs.URL, opts), p
}

// nth fails the first n requests that match with code.
func nth(n int, code int, after bool, match func(r *http.Request) bool) func(*http.Request) (int, bool) {
	return func(r *http.Request) (int, bool) {
		if n > 0 && match(r) {
			n--
			return code, after
		}
		return 0, false
	}
}

func isUpload(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/upload/") }

func TestMultiChunkUpload(t *testing.T) {
	const chunk = 256 << 10
	s, p := withProxy(t, Options{ChunkSize: chunk})
	data := pattern(3*chunk+12345, 9)
	if err := s.Put(ctx(t), "big/part-00000.parquet", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	log := p.requests()
	if n := count(log, "/upload/"); n < 4 {
		t.Fatalf("a %d-byte object with %d-byte chunks took %d upload requests, want at least 4: %q", len(data), chunk, n, log)
	}
	if got := read(t, s, "big/part-00000.parquet"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, want the %d written", len(got), len(data))
	}
	infos, err := s.List(ctx(t), "big/")
	if err != nil || len(infos) != 1 || infos[0].Size != int64(len(data)) {
		t.Fatalf("List = %v, %v; want one object of %d bytes", infos, err, len(data))
	}

	// A transient failure of a middle chunk is retried in place.
	p.setFault(nth(1, http.StatusServiceUnavailable, false, func(r *http.Request) bool {
		return r.Method == http.MethodPut && isUpload(r) && strings.Contains(r.Header.Get("Content-Range"), "bytes 262144-")
	}))
	data2 := pattern(3*chunk+1, 10)
	if err := s.Put(ctx(t), "big/part-00000.parquet", bytes.NewReader(data2)); err != nil {
		t.Fatalf("Put with a failed chunk: %v", err)
	}
	if got := read(t, s, "big/part-00000.parquet"); !bytes.Equal(got, data2) {
		t.Fatalf("after a retried chunk: read back %d bytes, want the %d written", len(got), len(data2))
	}
}

// TestPutFailingReaderMultiChunk breaks the reader after some chunks have
// been sent in a resumable upload: the upload must not be finalized.
func TestPutFailingReaderMultiChunk(t *testing.T) {
	const chunk = 256 << 10
	s, p := withProxy(t, Options{ChunkSize: chunk})
	putString(t, s, "x/obj", "old")
	boom := errors.New("boom")
	for _, key := range []string{"x/obj", "x/new"} {
		p.requests()
		r := io.MultiReader(bytes.NewReader(pattern(2*chunk+100, 1)), iotestErrReader{boom})
		err := s.Put(ctx(t), key, r)
		if !errors.Is(err, boom) {
			t.Fatalf("Put(%q) with a failing reader = %v, want the reader's error", key, err)
		}
		if n := count(p.requests(), "/upload/"); n < 2 {
			t.Fatalf("Put(%q) sent %d upload requests before failing, want chunks on the wire", key, n)
		}
	}
	if got := read(t, s, "x/obj"); string(got) != "old" {
		t.Fatalf("x/obj = %d bytes, want the old object", len(got))
	}
	if _, err := s.Get(ctx(t), "x/new"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a failed Put left x/new behind: Get = %v", err)
	}
	wantKeys(t, s, "", "x/obj")
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

// TestPrefixIsolation: stores on "a/b", "a/bc" and the bucket root share
// one bucket; each sees only its own keys.
func TestPrefixIsolation(t *testing.T) {
	endpoint, bucket := gcstest.Start(t)
	root := open(t, endpoint, Options{Bucket: bucket})
	ab := open(t, endpoint, Options{Bucket: bucket, Prefix: "a/b"})
	abc := open(t, endpoint, Options{Bucket: bucket, Prefix: "a/bc/"})
	for _, s := range []*Store{root, ab, abc} {
		putString(t, s, "_pgcdc/manifest.json", s.URL())
		putString(t, s, "k", s.URL())
	}
	wantKeys(t, ab, "", "_pgcdc/manifest.json", "k")
	wantKeys(t, abc, "", "_pgcdc/manifest.json", "k")
	wantKeys(t, root, "", "_pgcdc/manifest.json", "a/b/_pgcdc/manifest.json", "a/b/k", "a/bc/_pgcdc/manifest.json", "a/bc/k", "k")
	if got := string(read(t, ab, "k")); got != "gs://"+bucket+"/a/b/" {
		t.Fatalf("a/b store reads k = %q", got)
	}
	if err := ab.Delete(ctx(t), "k"); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, abc, "", "_pgcdc/manifest.json", "k")
	wantKeys(t, root, "a/", "a/b/_pgcdc/manifest.json", "a/bc/_pgcdc/manifest.json", "a/bc/k")

	// Conditional writes are per prefix too.
	if _, err := ab.PutIf(ctx(t), "_pgcdc/refs.json", []byte("ab"), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := abc.PutIf(ctx(t), "_pgcdc/refs.json", []byte("abc"), ""); err != nil {
		t.Fatalf("create under another prefix: %v", err)
	}
}

func TestListPaginates(t *testing.T) {
	s, p := withProxy(t, Options{})
	s.listPageSize = 2
	var want []string
	for i := range 7 {
		k := fmt.Sprintf("t/%d", 6-i)
		putString(t, s, k, k)
		want = append(want, fmt.Sprintf("t/%d", i))
	}
	putString(t, s, "u", "outside")
	p.requests()
	wantKeys(t, s, "t/", want...)
	if n := count(p.requests(), "GET /storage/v1/b/proxied/o"); n != 4 {
		t.Fatalf("listing 7 objects 2 a page took %d requests, want 4", n)
	}
}

// TestRetries: transient server errors on every kind of call are retried,
// a persistent one ends after MaxAttempts, and an error that is not
// transient is not retried.
func TestRetries(t *testing.T) {
	s, p := withProxy(t, Options{MaxAttempts: 4})
	any503 := func(*http.Request) bool { return true }
	c := blob.Conditional(s)

	p.setFault(nth(2, http.StatusServiceUnavailable, false, isUpload))
	putString(t, s, "k", "v1")
	p.setFault(nth(2, http.StatusTooManyRequests, false, isUpload))
	v, err := c.PutIf(ctx(t), "m", []byte("m1"), "")
	if err != nil {
		t.Fatalf("PutIf through two 429s: %v", err)
	}
	p.setFault(nth(2, http.StatusInternalServerError, false, isUpload))
	if v, err = c.PutIf(ctx(t), "m", []byte("m2"), v); err != nil {
		t.Fatalf("PutIf through two 500s: %v", err)
	}
	p.setFault(nth(2, http.StatusServiceUnavailable, false, any503))
	if got := string(read(t, s, "k")); got != "v1" {
		t.Fatalf("Get = %q", got)
	}
	p.setFault(nth(2, http.StatusServiceUnavailable, false, any503))
	if data, rv, err := c.ReadVersion(ctx(t), "m"); err != nil || string(data) != "m2" || rv != v {
		t.Fatalf("ReadVersion = %q, %q, %v; want m2, %q", data, rv, err, v)
	}
	p.setFault(nth(2, http.StatusServiceUnavailable, false, any503))
	wantKeys(t, s, "", "k", "m")
	p.setFault(nth(2, http.StatusBadGateway, false, any503))
	if err := s.Delete(ctx(t), "k"); err != nil {
		t.Fatalf("Delete through two 502s: %v", err)
	}

	// A delete whose response was lost: the retry finds nothing, which
	// is success.
	putString(t, s, "d", "x")
	p.setFault(nth(1, http.StatusServiceUnavailable, true, func(r *http.Request) bool { return r.Method == http.MethodDelete }))
	if err := s.Delete(ctx(t), "d"); err != nil {
		t.Fatalf("Delete with a lost response: %v", err)
	}

	// Persistent failure: bounded.
	p.setFault(func(*http.Request) (int, bool) { return http.StatusServiceUnavailable, false })
	p.requests()
	if _, err := s.Get(ctx(t), "m"); err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get against a failing server = %v, want an error", err)
	} else if !strings.Contains(err.Error(), "gs://proxied/m") {
		t.Errorf("error %q does not name the object", err)
	}
	if n := len(p.requests()); n != 4 {
		t.Fatalf("Get made %d attempts, want MaxAttempts = 4", n)
	}
	if _, err := s.List(ctx(t), ""); err == nil {
		t.Fatal("List against a failing server succeeded")
	}
	if n := len(p.requests()); n != 4 {
		t.Fatalf("List made %d attempts, want 4", n)
	}

	// Not transient: one attempt.
	p.setFault(func(*http.Request) (int, bool) { return http.StatusForbidden, false })
	if err := s.Put(ctx(t), "k", strings.NewReader("x")); err == nil {
		t.Fatal("Put against 403 succeeded")
	}
	if n := len(p.requests()); n != 1 {
		t.Fatalf("Put against 403 made %d attempts, want 1", n)
	}
}

// TestUploadRetriesBounded: an upload against a server that keeps failing
// gives up after MaxAttempts failed attempts in a row, in one request or
// in chunks; chunks that get through reset the count.
func TestUploadRetriesBounded(t *testing.T) {
	const chunk = 256 << 10
	s, p := withProxy(t, Options{MaxAttempts: 3, ChunkSize: chunk})
	p.setFault(func(*http.Request) (int, bool) { return http.StatusServiceUnavailable, false })
	if err := s.Put(ctx(t), "k", strings.NewReader("x")); err == nil {
		t.Fatal("Put against a failing server succeeded")
	}
	if n := len(p.requests()); n != 3 {
		t.Fatalf("a one-request Put made %d attempts, want MaxAttempts = 3", n)
	}
	if _, err := s.PutIf(ctx(t), "m", []byte("x"), ""); err == nil || errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("PutIf against a failing server = %v, want a server error", err)
	}
	if n := len(p.requests()); n != 3 {
		t.Fatalf("PutIf made %d attempts, want 3", n)
	}

	// A failure before every request of a 4-chunk upload: 5 failures in
	// all, but never 3 without a chunk getting through in between.
	var mu sync.Mutex
	seen := map[string]int{}
	p.setFault(func(r *http.Request) (int, bool) {
		if !isUpload(r) {
			return 0, false
		}
		mu.Lock()
		defer mu.Unlock()
		k := r.Method + r.Header.Get("Content-Range")
		if seen[k]++; seen[k] == 1 {
			return http.StatusServiceUnavailable, false
		}
		return 0, false
	})
	data := pattern(3*chunk+5, 4)
	if err := s.Put(ctx(t), "big", bytes.NewReader(data)); err != nil {
		t.Fatalf("Put with a failure before each request: %v", err)
	}
	if got := read(t, s, "big"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(data))
	}
	// A chunk that never gets through ends the upload, with no object.
	p.requests()
	p.setFault(func(r *http.Request) (int, bool) {
		if isUpload(r) && strings.Contains(r.Header.Get("Content-Range"), "bytes 262144-") {
			return http.StatusServiceUnavailable, false
		}
		return 0, false
	})
	if err := s.Put(ctx(t), "big2", bytes.NewReader(data)); err == nil {
		t.Fatal("Put with a chunk that always fails succeeded")
	}
	if n := count(p.requests(), "/upload/"); n != 1+1+3 {
		t.Fatalf("Put made %d upload requests, want start + first chunk + 3 tries of the second", n)
	}
	p.setFault(nil)
	if _, err := s.Get(ctx(t), "big2"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a failed upload left an object: %v", err)
	}
}

// TestPutIfLostResponse: a conditional write that succeeded but whose
// response was lost is retried, and the retry fails its precondition. The
// caller sees ErrPrecondition and finds its own content on re-read (doc.go).
func TestPutIfLostResponse(t *testing.T) {
	s, p := withProxy(t, Options{})
	v1, err := s.PutIf(ctx(t), "_pgcdc/manifest.json", []byte("one"), "")
	if err != nil {
		t.Fatal(err)
	}
	p.setFault(nth(1, http.StatusServiceUnavailable, true, isUpload))
	_, err = s.PutIf(ctx(t), "_pgcdc/manifest.json", []byte("two"), v1)
	if !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("PutIf with a lost response = %v, want ErrPrecondition from the retry", err)
	}
	data, v2, err := s.ReadVersion(ctx(t), "_pgcdc/manifest.json")
	if err != nil || string(data) != "two" || v2 == v1 {
		t.Fatalf("ReadVersion = %q, %q, %v; want our own write", data, v2, err)
	}
}

func TestPutIfVersionsNeverHandedOut(t *testing.T) {
	s, p := withProxy(t, Options{})
	v, err := s.PutIf(ctx(t), "m", []byte("x"), "")
	if err != nil {
		t.Fatal(err)
	}
	p.requests()
	for _, bad := range []blob.Version{"0", "-1", "0" + v, v + " ", "+" + v, "x"} {
		if _, err := s.PutIf(ctx(t), "m", []byte("y"), bad); !errors.Is(err, blob.ErrPrecondition) {
			t.Errorf("PutIf(expected %q) = %v, want ErrPrecondition", bad, err)
		}
	}
	if n := len(p.requests()); n != 0 {
		t.Fatalf("made-up versions sent %d requests, want none", n)
	}
}

func TestPutIfMissingBucket(t *testing.T) {
	endpoint, _ := gcstest.Start(t)
	s := open(t, endpoint, Options{Bucket: "no-such-bucket"})
	if _, err := s.PutIf(ctx(t), "m", []byte("x"), ""); err == nil || errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("create in a missing bucket = %v, want an error that is not ErrPrecondition", err)
	}
	if err := s.Put(ctx(t), "k", strings.NewReader("x")); err == nil {
		t.Fatal("Put into a missing bucket succeeded")
	}
}

// TestEmulatorHost: with STORAGE_EMULATOR_HOST set, a store configured
// like production (bucket and prefix only) talks to the emulator without
// credentials; this is how e2e tests point the pg-cdc binary at gcstest.
func TestEmulatorHost(t *testing.T) {
	endpoint, bucket := gcstest.Start(t)
	for _, host := range []string{endpoint, strings.TrimPrefix(endpoint, "http://")} {
		t.Setenv(EmulatorHostEnv, host)
		s, err := New(ctx(t), Options{Bucket: bucket, Prefix: "e2e"})
		if err != nil {
			t.Fatal(err)
		}
		putString(t, s, "k", host)
		if got := string(read(t, s, "k")); got != host {
			t.Fatalf("read %q", got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// storageClientPlaceholder is never called: New refuses the options first.
var storageClientPlaceholder storage.Client

func TestNewOptions(t *testing.T) {
	dir := t.TempDir()
	sa := filepath.Join(dir, "sa.json")
	weird := filepath.Join(dir, "weird.json")
	os.WriteFile(sa, []byte(`{"type":"service_account"}`), 0o600)
	os.WriteFile(weird, []byte(`{"type":"gdch_service_account_but_not_really"}`), 0o600)
	t.Setenv(EmulatorHostEnv, "")
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no bucket", Options{}, "no bucket"},
		{"bucket with slash", Options{Bucket: "a/b"}, "invalid bucket"},
		{"bad prefix", Options{Bucket: "b", Prefix: "../x"}, "invalid prefix"},
		{"absolute prefix", Options{Bucket: "b", Prefix: "/x"}, "invalid prefix"},
		{"negative chunk", Options{Bucket: "b", ChunkSize: -1}, "negative"},
		{"client and endpoint", Options{Bucket: "b", Client: &storageClientPlaceholder, Endpoint: "http://x"}, "ready client"},
		{"credentials and no auth", Options{Bucket: "b", CredentialsFile: sa, NoAuth: true}, "authentication is off"},
		{"missing credentials", Options{Bucket: "b", CredentialsFile: filepath.Join(dir, "none.json")}, "read credentials file"},
		{"unknown credentials type", Options{Bucket: "b", CredentialsFile: weird}, "unsupported type"},
		{"bad endpoint", Options{Bucket: "b", Endpoint: "127.0.0.1:4443", NoAuth: true}, "invalid endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(ctx(t), tc.opts)
			if err == nil {
				s.Close()
				t.Fatalf("New(%+v) succeeded", tc.opts)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	t.Run("credentials with the emulator", func(t *testing.T) {
		t.Setenv(EmulatorHostEnv, "127.0.0.1:1")
		if _, err := New(ctx(t), Options{Bucket: "b", CredentialsFile: sa}); err == nil || !strings.Contains(err.Error(), EmulatorHostEnv) {
			t.Fatalf("New = %v, want a refusal naming %s", err, EmulatorHostEnv)
		}
	})
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4443":                   "http://127.0.0.1:4443/storage/v1/",
		"http://127.0.0.1:4443/":                  "http://127.0.0.1:4443/storage/v1/",
		"https://storage.example.com/storage/v1":  "https://storage.example.com/storage/v1/",
		"https://storage.example.com/storage/v1/": "https://storage.example.com/storage/v1/",
	} {
		if got, err := endpointURL(in); err != nil || got != want {
			t.Errorf("endpointURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
