package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileAttacks are requests a hostile reader sends, in the families of
// issue 27: writes through COPY in every position a statement can hold
// one, raw file reads and listings, disclosure of paths and settings,
// extensions, settings, several statements, and exhaustion. $SINK is the
// sink's directory, $MANIFEST its manifest, $BASE one of its base files.
var hostileAttacks = []string{
	// Writes: COPY at the top, in a CTE, nested, in every subquery position.
	`COPY (SELECT 'junk') TO '$MANIFEST' (FORMAT csv, HEADER false)`,
	`WITH x AS (COPY (SELECT 'junk') TO '$MANIFEST' (FORMAT csv, HEADER false)) SELECT 1`,
	`WITH a AS (SELECT 1), x AS (COPY (SELECT 'junk') TO '$MANIFEST' (FORMAT csv)) SELECT * FROM a`,
	`WITH a AS (WITH x AS (COPY (SELECT 1) TO '$SINK/x.csv') SELECT 1) SELECT * FROM a`,
	`SELECT * FROM (WITH x AS (COPY (SELECT 1) TO '$SINK/x.csv') SELECT 1) s`,
	`SELECT (WITH x AS (COPY (SELECT 1) TO '$SINK/x.csv') SELECT 1)`,
	`SELECT 1 WHERE 1 IN (WITH x AS (COPY (SELECT 1) TO '$SINK/x.csv') SELECT 1)`,
	`SELECT 1 UNION ALL (WITH x AS (COPY (SELECT 1) TO '$SINK/x.csv') SELECT 1)`,
	`SELECT * FROM range(1) r, LATERAL (WITH x AS (COPY (SELECT 1) TO '$SINK/x.csv') SELECT 1)`,
	`WITH x AS (COPY (SELECT 1 AS id, 'forged' AS name) TO '$BASE' (FORMAT parquet)) SELECT 1`,
	`WITH x AS (COPY (SELECT 1 AS a, 2 AS b) TO '$SINK' (FORMAT parquet, PARTITION_BY (a), OVERWRITE)) SELECT 1`,
	`EXPORT DATABASE '$SINK/export'`,
	`ATTACH '$SINK/x.duckdb' AS x`,
	`CREATE TABLE t AS SELECT 1`,
	`INSERT INTO public.hostile VALUES (1, 'x')`,
	// Raw reads and listings around the views.
	`SELECT * FROM read_parquet('$BASE')`,
	`SELECT * FROM read_parquet('$SINK/**/*.parquet')`,
	`SELECT count(*) FROM '$BASE'`,
	`SELECT * FROM '$SINK/**/*.parquet'`,
	`SELECT * FROM read_text('$MANIFEST')`,
	`SELECT * FROM read_blob('$MANIFEST')`,
	`SELECT * FROM read_csv('$MANIFEST')`,
	`SELECT * FROM read_json('$MANIFEST')`,
	`SELECT * FROM glob('$SINK/**')`,
	`SELECT * FROM parquet_metadata('$BASE')`,
	`SELECT * FROM parquet_schema('$BASE')`,
	`SELECT * FROM read_text('/etc/passwd')`,
	`WITH f AS (SELECT * FROM read_parquet('$BASE')) SELECT count(*) FROM f`,
	`SELECT (SELECT count(*) FROM read_parquet('$BASE'))`,
	`SELECT * FROM public.hostile h JOIN read_parquet('$BASE') p ON true`,
	// Disclosure of paths, settings and the catalog.
	`SELECT * FROM duckdb_settings()`,
	`SELECT * FROM duckdb_views()`,
	`SELECT sql FROM duckdb_views() WHERE NOT internal`,
	`SELECT * FROM duckdb_extensions()`,
	`SELECT * FROM duckdb_databases()`,
	`SELECT current_setting('temp_directory')`,
	`SELECT current_setting('allowed_directories')`,
	`SELECT getenv('HOME')`,
	`SELECT * FROM pragma_database_list()`,
	`SELECT * FROM information_schema.views`,
	`SELECT pg_get_viewdef('public.hostile')`,
	`SELECT * FROM duckdb_temporary_files()`,
	`SELECT filename FROM public.hostile`,
	`SELECT file_row_number FROM changes.public.hostile`,
	`SELECT * FROM which_secret('s3://bucket/key', 's3')`,
	// Errors that would name where the sink lies: refused or invalid,
	// and (checked below) without the host's paths.
	`SELECT * FROM public.hostile WHERE id = 'abc'`,
	`SELECT * FROM changes.public.hostile WHERE __lsn = 'x'`,
	// Extensions and settings.
	`INSTALL httpfs`,
	`LOAD httpfs`,
	`SET enable_external_access = true`,
	`RESET allowed_directories`,
	`PRAGMA enable_profiling`,
	`CALL pragma_version()`,
	// Several statements.
	`SELECT 1; COPY (SELECT 1) TO '$SINK/x.csv'`,
	`SELECT 1; SELECT 2`,
}

