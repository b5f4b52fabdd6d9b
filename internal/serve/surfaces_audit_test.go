package serve

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// fakeReadPath answers the MCP query tool: any point resolves to version
// 1, any query to one row. The rest of ReadPath is not called (the nil
// embedded interface would panic).
type fakeReadPath struct{ ReadPath }

func (fakeReadPath) Resolve(_ context.Context, point string) (readpath.At, error) {
	return readpath.At{Name: point, Manifest: &manifest.Manifest{Version: 1}}, nil
}

func (fakeReadPath) Query(context.Context, readpath.At, string, ...any) (*readpath.Result, error) {
	return &readpath.Result{Columns: []readpath.Column{{Name: "n", Type: "BIGINT"}}, Rows: [][]any{{int64(1)}}}, nil
}

func (fakeReadPath) History() *manifest.History { return manifest.NewHistory(nil) }

// auditedSQL is the SQL of the MCP audit tests: its literal must not
// reach a hashed audit line.
const auditedSQL = "SELECT count(*) AS n FROM public.orders WHERE card = '4111-1111'"

// callQuery calls the query tool once over t, with auditedSQL.
func callQuery(t *testing.T, tr mcp.Transport) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query", Arguments: map[string]any{"sql": auditedSQL}}); err != nil || res.IsError {
		t.Fatalf("query: %v %+v", err, res)
	}
}

// checkMCPAudit: log holds one audit line of the query tool, with the
// SQL's hash, and its text only if !hash.
func checkMCPAudit(t *testing.T, log *logBuffer, hash bool) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "surface=mcp") && strings.Contains(l, "sql_sha256=") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("hash %v: want one MCP audit line with sql_sha256=, got %q in\n%s", hash, lines, log)
	}
	if has := strings.Contains(lines[0], "4111-1111"); has == hash {
		t.Errorf("hash %v: the SQL text in the line is %v: %s", hash, has, lines[0])
	}
}

// TestSurfacesMCPAuditHashSQL: Options.HashSQL reaches the audit of /mcp
// that Surfaces wires, through the server, as the configuration sets it.
func TestSurfacesMCPAuditHashSQL(t *testing.T) {
	for _, hash := range []bool{false, true} {
		log := &logBuffer{}
		logger := slog.New(slog.NewTextHandler(log, nil))
		o := Options{Listen: "127.0.0.1:0", HashSQL: hash, Log: logger}
		o.Surfaces(fakeReadPath{}, SurfaceOptions{Log: logger, Version: "test"})
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler())
		callQuery(t, &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp"})
		hs.Close()
		checkMCPAudit(t, log, hash)
	}
}

// TestStdioMCPAuditHashSQL: the same for pg-cdc mcp's server.
func TestStdioMCPAuditHashSQL(t *testing.T) {
	for _, hash := range []bool{false, true} {
		log := &logBuffer{}
		srv := Options{HashSQL: hash}.StdioMCP(fakeReadPath{}, "test", slog.New(slog.NewTextHandler(log, nil)))
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- srv.ServeStdio(context.Background(), inR, outW); outW.Close() }()
		callQuery(t, &mcp.IOTransport{Reader: outR, Writer: inW})
		inW.Close()
		if err := <-done; err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
		checkMCPAudit(t, log, hash)
	}
}
