package s3

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

// These tests put a scripted HTTP server where S3 would be, to see how
// the real SDK's answers map to the port's errors, and how many attempts
// each takes: answers versitygw cannot be made to give (409, 503, stalls).

type noBackoff struct{}

func (noBackoff) BackoffDelay(int, error) (time.Duration, error) { return 0, nil }

// scripted answers every request with handler and counts requests.
type scripted struct {
	srv      *httptest.Server
	requests atomic.Int64
	mu       sync.Mutex
	headers  []http.Header
}

func newScripted(t *testing.T, handler http.HandlerFunc) *scripted {
	sc := &scripted{}
	sc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc.requests.Add(1)
		sc.mu.Lock()
		sc.headers = append(sc.headers, r.Header.Clone())
		sc.mu.Unlock()
		io.Copy(io.Discard, r.Body)
		handler(w, r)
	}))
	t.Cleanup(sc.srv.Close)
	return sc
}

func (sc *scripted) store(t *testing.T, edit ...func(*Options)) *Store {
	t.Helper()
	opts := Options{
		Bucket:          "bkt",
		Prefix:          "pre",
		Endpoint:        sc.srv.URL,
		ForcePathStyle:  true,
		AccessKeyID:     "AKIDEXAMPLE",
		SecretAccessKey: "not-a-real-secret",
		MaxRetries:      2,
		RequestTimeout:  2 * time.Second,
		backoff:         noBackoff{},
	}
	for _, e := range edit {
		e(&opts)
	}
	s, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func s3Error(status int, code string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>scripted</Message></Error>`, code)
		}
	}
}

func TestPutIfErrors(t *testing.T) {
	tests := []struct {
		status       int
		code         string
		precondition bool
		attempts     int64
	}{
		{412, "PreconditionFailed", true, 1},
		// A concurrent conditional write: the committer re-reads (doc.go).
		{409, "ConditionalRequestConflict", true, 1},
		// If-Match on a missing key, as AWS answers it.
		{404, "NoSuchKey", true, 1},
		{404, "NoSuchBucket", false, 1},
		{404, "", false, 1}, // not S3: a wrong endpoint
		{403, "AccessDenied", false, 1},
		{503, "SlowDown", false, 3},
		{500, "InternalError", false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			handler := s3Error(tt.status, tt.code)
			if tt.code == "" {
				handler = http.NotFound
			}
			sc := newScripted(t, handler)
			s := sc.store(t)
			_, err := s.PutIf(context.Background(), "_pgcdc/manifest.json", []byte("{}"), `"abc"`)
			if err == nil {
				t.Fatal("PutIf succeeded")
			}
			if got := errors.Is(err, blob.ErrPrecondition); got != tt.precondition {
				t.Errorf("PutIf = %v: matches ErrPrecondition %t, want %t", err, got, tt.precondition)
			}
			if !strings.Contains(err.Error(), "s3://bkt/pre/_pgcdc/manifest.json") {
				t.Errorf("PutIf error %q does not name the object", err)
			}
			if strings.Contains(err.Error(), "not-a-real-secret") {
				t.Errorf("PutIf error %q holds the secret key", err)
			}
			if n := sc.requests.Load(); n != tt.attempts {
				t.Errorf("%d attempts, want %d (MaxRetries 2)", n, tt.attempts)
			}
		})
	}
}

func TestPutIfHeaders(t *testing.T) {
	sc := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v2"`)
	})
	s := sc.store(t)
	if v, err := s.PutIf(context.Background(), "m", []byte("x"), ""); err != nil || v != `"v2"` {
		t.Fatalf("PutIf create = %q, %v", v, err)
	}
	if _, err := s.PutIf(context.Background(), "m", []byte("y"), `"v1"`); err != nil {
		t.Fatal(err)
	}
	if h := sc.headers[0]; h.Get("If-None-Match") != "*" || h.Get("If-Match") != "" {
		t.Errorf("create sent If-None-Match %q If-Match %q, want * and none", h.Get("If-None-Match"), h.Get("If-Match"))
	}
	if h := sc.headers[1]; h.Get("If-Match") != `"v1"` || h.Get("If-None-Match") != "" {
		t.Errorf("replace sent If-Match %q If-None-Match %q, want \"v1\" and none", h.Get("If-Match"), h.Get("If-None-Match"))
	}
	// Without Options.Checksums no checksum header goes out (stores that
	// reject the SDK's trailing checksums).
	for _, h := range sc.headers {
		for name := range h {
			if strings.HasPrefix(strings.ToLower(name), "x-amz-checksum") || strings.HasPrefix(strings.ToLower(name), "x-amz-sdk-checksum") {
				t.Errorf("request carried %s with checksums off", name)
			}
		}
	}
}

func TestGetErrors(t *testing.T) {
	tests := []struct {
		status   int
		code     string
		notFound bool
	}{
		{404, "NoSuchKey", true},
		{404, "NoSuchBucket", false},
		{403, "AccessDenied", false},
		{404, "", false}, // not S3: a wrong endpoint
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			handler := s3Error(tt.status, tt.code)
			if tt.code == "" {
				handler = http.NotFound
			}
			s := newScripted(t, handler).store(t)
			_, err := s.Get(context.Background(), "k")
			if got := errors.Is(err, blob.ErrNotFound); got != tt.notFound {
				t.Errorf("Get = %v: matches ErrNotFound %t, want %t", err, got, tt.notFound)
			}
			_, _, err = s.ReadVersion(context.Background(), "k")
			if got := errors.Is(err, blob.ErrNotFound); got != tt.notFound {
				t.Errorf("ReadVersion = %v: matches ErrNotFound %t, want %t", err, got, tt.notFound)
			}
			err = s.Delete(context.Background(), "k")
			if (err == nil) != tt.notFound {
				t.Errorf("Delete = %v, want nil only for a missing key", err)
			}
		})
	}
}