// TestHostileReaders sends every attack (55) through pg-cdc query, POST
// /v1/query and MCP's query tool (over serve's HTTP and over pg-cdc mcp's
// stdio) against a real sink: each is refused, and the sink's files are
// byte for byte what they were, none added. Honest queries are answered
// right through each surface, and a query past the memory bound is
// refused while serve goes on answering.
func TestHostileReaders(t *testing.T) {
	waitBound(t)
	token, hash := serveToken(t, "mallory")
	addr := freeAddr(t)
	e := newEnv(t, envOptions{extraYAML: fmt.Sprintf("serve:\n  listen: %s\n  tokens:\n    mallory: %q\n  rate_limit: 1000\n  rate_burst: 1000\nquery:\n  memory_bytes: 268435456\n", addr, hash)})
	e.exec(`CREATE TABLE hostile (id int PRIMARY KEY, name text)`)
	e.exec(`INSERT INTO hostile SELECT g, 'row ' || g FROM generate_series(1, 100) g`)
	e.mustRun("init")
	d := e.start()
	e.exec(`UPDATE hostile SET name = 'changed' WHERE id <= 10`)
	e.exec(`DELETE FROM hostile WHERE id > 95`)
	e.waitCaughtUp(90 * time.Second)
	d.stop()

	base := ""
	filepath.WalkDir(e.sink, func(p string, de fs.DirEntry, err error) error {
		if err == nil && base == "" && strings.Contains(p, "/base/") && strings.HasSuffix(p, ".parquet") {
			base = p
		}
		return err
	})
	if base == "" {
		t.Fatal("no base file in the sink")
	}
	expand := func(sql string) string {
		return strings.NewReplacer("$MANIFEST", filepath.Join(e.sink, "_pgcdc", "manifest.json"),
			"$BASE", base, "$SINK", e.sink).Replace(sql)
	}
	before := sinkHashes(t, e.sink)

	srv := startServe(t, e, "http://"+addr)
	defer srv.stop()
	ctx := context.Background()
	httpMCP := mcpClient(t, ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}})
	cmd := exec.Command(binary, "mcp", "-c", e.config)
	cmd.Env = append(os.Environ(), e.procEnv...)
	stdioMCP := mcpClient(t, ctx, &mcp.CommandTransport{Command: cmd})

	const honest = `SELECT count(*) AS n, count(*) FILTER (WHERE name = 'changed') AS changed FROM public.hostile`
	surfaces := []struct {
		name string
		ask  func(sql string) (answer string, refused bool)
	}{
		{"pg-cdc query", func(sql string) (string, bool) {
			code, out := e.run("query", "--format", "csv", sql)
			return out, code != 0
		}},
		{"POST /v1/query", func(sql string) (string, bool) {
			status, body := postQuery(t, "http://"+addr, token, sql)
			if status != http.StatusOK && status != http.StatusBadRequest && status != http.StatusUnprocessableEntity {
				t.Errorf("POST /v1/query %.80q: status %d: %s", sql, status, body)
			}
			return body, status != http.StatusOK
		}},
		{"MCP over HTTP", mcpAsk(t, httpMCP)},
		{"MCP over stdio", mcpAsk(t, stdioMCP)},
	}
	for _, s := range surfaces {
		t.Run(s.name, func(t *testing.T) {
			for _, a := range hostileAttacks {
				sql := expand(a)
				answer, refused := s.ask(sql)
				if !refused {
					t.Errorf("%s answered %q:\n%.300s", s.name, a, answer)
				}
				if strings.Contains(answer, e.dir) && !strings.Contains(sql, e.dir) {
					t.Errorf("%s: the refusal of %q discloses a path:\n%.300s", s.name, a, answer)
				}
			}
			// An honest query, after all of them: the right answer.
			answer, refused := s.ask(honest)
			if refused || !strings.Contains(answer, "95") || !strings.Contains(answer, "10") {
				t.Errorf("%s: the honest query after the attacks: refused %v:\n%s", s.name, refused, answer)
			}
		})
		sameSink(t, s.name, before, sinkHashes(t, e.sink))
	}

	// Exhaustion: a value past query.memory_bytes (256 MiB), which DuckDB's
	// own limit does not hold, is refused by the worker's bound; serve
	// answers the next query.
	status, body := postQuery(t, "http://"+addr, token, `SELECT length(repeat('x', 1000000000))`)
	if status != http.StatusUnprocessableEntity {
		t.Errorf("repeat('x', 1e9): %d %s, want 422", status, body)
	}
	if status, body := postQuery(t, "http://"+addr, token, honest); status != http.StatusOK || !strings.Contains(body, "95") {
		t.Errorf("the query after the memory refusal: %d %s", status, body)
	}
	// Every process's peak: serve's and its query workers'.
	for _, pid := range append([]int{srv.cmd.Process.Pid}, childPIDs(t, srv.cmd.Process.Pid)...) {
		hwm := procStatusKiB(fmt.Sprintf("/proc/%d/status", pid), "VmHWM:")
		if hwm <= 0 || hwm > 768<<10 {
			t.Errorf("process %d (serve or a worker of it): peak RSS %d MiB, want some and at most 768 MiB", pid, hwm>>10)
		}
	}
	sameSink(t, "the exhaustion", before, sinkHashes(t, e.sink))

	// Workers killed under serve between requests (the OOM killer's way):
	// once serve has reaped them, the next query is answered by a new one.
	killed := childPIDs(t, srv.cmd.Process.Pid)
	for _, pid := range killed {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	e.waitFor("serve to reap its killed workers", 10*time.Second, func() bool {
		for _, pid := range killed {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
				return false
			}
		}
		return true
	})
	if status, body := postQuery(t, "http://"+addr, token, honest); status != http.StatusOK || !strings.Contains(body, "95") {
		t.Errorf("the query after serve's workers were killed: %d %s", status, body)
	}
}

