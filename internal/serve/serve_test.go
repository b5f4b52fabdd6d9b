package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
)

// echo is the surface under the server in these tests: it answers with
// the principal the server authenticated and how much body it read, and
// fills in the audit record as a handler does. With hold, it tells entered
// it runs and then waits for hold to close.
func echo(hold chan struct{}, entered ...chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold != nil {
			for _, e := range entered {
				e <- struct{}{}
			}
			<-hold
		}
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, "too big", http.StatusRequestEntityTooLarge)
				return
			}
		}
		access.RecordFrom(r.Context()).Tables = []string{"public.orders"}
		_ = json.NewEncoder(w).Encode(map[string]any{"principal": access.PrincipalFrom(r.Context()).String(), "read": n})
	})
}

// start serves o on a fresh listener and returns its base URL.
func start(t *testing.T, o Options) string {
	t.Helper()
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(o.Listen)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return "http://127.0.0.1:" + port
}

func get(t *testing.T, url, token string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body, resp.Header
}

// TestAuthMatrix: no token, a wrong one and the right one, on a loopback
// bind and on every interface; without tokens only loopback may serve, and
// then anonymously; the probes need no token.
func TestAuthMatrix(t *testing.T) {
	tokens, err := ParseTokens(map[string]string{"alice": Hash("s3cret-alice"), "bob": Hash("s3cret-bob")}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, listen := range []string{"127.0.0.1:0", "0.0.0.0:0"} {
		base := start(t, Options{Listen: listen, Tokens: tokens, REST: echo(nil)})
		for _, tc := range []struct {
			token string
			want  int
			who   string
		}{{"", 401, ""}, {"wrong", 401, ""}, {"s3cret-alice", 200, "alice"}, {"s3cret-bob", 200, "bob"}} {
			code, body, hdr := get(t, base+"/v1/tables", tc.token)
			if code != tc.want || tc.who != "" && body["principal"] != tc.who {
				t.Errorf("%s, token %q: %d %v, want %d as %q", listen, tc.token, code, body, tc.want, tc.who)
			}
			if code == 401 && (body["code"] != "unauthorized" || !strings.Contains(hdr.Get("WWW-Authenticate"), "Bearer")) {
				t.Errorf("%s: a 401 without its problem code or challenge: %v %v", listen, body, hdr)
			}
		}
		for _, probe := range []string{"/livez", "/readyz"} {
			if code, _, _ := get(t, base+probe, ""); code != 200 {
				t.Errorf("%s %s without a token: %d", listen, probe, code)
			}
		}
	}
	anon := start(t, Options{REST: echo(nil)})
	if code, body, _ := get(t, anon+"/v1/tables", ""); code != 200 || body["principal"] != access.Anonymous {
		t.Errorf("loopback without tokens: %d %v, want anonymous access", code, body)
	}
	for _, listen := range []string{"0.0.0.0:8080", ":8080", "192.0.2.10:8080", "[::]:8080"} {
		if _, err := New(Options{Listen: listen, REST: echo(nil)}); !errors.Is(err, ErrNeedsTokens) {
			t.Errorf("New(%s) without tokens: %v, want ErrNeedsTokens", listen, err)
		}
	}
	for _, listen := range []string{"127.0.0.1:8080", "[::1]:8080", "localhost:8080"} {
		if _, err := New(Options{Listen: listen, REST: echo(nil)}); err != nil {
			t.Errorf("New(%s) without tokens: %v, want it to serve on loopback", listen, err)
		}
	}
}

// TestRateLimit: a principal past its bucket gets 429 with Retry-After;
// another principal is not slowed by it.
func TestRateLimit(t *testing.T) {
	tokens, _ := ParseTokens(map[string]string{"alice": Hash("a"), "bob": Hash("b")}, "")
	base := start(t, Options{Tokens: tokens, RatePerSecond: 1, Burst: 3, REST: echo(nil)})
	var codes []int
	for range 5 {
		code, body, hdr := get(t, base+"/v1/tables", "a")
		codes = append(codes, code)
		if code == 429 && (hdr.Get("Retry-After") == "" || body["code"] != "rate_limited") {
			t.Errorf("429 without Retry-After or its code: %v %v", hdr, body)
		}
	}
	if fmt.Sprint(codes) != "[200 200 200 429 429]" {
		t.Errorf("alice's codes %v, want a burst of 3 then 429", codes)
	}
	if code, _, _ := get(t, base+"/v1/tables", "b"); code != 200 {
		t.Errorf("bob after alice's burst: %d, want 200 (limits are per principal)", code)
	}
	// The key is the authenticated principal: a header the client chooses
	// changes nothing.
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/tables", nil)
	req.Header.Set("Authorization", "Bearer a")
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 {
		t.Errorf("alice with another X-Forwarded-For: %d, want 429", resp.StatusCode)
	}
}

// TestBodyCap: a body over the cap is 413, declared or streamed; a body
// under it is read whole.
func TestBodyCap(t *testing.T) {
	base := start(t, Options{MaxBodyBytes: 1 << 10, REST: echo(nil)})
	post := func(body io.Reader, length int64) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/query", body)
		req.ContentLength = length
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(strings.NewReader(strings.Repeat("x", 1000)), 1000); code != 200 {
		t.Errorf("1000 bytes: %d", code)
	}
	if code := post(strings.NewReader(strings.Repeat("x", 2000)), 2000); code != 413 {
		t.Errorf("2000 bytes declared: %d, want 413", code)
	}
	if code := post(io.MultiReader(strings.NewReader(strings.Repeat("x", 100<<20))), -1); code != 413 {
		t.Errorf("100 MiB chunked: %d, want 413", code)
	}
}

// TestSlowHeaders: a client that sends its headers slowly is cut off by
// the header timeout, and the server serves the next client.
func TestSlowHeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 5 s header timeout")
	}
	base := start(t, Options{REST: echo(nil)})
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	began := time.Now()
	if _, err := io.WriteString(conn, "GET /v1/tables HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	// Drip a header byte a second; the server must close the connection.
	var closed bool
	for i := 0; i < 15 && !closed; i++ {
		if _, err := io.WriteString(conn, "X"); err != nil {
			closed = true
			break
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := bufio.NewReader(conn).ReadByte(); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			closed = true
		}
	}
	if !closed || time.Since(began) > 12*time.Second {
		t.Errorf("slow headers: closed %v after %s, want the connection cut at the 5 s header timeout", closed, time.Since(began))
	}
	if code, _, _ := get(t, base+"/v1/tables", ""); code != 200 {
		t.Errorf("the next client: %d", code)
	}
}

