package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/metrics"
)

// logBuffer is a log sink safe for the server's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines are the lines logged with msg.
func (l *logBuffer) lines(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, "msg=\""+msg+"\"") {
			out = append(out, line)
		}
	}
	return out
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// clock is a settable time for the server's limiter and log sampling.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// harness is a server driven through its handler, each request from the
// remote address the test names, on a settable clock, with its metrics on
// a fresh registry and its log in a buffer.
type harness struct {
	t     *testing.T
	s     *Server
	reg   *prometheus.Registry
	log   *logBuffer
	clock *clock
}

func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	h := &harness{t: t, reg: prometheus.NewRegistry(), log: &logBuffer{}, clock: &clock{t: time.Unix(1_700_000_000, 0)}}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	o.Observer = metrics.NewServe(h.reg)
	o.Log = slog.New(slog.NewTextHandler(h.log, nil))
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	s.now = h.clock.now
	h.s = s
	return h
}

// do sends method path from remote with token ("" for none) and a body
// of size bytes, and returns the answer.
func (h *harness) do(method, path, remote, token string, size int) *httptest.ResponseRecorder {
	h.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(strings.Repeat("x", size)))
	req.RemoteAddr = remote
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.s.Handler().ServeHTTP(w, req)
	return w
}

// refusals reads pgcdc_serve_refusals_total from the registry:
// "surface/code" → count, the series at zero left out.
func (h *harness) refusals() map[string]float64 {
	h.t.Helper()
	out := map[string]float64{}
	for k, v := range refusalSeries(h.t, h.reg) {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// refusalSeries reads every series of pgcdc_serve_refusals_total from
// reg, those at zero too: "surface/code" → count.
func refusalSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "pgcdc_serve_refusals_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["surface"]+"/"+labels["code"]] = m.GetCounter().GetValue()
		}
	}
	return out
}

// status is a handler that answers code (a surface's own refusal: MCP's
// 403 on a foreign Host, the API's 503 when a version was collected).
func status(code int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) })
}