// bearer adds a bearer token to each request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func mcpClient(t *testing.T, ctx context.Context, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hostile", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpAsk calls the query tool; a refusal is a tool error (or a protocol
// error), an answer its structured content.
func mcpAsk(t *testing.T, cs *mcp.ClientSession) func(string) (string, bool) {
	return func(sql string) (string, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query", Arguments: map[string]any{"sql": sql}})
		if err != nil {
			return err.Error(), true
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if res.StructuredContent != nil && !res.IsError {
			b, _ := json.Marshal(res.StructuredContent)
			return string(b), false
		}
		return text.String(), res.IsError
	}
}

func postQuery(t *testing.T, base, token, sql string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"sql": sql})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/query", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/query: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sinkHashes is every file of the sink with its content's hash.
func sinkHashes(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSink(t *testing.T, after string, before, now map[string][32]byte) {
	t.Helper()
	for p, h := range before {
		if g, ok := now[p]; !ok {
			t.Errorf("after %s: %s is gone", after, p)
		} else if g != h {
			t.Errorf("after %s: %s changed", after, p)
		}
	}
	for p := range now {
		if _, ok := before[p]; !ok {
			t.Errorf("after %s: %s was added", after, p)
		}
	}
}

// childPIDs are the processes whose parent is pid.
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, de := range entries {
		var child int
		if _, err := fmt.Sscanf(de.Name(), "%d", &child); err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so read after ')'.
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		var state string
		var ppid int
		if _, err := fmt.Sscanf(rest, " %s %d", &state, &ppid); err == nil && ppid == pid {
			out = append(out, child)
		}
	}
	if len(out) == 0 {
		t.Errorf("serve (%d) has no query worker", pid)
	}
	return out
}