func TestRetries(t *testing.T) {
	for _, tt := range []struct {
		maxRetries int
		attempts   int64
	}{{0, 6}, {-1, 1}, {1, 2}} {
		t.Run(fmt.Sprint(tt.maxRetries), func(t *testing.T) {
			sc := newScripted(t, s3Error(503, "SlowDown"))
			s := sc.store(t, func(o *Options) { o.MaxRetries = tt.maxRetries })
			if err := s.Delete(context.Background(), "k"); err == nil {
				t.Fatal("Delete succeeded")
			}
			if n := sc.requests.Load(); n != tt.attempts {
				t.Errorf("MaxRetries %d: %d attempts, want %d", tt.maxRetries, n, tt.attempts)
			}
		})
	}
}

// TestRequestTimeout: a store that never answers fails each attempt after
// RequestTimeout; a GetObject whose body stalls fails after the same time
// of silence, while the caller is reading.
func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	sc := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && !r.URL.Query().Has("list-type") {
			w.Header().Set("Content-Length", "1000")
			w.Header().Set("ETag", `"e"`)
			w.WriteHeader(200)
			w.Write([]byte("first bytes"))
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release) // before sc.srv.Close, which waits for handlers
	const timeout = 300 * time.Millisecond
	s := sc.store(t, func(o *Options) { o.RequestTimeout = timeout; o.MaxRetries = 1 })

	start := time.Now()
	if err := s.Delete(context.Background(), "k"); err == nil {
		t.Fatal("Delete on a silent store succeeded")
	}
	if d := time.Since(start); d > 10*timeout {
		t.Errorf("Delete on a silent store took %v; RequestTimeout %v, 2 attempts", d, timeout)
	}
	if n := sc.requests.Load(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}

	rc, err := s.Get(context.Background(), "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer rc.Close()
	start = time.Now()
	data, err := io.ReadAll(rc)
	if err == nil {
		t.Fatalf("reading a stalled body returned %q and no error", data)
	}
	if d := time.Since(start); d > 10*timeout {
		t.Errorf("reading a stalled body failed after %v, want about %v", d, timeout)
	}
}

func TestNewOptions(t *testing.T) {
	// No region from the environment.
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_PROFILE", "")
	for _, tt := range []struct {
		name string
		opts Options
		want string // in the error; "" for success
	}{
		{"no bucket", Options{Region: "eu-west-1"}, "no bucket"},
		{"bad prefix", Options{Bucket: "b", Region: "eu-west-1", Prefix: "a/../b"}, "prefix"},
		{"small parts", Options{Bucket: "b", Region: "eu-west-1", PartSize: 1 << 20}, "part size"},
		{"no region", Options{Bucket: "b"}, "no region"},
		{"endpoint without region", Options{Bucket: "b", Endpoint: "http://127.0.0.1:1"}, ""},
		{"prefix with slashes", Options{Bucket: "b", Region: "eu-west-1", Prefix: "/a/b/"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(context.Background(), tt.opts)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New = %v, want an error about %q", err, tt.want)
			case tt.want == "" && s.root != strings.Trim(tt.opts.Prefix, "/")+"/" && tt.opts.Prefix != "":
				t.Errorf("root %q", s.root)
			}
		})
	}
}

// TestCABundle: with AWS_CA_BUNDLE set, LoadDefaultConfig refuses a plain
// *http.Client; New must still work (NOTES-deps §5).
func TestCABundle(t *testing.T) {
	srv := httptest.NewTLSServer(s3Error(404, "NoSuchKey"))
	defer srv.Close()
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pemOf(srv.Certificate().Raw), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	s, err := New(context.Background(), Options{
		Bucket: "b", Endpoint: srv.URL, ForcePathStyle: true,
		AccessKeyID: "a", SecretAccessKey: "s", MaxRetries: -1,
	})
	if err != nil {
		t.Fatalf("New with AWS_CA_BUNDLE: %v", err)
	}
	// The bundle is in use: the TLS handshake with the test server's
	// self-signed certificate succeeds, and its 404 maps to not found.
	if _, err := s.Get(context.Background(), "k"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Get over TLS trusted through AWS_CA_BUNDLE = %v, want ErrNotFound", err)
	}
}

func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestSlowGet: a GetObject body that keeps arriving may take longer than
// RequestTimeout in all; only silence fails it.
func TestSlowGet(t *testing.T) {
	const (
		timeout = 300 * time.Millisecond
		chunks  = 10
	)
	sc := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(chunks))
		w.Header().Set("ETag", `"e"`)
		w.WriteHeader(200)
		for range chunks {
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			time.Sleep(timeout / 3)
		}
	})
	s := sc.store(t, func(o *Options) { o.RequestTimeout = timeout })
	start := time.Now()
	data, _, err := s.ReadVersion(context.Background(), "k")
	if err != nil {
		t.Fatalf("ReadVersion of a slow but steady body failed after %v: %v", time.Since(start), err)
	}
	if len(data) != chunks || time.Since(start) < timeout {
		t.Fatalf("read %d bytes in %v; the test wants %d bytes over more than %v", len(data), time.Since(start), chunks, timeout)
	}
}