// TestConcurrencyCap: past serve.max_concurrent, a request waits for a
// slot, then gets 503 with Retry-After.
func TestConcurrencyCap(t *testing.T) {
	hold, entered := make(chan struct{}), make(chan struct{}, 2)
	base := start(t, Options{MaxConcurrent: 2, QueueWait: 100 * time.Millisecond, REST: echo(hold, entered)})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if code, _, _ := get(t, base+"/v1/tables", ""); code != 200 {
				t.Errorf("a held request: %d", code)
			}
		})
	}
	<-entered // both hold their slots
	<-entered
	code, body, hdr := get(t, base+"/v1/tables", "")
	if code != 503 || hdr.Get("Retry-After") == "" || body["code"] != "busy" {
		t.Errorf("a third request: %d %v %v, want 503 busy with Retry-After", code, body, hdr)
	}
	close(hold)
	wg.Wait()
	if code, _, _ := get(t, base+"/v1/tables", ""); code != 200 {
		t.Errorf("after the slots freed: %d", code)
	}
}

// TestStreamsCapAndGate: past serve.max_streams a new stream is 503
// busy; a stream holds no slot while it waits, and its reads take one
// (access.Enter), refused with ErrBusy when every slot is taken.
func TestStreamsCapAndGate(t *testing.T) {
	hold, entered := make(chan struct{}), make(chan struct{}, 1)
	streamIn, readNow, readErr := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		streamIn <- struct{}{}
		select {
		case <-readNow:
		case <-r.Context().Done():
			return
		}
		release, err := access.Enter(r.Context())
		if err == nil {
			release()
		}
		readErr <- err
		<-r.Context().Done()
	})
	base := start(t, Options{MaxConcurrent: 1, MaxStreams: 1, QueueWait: 100 * time.Millisecond, REST: echo(hold, entered), Events: stream})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/stream/status", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-streamIn
	if code, body, _ := get(t, base+"/v1/stream/status", ""); code != 503 || body["code"] != "busy" {
		t.Errorf("a second stream past max_streams 1: %d %v, want 503 busy", code, body)
	}
	// The open stream holds no slot: a request runs beside it.
	var wg sync.WaitGroup
	wg.Go(func() {
		if code, _, _ := get(t, base+"/v1/tables", ""); code != 200 {
			t.Errorf("a request beside a stream: %d", code)
		}
	})
	<-entered // it holds the only slot now
	readNow <- struct{}{}
	if err := <-readErr; !errors.Is(err, access.ErrBusy) {
		t.Errorf("a stream's read while the slot is held: %v, want ErrBusy", err)
	}
	close(hold)
	wg.Wait()
}

// TestParseTokens: the configuration's map and a tokens file; a value that
// is not a hash is refused without being echoed.
func TestParseTokens(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("# ci\nci-bot "+Hash("ci")+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tk, err := ParseTokens(map[string]string{"alice": Hash("a")}, file)
	if err != nil || len(tk) != 2 {
		t.Fatalf("ParseTokens: %v, %v", tk, err)
	}
	if p, ok := tk.authenticate("ci"); !ok || p.Name != "ci-bot" {
		t.Errorf("ci-bot's token: %v %v", p, ok)
	}
	_, err = ParseTokens(map[string]string{"alice": "plain-secret-token"}, "")
	if err == nil || strings.Contains(err.Error(), "plain-secret-token") || !strings.Contains(err.Error(), "alice") {
		t.Errorf("a token given in clear: %v, want an error naming alice and not the value", err)
	}
	if _, err := ParseTokens(map[string]string{"ci-bot": Hash("x")}, file); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a name in both: %v", err)
	}
}

// TestShutdownLetsRequestsFinish: a stop request lets a running request
// finish and answer (it does not inherit the stop), while new connections
// are refused.
func TestShutdownLetsRequestsFinish(t *testing.T) {
	hold, entered := make(chan struct{}), make(chan struct{}, 1)
	s, err := New(Options{Listen: "127.0.0.1:0", REST: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-hold
		if err := r.Context().Err(); err != nil {
			http.Error(w, "cancelled: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "done")
	})})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/v1/slow")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- fmt.Sprintf("%d %s", resp.StatusCode, b)
	}()
	<-entered // the request is running
	stop()
	// Shutdown has begun once the listener refuses new connections.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the listener still accepts 10 s after the stop")
		}
	}
	close(hold)
	if g := <-got; g != "200 done" {
		t.Errorf("a request running at the stop: %q, want it answered", g)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
