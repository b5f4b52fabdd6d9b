//go:build !nodb

package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// testToken is the bearer token of principal alice in the HTTP tests.
const testToken = "tok-alice-0123456789"

// bearer stands for internal/serve's authentication: the token's
// principal in the request's context, 401 without it.
func bearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(access.WithPrincipal(r.Context(), access.Principal{Name: "alice"})))
	})
}

// httpServer serves the fixture sink's MCP over streamable HTTP behind
// bearer, and collects the audit records.
type httpServer struct {
	*httptest.Server
	sink   *testSink
	mu     sync.Mutex
	audits []access.Record
}

func newHTTPServer(t *testing.T, o HTTPOptions) *httpServer {
	t.Helper()
	hs := &httpServer{sink: buildSink(t, t.TempDir())}
	r := newReader(t, hs.sink, t.TempDir())
	s := New(Options{Reader: r, Changes: changefeed.New(r, manifest.NewHistory(hs.sink.store)), Version: "test", Now: func() time.Time { return testNow },
		Audit: func(rec *access.Record) { hs.mu.Lock(); hs.audits = append(hs.audits, *rec); hs.mu.Unlock() }})
	mux := http.NewServeMux()
	mux.Handle("/mcp", bearer(s.Handler(o)))
	hs.Server = httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs
}

type headerTransport struct {
	header http.Header
	base   http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.header {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// connect is an MCP client session on hs, over streamable HTTP with
// alice's token, closed when the test ends.
func (hs *httpServer) connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	client := &http.Client{Transport: headerTransport{http.Header{"Authorization": {"Bearer " + testToken}}, http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestHTTP: the SDK's client over streamable HTTP with a token calls a
// tool, and the audit record names the principal the authentication set.
func TestHTTP(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t, HTTPOptions{})
	ctx := context.Background()
	cs := hs.connect(t)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_tables"})
	if err != nil || res.IsError {
		t.Fatalf("list_tables over HTTP: %v %+v", err, res)
	}
	var out ListTablesOutput
	decode(t, res.StructuredContent, &out)
	if len(out.Tables) != 4 || out.At.Version != 4 {
		t.Errorf("list_tables = %+v", out)
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.audits) != 1 || hs.audits[0].Principal.Name != "alice" || hs.audits[0].Endpoint != "list_tables" || hs.audits[0].Rows != 4 {
		t.Errorf("audit = %+v", hs.audits)
	}
}

// TestHTTPRefusals: a Host that is not allowed (DNS rebinding) and an
// Origin not in the allow list are refused with 403 before anything is
// read; an allowed origin and host go through.
func TestHTTPRefusals(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t, HTTPOptions{AllowedHosts: []string{"127.0.0.1", "cdc.internal"}, AllowedOrigins: []string{"https://console.example/"}})
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	for _, c := range []struct {
		name, host, origin string
		token              bool
		want               int
		says               string
	}{
		{"no token", "", "", false, http.StatusUnauthorized, "unauthorized"},
		{"allowed", "", "", true, http.StatusOK, "pg-cdc"},
		{"allowed host name", "cdc.internal:8080", "", true, http.StatusOK, "pg-cdc"},
		{"rebinding host", "evil.example", "", true, http.StatusForbidden, "DNS rebinding"},
		{"localhost not in the list", "localhost", "", true, http.StatusForbidden, "DNS rebinding"},
		{"cross origin", "", "https://evil.example", true, http.StatusForbidden, "cross-origin"},
		{"null origin", "", "null", true, http.StatusForbidden, "cross-origin"},
		{"allowed origin", "", "https://console.example", true, http.StatusOK, "pg-cdc"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, hs.URL+"/mcp", strings.NewReader(initialize))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.host != "" {
				req.Host = c.host
			}
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			if c.token {
				req.Header.Set("Authorization", "Bearer "+testToken)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body strings.Builder
			buf := make([]byte, 4096)
			n, _ := resp.Body.Read(buf)
			body.Write(buf[:n])
			if resp.StatusCode != c.want || !strings.Contains(body.String(), c.says) {
				t.Errorf("status %d, body %q; want %d saying %q", resp.StatusCode, body.String(), c.want, c.says)
			}
		})
	}
	// With no allowed hosts, the loopback names only.
	hs2 := newHTTPServer(t, HTTPOptions{})
	req, _ := http.NewRequest(http.MethodPost, hs2.URL+"/mcp", strings.NewReader(initialize))
	req.Host = "evil.example:80"
	req.Header.Set("Authorization", "Bearer "+testToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("default hosts, Host evil.example: %v %v", resp.StatusCode, err)
	}
}