// TestRefusalsCountedAndLogged: every refusal code is counted by surface
// and code, whichever layer answered it, and logged at warn with the
// remote address, path and principal, never the token; the log is
// sampled per address and code, the counter is not.
func TestRefusalsCountedAndLogged(t *testing.T) {
	tokens, _ := ParseTokens(map[string]string{"alice": Hash("s3cret-alice"), "bob": Hash("s3cret-bob"), "carol": Hash("s3cret-carol")}, "")
	rest := http.NewServeMux()
	rest.Handle("/v1/tables", echo(nil))
	rest.Handle("/v1/collected", status(http.StatusServiceUnavailable))
	// A bucket of one per principal: alice's second request is 429.
	h := newHarness(t, Options{Tokens: tokens, RatePerSecond: 0.01, Burst: 1, MaxBodyBytes: 100, UnauthBurst: 100,
		REST: rest, MCP: status(http.StatusForbidden), Metrics: status(http.StatusOK),
		Ready: func(context.Context) error { return errors.New("down") }})
	const a, b = "192.0.2.1:40000", "192.0.2.2:40000"

	for range 3 {
		h.do("GET", "/v1/tables", a, "wrong-token", 0) // 401 ×3 from a
	}
	h.do("GET", "/metrics", b, "", 0)                   // 401 on metrics
	h.do("POST", "/v1/tables", b, "s3cret-alice", 1000) // 413 (the body cap, before authentication)
	h.do("GET", "/v1/tables", b, "s3cret-alice", 0)     // 200: alice's one request
	h.do("GET", "/v1/tables", b, "s3cret-alice", 0)     // 429: alice over her rate
	h.do("POST", "/mcp", b, "s3cret-alice", 0)          // 429 again, on mcp
	h.do("POST", "/mcp", b, "s3cret-bob", 0)            // 403 from the MCP surface
	if w := h.do("GET", "/v1/collected", b, "s3cret-carol", 0); w.Code != 503 {
		t.Fatalf("collected: %d", w.Code) // 503 from the API
	}
	// Probes are not observed: a 503 from /readyz is an answer.
	if w := h.do("GET", "/readyz", b, "", 0); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("readyz: %d, want 503", w.Code)
	}

	want := map[string]float64{"rest/401": 3, "metrics/401": 1, "rest/413": 1, "rest/429": 1, "mcp/429": 1, "mcp/403": 1, "rest/503": 1}
	if got := h.refusals(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("refusals %v, want %v", got, want)
	}

	lines := h.log.lines("request refused")
	joined := strings.Join(lines, "\n")
	if strings.Contains(h.log.String(), "s3cret") || strings.Contains(h.log.String(), "wrong-token") || strings.Contains(joined, "Bearer") {
		t.Errorf("the log holds a token:\n%s", h.log)
	}
	// a's three 401s: one line (sampled), at warn, with what an operator needs.
	var fromA []string
	for _, l := range lines {
		if strings.Contains(l, "remote=192.0.2.1 ") {
			fromA = append(fromA, l)
		}
	}
	if len(fromA) != 1 || !strings.Contains(fromA[0], "level=WARN") || !strings.Contains(fromA[0], "status=401") ||
		!strings.Contains(fromA[0], "path=/v1/tables") || !strings.Contains(fromA[0], "surface=rest") || strings.Contains(fromA[0], "principal=") {
		t.Errorf("a's refusal lines: %q, want one 401 line without a principal", fromA)
	}
	for _, want := range []string{"status=429 surface=rest remote=192.0.2.2 method=GET path=/v1/tables principal=alice",
		"status=403 surface=mcp remote=192.0.2.2 method=POST path=/mcp principal=bob", "status=413 surface=rest",
		"status=503 surface=rest remote=192.0.2.2 method=GET path=/v1/collected principal=carol"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no refusal line with %q in\n%s", want, joined)
		}
	}
	// mcp's 429 came from b like rest's: one line per address and code.
	if n := strings.Count(joined, "status=429"); n != 1 {
		t.Errorf("%d lines of 429 from one address, want 1 (sampled)", n)
	}
	// After the sampling interval, a's next 401 is logged with the count
	// of the lines held back.
	h.clock.add(refusalLogEvery)
	h.do("GET", "/v1/tables", a, "", 0)
	if last := h.log.lines("request refused"); !strings.Contains(last[len(last)-1], "remote=192.0.2.1 ") || !strings.Contains(last[len(last)-1], "suppressed=2") {
		t.Errorf("a's line after the interval: %q, want suppressed=2", last[len(last)-1])
	}
}

// TestUnauthenticatedFlood: requests failing authentication from one
// address are 429 past their bucket, with Retry-After, even with the
// right token (it is not looked at); another address is still answered;
// the bucket refills with time.
func TestUnauthenticatedFlood(t *testing.T) {
	tokens, _ := ParseTokens(map[string]string{"alice": Hash("s3cret-alice")}, "")
	h := newHarness(t, Options{Tokens: tokens, UnauthRatePerSecond: 0.5, UnauthBurst: 3, REST: echo(nil)})
	const flooder, other = "198.51.100.7:5000", "198.51.100.8:5000"
	var codes []int
	for i := range 6 {
		w := h.do("GET", "/v1/tables", flooder, fmt.Sprintf("guess-%d", i), 0)
		codes = append(codes, w.Code)
		if w.Code == 429 && (w.Header().Get("Retry-After") != "2" || !strings.Contains(w.Body.String(), "rate_limited")) {
			t.Errorf("429 without Retry-After 2 or its code: %v %s", w.Header(), w.Body)
		}
	}
	if fmt.Sprint(codes) != "[401 401 401 429 429 429]" {
		t.Errorf("the flooder's codes %v, want 3 failures then 429", codes)
	}
	if w := h.do("GET", "/v1/tables", flooder, "s3cret-alice", 0); w.Code != 429 {
		t.Errorf("the right token from the flooding address: %d, want 429 before the token is checked", w.Code)
	}
	if w := h.do("GET", "/v1/tables", "[2001:db8:1:2::9]:5000", "s3cret-alice", 0); w.Code != 200 {
		t.Errorf("another address, right token: %d", w.Code)
	}
	if w := h.do("GET", "/v1/tables", other, "", 0); w.Code != 401 {
		t.Errorf("another address without a token: %d, want 401", w.Code)
	}
	if got := h.refusals(); got["rest/429"] != 4 || got["rest/401"] != 4 {
		t.Errorf("refusals %v, want 4 of 429 and 4 of 401", got)
	}
	// Successes cost nothing: the address with the right token is not
	// remembered.
	if n := h.s.peers.len(); n != 2 {
		t.Errorf("%d addresses remembered, want 2 (the two that failed)", n)
	}
	h.clock.add(2 * time.Second) // one failure more
	if w := h.do("GET", "/v1/tables", flooder, "s3cret-alice", 0); w.Code != 200 {
		t.Errorf("the right token after the wait: %d", w.Code)
	}
	if w := h.do("GET", "/v1/tables", flooder, "", 0); w.Code != 401 {
		t.Errorf("one failure after the wait: %d, want 401", w.Code)
	}
	if w := h.do("GET", "/v1/tables", flooder, "", 0); w.Code != 429 {
		t.Errorf("the next: %d, want 429", w.Code)
	}
	// IPv6: one /64 is one client.
	for i := range 4 {
		h.do("GET", "/v1/tables", fmt.Sprintf("[2001:db8:9:9::%x]:1", i+1), "", 0)
	}
	if w := h.do("GET", "/v1/tables", "[2001:db8:9:9:ffff::1]:1", "", 0); w.Code != 429 {
		t.Errorf("a fifth address of the same /64: %d, want 429", w.Code)
	}
	// A server without tokens has nobody to fail: no limit applies.
	anon := newHarness(t, Options{UnauthBurst: 1, REST: echo(nil)})
	for range 3 {
		if w := anon.do("GET", "/v1/tables", flooder, "", 0); w.Code != 200 {
			t.Fatalf("anonymous loopback server: %d", w.Code)
		}
	}
}

// TestUnauthenticatedFloodOverHTTP: the same through a listener, keyed
// by the connection's address.
func TestUnauthenticatedFloodOverHTTP(t *testing.T) {
	tokens, _ := ParseTokens(map[string]string{"alice": Hash("a")}, "")
	base := start(t, Options{Tokens: tokens, UnauthRatePerSecond: 0.01, UnauthBurst: 2, REST: echo(nil)})
	var codes []int
	for range 3 {
		code, _, hdr := get(t, base+"/v1/tables", "nope")
		codes = append(codes, code)
		if code == 429 && hdr.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	}
	if fmt.Sprint(codes) != "[401 401 429]" {
		t.Errorf("codes %v, want [401 401 429]", codes)
	}
}

// TestRefusalSeriesAtZero: a fresh registry has a series at zero for
// every surface and code the server counts refusals by (one list,
// access.RefusalSurfaces and RefusalCodes, for serve and metrics), and
// no other.
func TestRefusalSeriesAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.NewServe(reg)
	got := refusalSeries(t, reg)
	surfaces := []string{access.SurfaceREST, access.SurfaceSSE, access.SurfaceMCP, SurfaceMetrics}
	for _, surface := range surfaces {
		for _, code := range refusalCodes {
			if v, ok := got[fmt.Sprintf("%s/%d", surface, code)]; !ok || v != 0 {
				t.Errorf("series %s/%d: %v %v, want at 0", surface, code, v, ok)
			}
		}
	}
	if len(got) != len(surfaces)*len(refusalCodes) {
		t.Errorf("%d series, want %d: %v", len(got), len(surfaces)*len(refusalCodes), got)
	}
	// Every code the server refuses with is one of them.
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		if refusalIndex(code) < 0 {
			t.Errorf("%d is not a refusal code", code)
		}
	}
}

// TestUnauthenticatedLimitOff: with UnauthOff (serve.unauthenticated_rate_limit:
// 0), failures from one address are never 429, and the right token from
// it is answered; 0 in Options is still the default.
func TestUnauthenticatedLimitOff(t *testing.T) {
	tokens, _ := ParseTokens(map[string]string{"alice": Hash("s3cret-alice")}, "")
	h := newHarness(t, Options{Tokens: tokens, UnauthOff: true, UnauthRatePerSecond: 0.01, UnauthBurst: 1, REST: echo(nil)})
	const proxy = "192.0.2.9:443" // every client behind it
	for i := range 20 {
		if w := h.do("GET", "/v1/tables", proxy, fmt.Sprintf("guess-%d", i), 0); w.Code != 401 {
			t.Fatalf("failure %d: %d, want 401 (no limit)", i, w.Code)
		}
	}
	if w := h.do("GET", "/v1/tables", proxy, "s3cret-alice", 0); w.Code != 200 {
		t.Errorf("the right token from the same address: %d, want 200", w.Code)
	}
	if got := h.refusals(); got["rest/401"] != 20 || got["rest/429"] != 0 {
		t.Errorf("refusals %v, want 20 of 401 and no 429", got)
	}
	if r := h.s.o.UnauthRatePerSecond; r != 0 {
		t.Errorf("rate with UnauthOff: %g, want 0 (off)", r)
	}
	if d := newHarness(t, Options{Tokens: tokens}); d.s.o.UnauthRatePerSecond != DefaultUnauthRate || d.s.o.UnauthBurst != DefaultUnauthBurst {
		t.Errorf("unset: %g/%d, want the defaults", d.s.o.UnauthRatePerSecond, d.s.o.UnauthBurst)
	}
}

// TestPeersBound: however many addresses fail, the server remembers at
// most MaxPeers of them, the least recently seen forgotten first, and the
// address flooding now stays limited.
func TestPeersBound(t *testing.T) {
	tokens, _ := ParseTokens(map[string]string{"alice": Hash("a")}, "")
	h := newHarness(t, Options{Tokens: tokens, UnauthBurst: 2, MaxPeers: 64, REST: echo(nil)})
	const flooder = "203.0.113.1:1"
	for i := range 10_000 {
		h.do("GET", "/v1/tables", fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255), "", 0)
		if i%10 == 0 {
			h.do("GET", "/v1/tables", flooder, "", 0) // seen every 10 addresses: never the least recent of 64
		}
	}
	if n := h.s.peers.len(); n != 64 {
		t.Errorf("%d addresses remembered, want the bound, 64", n)
	}
	if n := len(h.s.peers.byKey); n != 64 {
		t.Errorf("%d keys in the index, want 64", n)
	}
	if w := h.do("GET", "/v1/tables", flooder, "a", 0); w.Code != 429 {
		t.Errorf("the steady flooder: %d, want 429", w.Code)
	}
}

// TestAuditRecordHashSQL: with HashSQL the server's audit line of a query
// holds its hash and length, not its text; without, the text too.
func TestAuditRecordHashSQL(t *testing.T) {
	const sql = "SELECT * FROM public.orders WHERE card = '4111-1111'"
	query := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		access.RecordFrom(r.Context()).SQL = sql
		w.WriteHeader(http.StatusOK)
	})
	for _, hash := range []bool{false, true} {
		h := newHarness(t, Options{HashSQL: hash, REST: query})
		if w := h.do("POST", "/v1/query", "127.0.0.1:1", "", 0); w.Code != 200 {
			t.Fatalf("query: %d", w.Code)
		}
		lines := h.log.lines("read request")
		if len(lines) != 1 {
			t.Fatalf("audit lines %q", lines)
		}
		line := lines[0]
		if !strings.Contains(line, "sql_sha256=") || !strings.Contains(line, fmt.Sprintf("sql_bytes=%d", len(sql))) || !strings.Contains(line, "outcome=ok") {
			t.Errorf("hash %v: %s, want the hash, length and outcome", hash, line)
		}
		if has := strings.Contains(line, "4111-1111"); has == hash {
			t.Errorf("hash %v: the text is there: %v: %s", hash, has, line)
		}
	}
}

// TestMCPAuditHashSQL: the MCP server's records (made per tool call, by
// mcpserver) are written with the server's SQL setting too.
func TestMCPAuditHashSQL(t *testing.T) {
	for _, hash := range []bool{false, true} {
		var buf logBuffer
		auditTo(slog.New(slog.NewTextHandler(&buf, nil)), hash)(&access.Record{Surface: access.SurfaceMCP, Endpoint: "query", SQL: "SELECT 'x-secret'"})
		if has := strings.Contains(buf.String(), "x-secret"); has == hash || !strings.Contains(buf.String(), "sql_sha256=") {
			t.Errorf("hash %v: %s", hash, buf.String())
		}
	}
}
