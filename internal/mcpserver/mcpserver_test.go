//go:build !nodb

package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pg-cdc/pg-cdc/internal/mcpserver/inspectortest"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

// testNow is the clock get_freshness measures against: ten seconds after
// the fixture's last flush (sinkStart + 3 minutes).
var testNow = sinkStart.Add(3*time.Minute + 10*time.Second)

// The environment variable that makes the test binary an MCP server over
// stdio on the sink in its value (for the inspector's stdio tests).
const stdioSinkEnv = "PGCDC_MCPSERVER_TEST_STDIO_SINK"

func TestMain(m *testing.M) {
	if dir := os.Getenv(stdioSinkEnv); dir != "" {
		os.Exit(serveStdioChild(dir))
	}
	os.Exit(m.Run())
}

// serveStdioChild serves MCP over stdin/stdout on the sink in dir, logs
// and audit records on stderr: what pg-cdc mcp does.
func serveStdioChild(dir string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	store, err := fs.New(dir)
	if err != nil {
		log.Error("sink", "err", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "mcpserver-stdio-")
	if err != nil {
		log.Error("temp dir", "err", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	r, err := query.NewReader(query.ReaderOptions{Sink: store, TempDir: filepath.Join(tmp, "query"), Engines: 2, Log: log})
	if err != nil {
		log.Error("reader", "err", err)
		return 1
	}
	defer r.Close()
	s := New(Options{Reader: r, Changes: changefeed.New(r, manifest.NewHistory(store)), Log: log, Version: "test", Now: func() time.Time { return testNow }})
	if err := s.ServeStdio(context.Background(), os.Stdin, os.Stdout); err != nil {
		log.Error("serve", "err", err)
		return 1
	}
	return 0
}

// harness is a server on the fixture sink and an SDK client connected to
// it in memory.
type harness struct {
	t     *testing.T
	sink  *testSink
	srv   *Server
	cs    *mcp.ClientSession
	tools map[string]*mcp.Tool

	mu     sync.Mutex
	audits []access.Record
}

func newHarness(t *testing.T, edit func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t}
	h.sink = buildSink(t, t.TempDir())
	r := newReader(t, h.sink, t.TempDir())
	o := Options{Reader: r, Changes: changefeed.New(r, manifest.NewHistory(h.sink.store)), Version: "test", Now: func() time.Time { return testNow },
		Audit: func(rec *access.Record) { h.mu.Lock(); h.audits = append(h.audits, *rec); h.mu.Unlock() }}
	if edit != nil {
		edit(&o)
	}
	h.srv = New(o)
	h.cs = connect(t, h.srv)
	h.tools = listTools(t, h.cs)
	return h
}

func connect(t *testing.T, s *Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.mcp.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

func listTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}

func (h *harness) call(name string, args map[string]any) *mcp.CallToolResult {
	h.t.Helper()
	res, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		h.t.Fatalf("%s %v: protocol error %v", name, args, err)
	}
	return res
}

// ok calls a tool that must succeed, checks its structured output
// against the output schema the client was given, and decodes it into out.
func (h *harness) ok(name string, args map[string]any, out any) {
	h.t.Helper()
	res := h.call(name, args)
	if res.IsError {
		h.t.Fatalf("%s %v: tool error %s", name, args, text(res))
	}
	inspectortest.ValidateOutput(h.t, h.tools[name], res.StructuredContent)
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		h.t.Fatalf("%s: decode %s: %v", name, b, err)
	}
}

// fail calls a tool that must answer with a tool error, and returns its
// text.
func (h *harness) fail(name string, args map[string]any) string {
	h.t.Helper()
	res := h.call(name, args)
	if !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		h.t.Fatalf("%s %v: no error; got %s", name, args, b)
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func contains(t testing.TB, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%q does not say %q", got, w)
		}
	}
}

var allTools = []string{"list_tables", "describe_table", "get_schema_history", "sample_rows", "query", "get_changes", "get_manifest", "get_freshness", "get_snapshot", "get_diff"}

// TestToolsListed: every tool, read-only, with input and output schemas
// that pass the portability rules of the inspector's --strict lint (no
// bare true/false schema, no type union, no schema without a validation
// keyword).
func TestToolsListed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if got := slices.Sorted(func(yield func(string) bool) {
		for n := range h.tools {
			if !yield(n) {
				return
			}
		}
	}); !slices.Equal(got, slices.Sorted(slices.Values(allTools))) {
		t.Fatalf("tools = %v, want %v", got, allTools)
	}
	for name, tool := range h.tools {
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("%s: not readOnlyHint", name)
		}
		for kind, s := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
			if s == nil {
				t.Errorf("%s: no %s schema", name, kind)
				continue
			}
			for _, f := range lint(s, "", "") {
				t.Errorf("%s %s schema: %s", name, kind, f)
			}
		}
	}
	// Without a change feed, get_changes is not offered.
	h2 := newHarness(t, func(o *Options) { o.Changes = nil })
	if _, ok := h2.tools["get_changes"]; ok || len(h2.tools) != len(allTools)-1 {
		t.Errorf("without Changes: %d tools, get_changes offered: %v", len(h2.tools), ok)
	}
}

// lint is the inspector's schema portability lint (clients/cli
// schema-lint, 2.12.0), errors and warnings alike.
func lint(node any, path, keyword string) []string {
	switch n := node.(type) {
	case bool:
		switch keyword {
		case "additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems":
			return nil
		}
		return []string{path + ": bare boolean schema"}
	case map[string]any:
		var out []string
		if ts, ok := n["type"].([]any); ok {
			out = append(out, fmt.Sprintf("%s: type union %v", path, ts))
		}
		constrains := false
		for _, k := range []string{"type", "enum", "const", "anyOf", "oneOf", "allOf", "not", "$ref", "items", "properties", "additionalProperties", "required", "minimum", "maximum", "pattern", "format"} {
			if _, ok := n[k]; ok {
				constrains = true
			}
		}
		if !constrains && keyword != "not" {
			out = append(out, path+": untyped schema")
		}
		for _, k := range []string{"properties", "$defs"} {
			if m, ok := n[k].(map[string]any); ok {
				for name, sub := range m {
					out = append(out, lint(sub, path+"."+k+"."+name, k)...)
				}
			}
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if a, ok := n[k].([]any); ok {
				for i, sub := range a {
					out = append(out, lint(sub, fmt.Sprintf("%s.%s[%d]", path, k, i), k)...)
				}
			}
		}
		for _, k := range []string{"items", "additionalProperties", "not"} {
			if sub, ok := n[k]; ok {
				out = append(out, lint(sub, path+"."+k, k)...)
			}
		}
		return out
	}
	return []string{fmt.Sprintf("%s: schema of type %T", path, node)}
}

func TestListTables(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var out ListTablesOutput
	h.ok("list_tables", nil, &out)
	if out.At.Version != 4 || out.At.Point != "4" || out.At.Epoch != 3 {
		t.Errorf("at = %+v, want version 4, epoch 3", out.At)
	}
	got := map[string]int64{}
	for _, tb := range out.Tables {
		got[tb.Name] = tb.Rows
	}
	if want := map[string]int64{"public.orders": 4, "shop.orders": 1, "public.items": 1, "public.events": 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows = %v, want %v", got, want)
	}
	o := out.Tables[slices.IndexFunc(out.Tables, func(tb TableSummary) bool { return tb.Name == "public.orders" })]
	if o.View != `"public"."orders"` || o.ChangesView != `changes."public"."orders"` || !slices.Equal(o.PrimaryKey, []string{"id"}) || o.SchemaVersion != 2 ||
		o.Snapshot != "complete" || o.FreshAsOf != "2026-12-01T08:03:00Z" {
		t.Errorf("public.orders = %+v", o)
	}
	// As of version 2 (epoch 1): the first rows.
	h.ok("list_tables", map[string]any{"as_of": "epoch:1"}, &out)
	if out.At.Version != 2 || out.Tables[slices.IndexFunc(out.Tables, func(tb TableSummary) bool { return tb.Name == "public.orders" })].Rows != 3 {
		t.Errorf("as of epoch:1: %+v", out)
	}
	contains(t, h.fail("list_tables", map[string]any{"as_of": "epoch:9"}), "after the newest version", "the history holds version 1", "to version 4", "Ask for a point inside that window")
	contains(t, h.fail("list_tables", map[string]any{"as_of": "nosuchbranch"}), `point "nosuchbranch"`, "as_of takes a manifest version N")
	contains(t, h.fail("list_tables", map[string]any{"as_of": 7}), "validating", "as_of") // the schema refuses a number
}

func TestDescribeTable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var out DescribeTableOutput
	h.ok("describe_table", map[string]any{"table": "public.orders"}, &out)
	if out.Name != "public.orders" || out.Rows != 4 || out.SchemaVersion != 2 || len(out.SchemaVersions) != 2 || !slices.Equal(out.PrimaryKey, []string{"id"}) {
		t.Fatalf("describe = %+v", out)
	}
	var names []string
	for _, c := range out.Columns {
		names = append(names, fmt.Sprintf("%s:%s:%d", c.Name, c.PGType, c.FieldID))
	}
	if got := strings.Join(names, " "); got != "id:bigint:1 note:text:2 amount:numeric(12,2):3 uid:uuid:4 status:text:5" {
		t.Errorf("columns = %s", got)
	}
	if len(out.SchemaVersions[0].Columns) != 4 || out.SchemaVersions[1].FromEpoch != 3 || len(out.ChangeColumns) != 6 {
		t.Errorf("schema versions = %+v, change columns %+v", out.SchemaVersions, out.ChangeColumns)
	}
	// A bare name where one schema has it; as of version 2 (schema version 1).
	h.ok("describe_table", map[string]any{"table": "items", "as_of": "2"}, &out)
	if out.Name != "public.items" || out.Rows != 1 || out.At.Version != 2 {
		t.Errorf("items as of 2 = %+v", out)
	}
	h.ok("describe_table", map[string]any{"table": "events"}, &out)
	if len(out.PrimaryKey) != 0 || out.PrimaryKey == nil || out.Rows != 2 {
		t.Errorf("keyless events = %+v", out)
	}
	contains(t, h.fail("describe_table", map[string]any{"table": "orders"}), `"orders" is ambiguous`, "public.orders, shop.orders", "name it with its schema")
	contains(t, h.fail("describe_table", map[string]any{"table": "public.ordrs"}), `"public.ordrs" is not captured`, "did you mean public.orders", "list_tables")
	contains(t, h.fail("describe_table", map[string]any{"table": "itme"}), "did you mean public.items")
	contains(t, h.fail("describe_table", map[string]any{}), "missing properties", "table")
	contains(t, h.fail("describe_table", map[string]any{"table": "public.orders", "extra": 1}), "extra")
}

func TestSchemaHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var out SchemaHistoryOutput
	h.ok("get_schema_history", map[string]any{"table": "public.orders"}, &out)
	if out.Current != 2 || len(out.Versions) != 2 || len(out.Versions[0].Changes) != 0 || !slices.Equal(out.Versions[1].Changes, []string{"column status text added"}) {
		t.Errorf("history = %+v", out)
	}
	h.ok("get_schema_history", map[string]any{"table": "public.orders", "as_of": "3"}, &out)
	if out.Current != 1 || len(out.Versions) != 1 {
		t.Errorf("history as of 3 = %+v", out)
	}
	contains(t, h.fail("get_schema_history", map[string]any{"table": "nope"}), `"nope" is not captured`)
}

func TestSampleRows(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var out SampleOutput
	h.ok("sample_rows", map[string]any{"table": "public.orders", "n": 3}, &out)
	if out.Name != "public.orders" || len(out.Rows) != 3 || out.Truncated {
		t.Fatalf("sample = %+v", out)
	}
	cols := []string{}
	for _, c := range out.Columns {
		cols = append(cols, c.Name+" "+c.Type)
	}
	if got := strings.Join(cols, ", "); got != "id BIGINT, note VARCHAR, amount DECIMAL(12,2), uid UUID, status VARCHAR" {
		t.Errorf("columns = %s", got)
	}
	// Decimals and uuids are strings; the key order; status null before
	// the column existed for row 1, set for row 3.
	b, _ := json.Marshal(out.Rows)
	if want := `[[1,"a2","11.00","` + uid1 + `",null],[3,"c","30.25","` + uid3 + `","paid"],[4,"d","40.00","` + uid4 + `",null]]`; string(b) != want {
		t.Errorf("rows = %s\nwant   %s", b, want)
	}
	h.ok("sample_rows", map[string]any{"table": "public.orders", "as_of": "epoch:1"}, &out)
	if len(out.Rows) != 3 || len(out.Columns) != 4 {
		t.Errorf("as of epoch:1 (schema version 1) = %+v", out)
	}
	contains(t, h.fail("sample_rows", map[string]any{"table": "public.orders", "n": 1000}), "n = 1000", "1 to 100")
	contains(t, h.fail("sample_rows", map[string]any{"table": "public.orders", "n": -1}), "n = -1")
	contains(t, h.fail("sample_rows", map[string]any{"table": "x"}), `"x" is not captured`)
}

func TestQuery(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.MaxRows = 3 })
	var out QueryOutput
	h.ok("query", map[string]any{"sql": `SELECT count(*) AS n, sum(amount) AS total FROM "public"."orders"`}, &out)
	if b, _ := json.Marshal(out.Rows); string(b) != `[[4,"131.25"]]` || out.Truncated || out.NextCursor != "" {
		t.Errorf("count = %s %+v", b, out)
	}
	h.ok("query", map[string]any{"sql": `SELECT count(*) FILTER (WHERE __op = 'D') FROM changes.public.orders`, "as_of": "lsn:0/300"}, &out)
	if b, _ := json.Marshal(out.Rows); string(b) != `[[1]]` || out.At.Point != "lsn:0/300" {
		t.Errorf("deletes as of lsn:0/300 = %s %+v", b, out.At)
	}

	// Paging: 7 rows at 3 a page, pinned to the version of the first page
	// while a new version lands.
	sql := "SELECT id, note FROM changes.public.orders ORDER BY __lsn, __seq, id;"
	var ids []float64
	h.ok("query", map[string]any{"sql": sql}, &out)
	for page := 0; ; page++ {
		if page == 0 {
			h.sink.flush(4, map[string][]row{"public.orders": {order('I', 0x500, 6, "f", "60.00", uid5)}}, nil)
		}
		for _, r := range out.Rows {
			ids = append(ids, r[0].(float64))
		}
		if out.At.Version != 4 || out.Offset != int64(page*3) {
			t.Fatalf("page %d at %+v offset %d", page, out.At, out.Offset)
		}
		if !out.Truncated {
			break
		}
		if page == 5 {
			t.Fatalf("still truncated after %d pages: %v", page+1, ids)
		}
		if len(out.Rows) != 3 || out.NextCursor == "" {
			t.Fatalf("page %d: %d rows, cursor %q", page, len(out.Rows), out.NextCursor)
		}
		h.ok("query", map[string]any{"sql": sql, "cursor": out.NextCursor}, &out)
	}
	if fmt.Sprint(ids) != "[1 2 3 1 2 4 5 3]" {
		t.Errorf("change ids over the pages = %v", ids)
	}
	h.ok("query", map[string]any{"sql": sql, "max_rows": 2}, &out)
	if len(out.Rows) != 2 || !out.Truncated || out.At.Version != 5 {
		t.Errorf("max_rows 2 = %d rows, truncated %v, version %d", len(out.Rows), out.Truncated, out.At.Version)
	}
	contains(t, h.fail("query", map[string]any{"sql": "SELECT 1", "cursor": out.NextCursor}), "cursor belongs to another query")
	contains(t, h.fail("query", map[string]any{"sql": sql, "cursor": "garbage!"}), "cursor is not one this server gave")
	contains(t, h.fail("query", map[string]any{"sql": sql, "max_rows": 4}), "max_rows = 4", "1 to 3")

	// Refused and invalid SQL, each with how to fix it.
	for _, c := range []struct{ sql, rule string }{
		{"SELECT 1; SELECT 2", "only one statement"},
		{"COPY (SELECT 1) TO '/tmp/x.csv'", "only queries"},
		{"INSTALL httpfs", "only queries"},
		{"SELECT * FROM read_text('/etc/passwd')", "only the views and ordinary functions: the table function read_text"},
	} {
		contains(t, h.fail("query", map[string]any{"sql": c.sql}), "query refused: "+c.rule, "exactly one statement, a SELECT")
	}
	contains(t, h.fail("query", map[string]any{"sql": "SELECT nope FROM public.orders"}), "invalid query", "nope", "describe_table")
	// Breaking out of the paging wrapper is the SQL's own syntax error.
	contains(t, h.fail("query", map[string]any{"sql": "SELECT 1); SELECT (2"}), "invalid query: syntax error")
	contains(t, h.fail("query", map[string]any{"sql": "SELECT * FROM orders"}), "invalid query") // two schemas have it
	contains(t, h.fail("query", map[string]any{"sql": "  "}), "sql is required")
	contains(t, h.fail("query", map[string]any{"sql": "SELECT 1", "as_of": "lsn:0/1"}), "before the oldest version", "inside that window")
	// A trailing comment and semicolon survive the paging wrapper.
	h.ok("query", map[string]any{"sql": "SELECT 42 AS x; -- the answer"}, &out)
	if b, _ := json.Marshal(out.Rows); string(b) != `[[42]]` {
		t.Errorf("comment: %s", b)
	}
}

func TestGetChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var out ChangesOutput
	var got []string
	after := ""
	for range 10 {
		h.ok("get_changes", map[string]any{"table": "public.orders", "after": after, "limit": 3}, &out)
		for _, c := range out.Changes {
			got = append(got, fmt.Sprintf("%s%v", c.Op, c.Values[0]))
		}
		after = out.NextCursor
		if !out.More {
			break
		}
	}
	if strings.Join(got, " ") != "I1 I2 I3 U1 D2 I4 I5 U3" {
		t.Errorf("changes = %v", got)
	}
	if len(out.Columns) != 5 || out.Columns[4].Name != "status" || out.Version != 4 {
		t.Errorf("last page = %+v", out)
	}
	// Caught up: an empty page keeps the cursor.
	h.ok("get_changes", map[string]any{"table": "public.orders", "after": after}, &out)
	if out.NextCursor != after || len(out.Changes) != 0 || out.Changes == nil {
		t.Errorf("caught up: %+v", out)
	}
	// The bare name is ambiguous; shop.orders has its own feed.
	contains(t, h.fail("get_changes", map[string]any{"table": "orders"}), "ambiguous")
	h.ok("get_changes", map[string]any{"table": "shop.orders"}, &out)
	if len(out.Changes) != 1 || out.Changes[0].Values[1] != "x" {
		t.Errorf("shop.orders = %+v", out)
	}
	contains(t, h.fail("get_changes", map[string]any{"table": "public.orders", "after": "0/300"}), "bad cursor", "next_cursor")
	// Cursors are validated whole: a tool error naming the cursor and what
	// is wrong, never a wrap that replays the feed from its start.
	for _, c := range []struct{ after, want string }{
		{"80000000.0.9223372036854775807", "2^63 or more"},
		{"7FFFFFFF.FFFFFFFF.9223372036854775807", "last position"},
		{"0.0.9223372036854775808", "sequence: out of range"},
		{"FFFF.0.9223372036854775807", "past the newest committed position"},
		{"FFFF.0.1", "past the newest committed position"},
	} {
		contains(t, h.fail("get_changes", map[string]any{"table": "public.orders", "after": c.after}), "bad cursor", c.after, c.want)
	}
	contains(t, h.fail("get_changes", map[string]any{"table": "public.orders", "limit": 101}), "limit = 101")
	contains(t, h.fail("get_changes", map[string]any{"table": "public.ordres"}), "did you mean public.orders")

	// A cursor past retention names the oldest cursor served.
	gone := newHarness(t, func(o *Options) {
		o.Changes = goneFeed{}
	})
	contains(t, gone.fail("get_changes", map[string]any{"table": "public.orders", "after": "0.10.0"}), "cursor 0.10.0 is older", "oldest cursor served is 0.300.2", "after=0.300.2", "read the table's current state")
}

// goneFeed answers every page with a GoneError.
type goneFeed struct{}

func (goneFeed) Page(_ context.Context, table string, after changefeed.Cursor, _ int) (*changefeed.Page, error) {
	return nil, &changefeed.GoneError{Table: table, Cursor: after, Oldest: changefeed.Cursor{LSN: 0x300, Seq: 2}, OldestVersion: 3}
}

func TestGetManifest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var out ManifestOutput
	h.ok("get_manifest", nil, &out)
	if out.At.Version != 4 || out.Oldest.Version != 1 || out.Newest.Version != 4 || len(out.Tables) != 4 || len(out.History) != 4 || out.Source.Database != "shop" ||
		out.FreshAsOf != "2026-12-01T08:03:00Z" {
		t.Fatalf("manifest = %+v", out)
	}
	o := out.Tables[slices.IndexFunc(out.Tables, func(mt ManifestTable) bool { return mt.Name == "public.orders" })]
	if o.Deltas != 3 || o.DeltaFiles != 3 || o.DeltaRows != 8 || o.BaseFiles != 0 || o.Bytes <= 0 {
		t.Errorf("public.orders = %+v", o)
	}
	h.ok("get_manifest", map[string]any{"as_of": "2"}, &out)
	if out.At.Version != 2 || len(out.History) != 2 {
		t.Errorf("as of 2 = %+v", out)
	}
}

func TestGetFreshness(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var out FreshnessOutput
	h.ok("get_freshness", nil, &out)
	if out.FreshAsOf != "2026-12-01T08:03:00Z" || out.BehindSeconds != 10 || out.EndLSN != "0/400" || out.Now != "2026-12-01T08:03:10Z" {
		t.Errorf("freshness = %+v", out)
	}
	// Inside a version by LSN: the newest epoch the bound holds whole.
	h.ok("get_freshness", map[string]any{"as_of": "lsn:0/350"}, &out)
	if out.FreshAsOf != "2026-12-01T08:02:00Z" || out.EndLSN != "0/350" {
		t.Errorf("freshness as of lsn:0/350 = %+v", out)
	}
	// A manifest without fresh_as_of falls back to the newest flush's
	// commit time (manifest.Freshness).
	m := &manifest.Manifest{History: []manifest.EpochRecord{{MaxCommitTime: sinkStart}}}
	if got := freshAsOf(m); !got.Equal(sinkStart) {
		t.Errorf("fallback = %v", got)
	}
}

func TestGetSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var out SnapshotOutput
	h.ok("get_snapshot", map[string]any{"table": "public.orders"}, &out)
	if len(out.Tables) != 1 || len(out.Tables[0].Files) != 3 || out.Tables[0].Rows != 8 {
		t.Fatalf("snapshot = %+v", out)
	}
	for _, f := range out.Tables[0].Files {
		st, err := os.Stat(filepath.Join(h.sink.dir, f.Key))
		if err != nil || st.Size() != f.Bytes || f.Kind != "delta" {
			t.Errorf("file %+v: %v, %v", f, st, err)
		}
	}
	h.ok("get_snapshot", map[string]any{"as_of": "epoch:1"}, &out)
	if len(out.Tables) != 4 || len(out.Tables[0].Files) != 1 {
		t.Errorf("all as of epoch:1 = %+v", out)
	}
	contains(t, h.fail("get_snapshot", map[string]any{"table": "ghost"}), `"ghost" is not captured`)
}

func TestGetDiff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var out DiffOutput
	h.ok("get_diff", map[string]any{"from": "2"}, &out)
	if out.From.Version != 2 || out.To.Version != 4 || out.Verdict != "schema_change" || len(out.Tables) != 1 {
		t.Fatalf("diff 2..newest = %+v", out)
	}
	if d := out.Tables[0]; d.Table != "public.orders" || d.Inserted != 2 || d.Deleted != 1 || d.Changed != 1 || len(d.SchemaChanges) != 1 || len(d.Breaking) != 0 {
		t.Errorf("public.orders = %+v", d)
	}
	h.ok("get_diff", map[string]any{"from": "epoch:1", "to": "3", "table": "public.orders"}, &out)
	if out.Verdict != "safe" || len(out.Tables) != 1 || out.Tables[0].Changed != 1 || out.Tables[0].Inserted != 1 || out.Tables[0].Deleted != 1 {
		t.Errorf("diff 2..3 = %+v", out)
	}
	h.ok("get_diff", map[string]any{"from": "3", "to": "3"}, &out)
	if out.Verdict != "no_change" || len(out.Tables) != 0 {
		t.Errorf("diff 3..3 = %+v", out)
	}
	contains(t, h.fail("get_diff", map[string]any{"from": ""}), "from is required")
	contains(t, h.fail("get_diff", map[string]any{"from": "2", "table": "ordrs"}), "did you mean")
	contains(t, h.fail("get_diff", map[string]any{"from": "99"}), "after the newest version")
}

func TestResources(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	rl, err := h.cs.ListResources(ctx, nil)
	if err != nil || len(rl.Resources) != 2 {
		t.Fatalf("resources = %+v, %v", rl, err)
	}
	tl, err := h.cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tl.ResourceTemplates) != 1 || tl.ResourceTemplates[0].URITemplate != tableSchemaPattern {
		t.Fatalf("templates = %+v, %v", tl, err)
	}
	read := func(uri string, out any) {
		t.Helper()
		res, err := h.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		if err := json.Unmarshal([]byte(res.Contents[0].Text), out); err != nil {
			t.Fatal(err)
		}
	}
	var m ManifestOutput
	read(manifestURI, &m)
	if m.At.Version != 4 || len(m.Tables) != 4 {
		t.Errorf("manifest resource = %+v", m)
	}
	var tables struct {
		Tables []TableRef `json:"tables"`
	}
	read(tablesURI, &tables)
	if len(tables.Tables) != 4 || tables.Tables[2].SchemaURI != "pgcdc://tables/public.orders/schema" {
		t.Fatalf("tables resource = %+v", tables)
	}
	var ts TableSchema
	read(tables.Tables[2].SchemaURI, &ts)
	if ts.Name != "public.orders" || len(ts.Columns) != 5 || len(ts.SchemaVersions) != 2 {
		t.Errorf("schema resource = %+v", ts)
	}
	if _, err := h.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "pgcdc://tables/public.ordrs/schema"}); err == nil || !strings.Contains(err.Error(), "did you mean public.orders") {
		t.Errorf("unknown table's schema: %v", err)
	}
	if _, err := h.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "pgcdc://elsewhere"}); err == nil {
		t.Errorf("unknown resource read")
	}
}

// TestAudit: one record per tool call — also a call the schema refused
// and an unknown tool — with the tool, tables, rows, truncated, point and
// error.
func TestAudit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *Options) { o.MaxRows = 2 })
	var q QueryOutput
	h.ok("query", map[string]any{"sql": "SELECT * FROM public.orders", "as_of": "3"}, &q)
	var d DescribeTableOutput
	h.ok("describe_table", map[string]any{"table": "items"}, &d)
	h.fail("describe_table", map[string]any{"table": 5})
	h.fail("query", map[string]any{"sql": "DROP TABLE x"})
	if _, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "drop_everything"}); err == nil {
		t.Error("an unknown tool was called")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.audits) != 5 {
		t.Fatalf("%d audit records, want 5: %+v", len(h.audits), h.audits)
	}
	a := h.audits
	if a[0].Endpoint != "query" || a[0].Surface != access.SurfaceMCP || a[0].Rows != 2 || !a[0].Truncated || a[0].Point != "3" || a[0].Error != "" || a[0].Principal.String() != access.Anonymous || a[0].Duration <= 0 {
		t.Errorf("query record = %+v", a[0])
	}
	if a[1].Endpoint != "describe_table" || !slices.Equal(a[1].Tables, []string{"public.items"}) || a[1].Error != "" {
		t.Errorf("describe record = %+v", a[1])
	}
	if a[2].Endpoint != "describe_table" || !strings.Contains(a[2].Error, "validating") {
		t.Errorf("refused arguments record = %+v", a[2])
	}
	if a[3].Endpoint != "query" || !strings.Contains(a[3].Error, "query refused") {
		t.Errorf("refused SQL record = %+v", a[3])
	}
	if a[4].Endpoint != "drop_everything" || a[4].Error == "" {
		t.Errorf("unknown tool record = %+v", a[4])
	}
	h.mu.Unlock()
	if _, err := h.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: TableSchemaURI("public.orders")}); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	if len(h.audits) != 6 || h.audits[5].Endpoint != "resources/read pgcdc://tables/public.orders/schema" || !slices.Equal(h.audits[5].Tables, []string{"public.orders"}) {
		t.Errorf("resource read record = %+v", h.audits[5:])
	}
}

// TestCallErrors: every class of the read path's errors gets its own
// wording, and the cause stays in the chain.
func TestCallErrors(t *testing.T) {
	t.Parallel()
	cause := errors.New("boom")
	err := callError(cause)
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "not the call's fault") {
		t.Errorf("engine error: %v", err)
	}
	if callError(nil) != nil {
		t.Error("callError(nil) is not nil")
	}
	if err := callError(context.DeadlineExceeded); !strings.Contains(err.Error(), "cancelled or timed out") {
		t.Errorf("deadline: %v", err)
	}
}

// TestServeStdio: one session over pipes, only JSON-RPC on out, and
// ServeStdio returns when the client closes its end.
func TestServeStdio(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- h.srv.ServeStdio(context.Background(), inR, outW); outW.Close() }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 1<<20)
	send := func(msg string) {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("no line on out: %v", lines.Err())
		}
		l := lines.Text()
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if err := json.Unmarshal([]byte(l), &msg); err != nil || msg.JSONRPC != "2.0" {
			t.Errorf("not a JSON-RPC line on out: %q", l)
		}
		return l
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if l := next(); !strings.Contains(l, `"serverInfo":{"name":"pg-cdc"`) {
		t.Errorf("initialize: %s", l)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_tables","arguments":{}}}`)
	if l := next(); !strings.Contains(l, `"public.orders"`) || !strings.Contains(l, `"id":2`) {
		t.Errorf("list_tables: %s", l)
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ServeStdio did not return when its input closed")
	}
	if lines.Scan() {
		t.Errorf("more on out: %q", lines.Text())
	}
}

func TestHostAllowed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		host    string
		allowed []string
		want    bool
	}{
		{"localhost:8080", nil, true},
		{"127.0.0.1:8080", nil, true},
		{"[::1]:8080", nil, true},
		{"127.0.0.1", nil, true},
		{"evil.example", nil, false},
		{"localhost.evil.example:80", nil, false},
		{"", nil, false},
		{"cdc.internal:8080", []string{"cdc.internal"}, true},
		{"CDC.internal", []string{"cdc.internal"}, true},
		{"cdc.internal:9090", []string{"cdc.internal:8080"}, false},
		{"cdc.internal:8080", []string{"cdc.internal:8080"}, true},
		{"localhost:8080", []string{"cdc.internal"}, false},
	} {
		if got := hostAllowed(c.host, c.allowed); got != c.want {
			t.Errorf("hostAllowed(%q, %v) = %v", c.host, c.allowed, got)
		}
	}
}

// decode re-decodes a structured result into out.
func decode(t testing.TB, v any, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// TestEngineCaps: the engine's own byte cap cuts a result below max_rows:
// truncated, and the cursor goes on from the rows actually returned; the
// engine's timeout is a tool error that says to ask for less.
func TestEngineCaps(t *testing.T) {
	t.Parallel()
	h := &harness{t: t}
	h.sink = buildSink(t, t.TempDir())
	limits := query.DefaultLimits
	limits.MaxBytes = 40
	limits.Timeout = 200 * time.Millisecond
	r, err := query.NewReader(query.ReaderOptions{Sink: h.sink.store, TempDir: filepath.Join(t.TempDir(), "query"), Engines: 2, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	h.srv = New(Options{Reader: r})
	h.cs = connect(t, h.srv)
	h.tools = listTools(t, h.cs)
	var out QueryOutput
	sql := "SELECT id, note FROM changes.public.orders ORDER BY __lsn, __seq"
	h.ok("query", map[string]any{"sql": sql}, &out)
	var all []any
	for range 20 {
		if len(out.Rows) == 0 || len(out.Rows) >= 8 {
			t.Fatalf("a page of %d rows under a 40-byte cap", len(out.Rows))
		}
		for _, row := range out.Rows {
			all = append(all, row[0])
		}
		if !out.Truncated {
			break
		}
		h.ok("query", map[string]any{"sql": sql, "cursor": out.NextCursor}, &out)
	}
	if fmt.Sprint(all) != "[1 2 3 1 2 4 5 3]" {
		t.Errorf("rows over the pages = %v", all)
	}
	contains(t, h.fail("query", map[string]any{"sql": "SELECT count(*) FROM range(100000000000) a, range(1000) b"}), "timeout limit", "Ask for less")
}

// TestHostileInput: quoting tricks, traversal and huge values in every
// argument are tool errors, and the server goes on serving.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, c := range []struct {
		tool string
		args map[string]any
		says string
	}{
		{"describe_table", map[string]any{"table": `public"."orders`}, "is not captured"},
		{"describe_table", map[string]any{"table": `orders"; DROP TABLE x; --`}, "is not captured"},
		{"sample_rows", map[string]any{"table": "../../../etc/passwd"}, "is not captured"},
		{"get_snapshot", map[string]any{"table": strings.Repeat("a", 100000)}, "is not captured"},
		{"sample_rows", map[string]any{"table": "public.orders", "n": 1e18}, "n = "},
		{"sample_rows", map[string]any{"table": "public.orders", "n": 1e30}, ""},
		{"sample_rows", map[string]any{"table": "public.orders", "n": 1.5}, ""},
		{"query", map[string]any{"sql": "SELECT 1", "max_rows": -5}, "max_rows = -5"},
		{"query", map[string]any{"sql": "SELECT 1", "cursor": strings.Repeat("A", 10000)}, "cursor is not one this server gave"},
		{"query", map[string]any{"sql": "SELECT 1", "as_of": strings.Repeat("9", 400)}, ""},
		{"query", map[string]any{"sql": "SELECT 1", "as_of": "lsn:FFFFFFFF/FFFFFFFF"}, "after the newest"},
		{"query", map[string]any{"sql": "SELECT 1", "as_of": "'; DROP TABLE x; --"}, "as_of takes"},
		{"query", map[string]any{"sql": "ATTACH '/tmp/x.db' AS x"}, "query refused"},
		{"query", map[string]any{"sql": "SELECT * FROM '/etc/passwd'"}, "the file \"/etc/passwd\" read as a table"}, // no replacement scans
		{"query", map[string]any{"sql": "PRAGMA version"}, "query refused"},
		{"query", map[string]any{"sql": "SET enable_external_access = true"}, "query refused"},
		{"query", map[string]any{"sql": "SELECT 1 " + strings.Repeat("-- x\n", 10000)}, ""},
		{"get_changes", map[string]any{"table": "public.orders", "after": strings.Repeat("1", 1000)}, "bad cursor"},
		{"get_changes", map[string]any{"table": "public.orders", "after": "FFFFFFFF.FFFFFFFF.9223372036854775807"}, ""},
		{"get_changes", map[string]any{"table": "public.orders", "limit": -1}, "limit = -1"},
		{"get_diff", map[string]any{"from": "1", "to": "epoch:-1"}, ""},
		{"list_tables", map[string]any{"as_of": map[string]any{"x": 1}}, "validating"},
	} {
		res := h.call(c.tool, c.args)
		got := text(res)
		switch {
		case c.says == "" && res.IsError:
		case c.says == "":
			// A few of these may be answered (a long comment is still one
			// SELECT; a cursor past the end reads nothing): fine, as long
			// as the answer is valid.
			inspectortest.ValidateOutput(t, h.tools[c.tool], res.StructuredContent)
		case !res.IsError || !strings.Contains(got, c.says):
			t.Errorf("%s %.80v: %v %.300q; want an error saying %q", c.tool, c.args, res.IsError, got, c.says)
		}
	}
	var out ListTablesOutput
	h.ok("list_tables", nil, &out)
	if len(out.Tables) != 4 {
		t.Errorf("after the hostile calls: %+v", out)
	}
}

// TestCaseTwins: public."Orders" beside public.orders is one name to
// DuckDB; each is described, sampled and listed by its own rows, never
// the other's.
func TestCaseTwins(t *testing.T) {
	t.Parallel()
	t.Run("reader", func(t *testing.T) { t.Parallel(); caseTwins(t, nil) })
	// A reader without the ViewNamer capability: the aliases come from
	// its table list.
	t.Run("port only", func(t *testing.T) {
		t.Parallel()
		caseTwins(t, func(o *Options) { o.Reader = portOnly{o.Reader} })
	})
}

// portOnly is a Reader with only the port's methods.
type portOnly struct{ Reader }

func caseTwins(t *testing.T, edit func(*Options)) {
	h := newHarness(t, edit)
	if _, ok := h.srv.o.Reader.(ViewNamer); ok == (edit != nil) {
		t.Fatalf("ViewNamer %v", ok)
	}
	h.sink.addTable("public.Orders")
	h.sink.flush(4, map[string][]row{"public.Orders": {{'I', 0x500, map[string]string{"id": "9", "note": "upper"}}}}, nil)
	var lt ListTablesOutput
	h.ok("list_tables", nil, &lt)
	views := map[string]string{}
	for _, tb := range lt.Tables {
		views[tb.Name] = fmt.Sprintf("%s %d", tb.View, tb.Rows)
	}
	if !strings.HasSuffix(views["public.Orders"], " 1") || !strings.HasSuffix(views["public.orders"], " 4") || views["public.Orders"] == views["public.orders"] ||
		strings.HasPrefix(views["public.Orders"], `"public"."Orders" `) {
		t.Errorf("views = %v", views)
	}
	var d DescribeTableOutput
	h.ok("describe_table", map[string]any{"table": "public.Orders"}, &d)
	if d.Rows != 1 || d.View == `"public"."Orders"` {
		t.Errorf("public.Orders = %d rows, view %s", d.Rows, d.View)
	}
	var sr SampleOutput
	h.ok("sample_rows", map[string]any{"table": "public.Orders"}, &sr)
	if b, _ := json.Marshal(sr.Rows); string(b) != `[[9,"upper"]]` {
		t.Errorf("sample of public.Orders = %s", b)
	}
	h.ok("sample_rows", map[string]any{"table": "public.orders", "n": 1}, &sr)
	if b, _ := json.Marshal(sr.Rows); string(b) != `[[1,"a2","11.00","`+uid1+`",null]]` {
		t.Errorf("sample of public.orders = %s", b)
	}
	var q QueryOutput
	h.ok("query", map[string]any{"sql": "SELECT note FROM " + d.View}, &q)
	if b, _ := json.Marshal(q.Rows); string(b) != `[["upper"]]` {
		t.Errorf("query by the alias = %s", b)
	}
}

// TestLog: without Audit the audit records go to Log; the SDK's own info
// chatter (a line per session start and end) does not.
func TestLog(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	h := newHarness(t, func(o *Options) {
		o.Audit = nil
		o.Log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	var out ListTablesOutput
	h.ok("list_tables", nil, &out)
	got := buf.String()
	contains(t, got, "audit=true", "endpoint=list_tables", "rows=4", "principal=anonymous")
	if strings.Contains(got, "session") {
		t.Errorf("the SDK's session lines are logged:\n%s", got)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// TestQueryTypes: every kind of DuckDB value is a cell its schema
// accepts, in the read path's JSON form (decimals, uuids, huge integers
// exact).
func TestQueryTypes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var out QueryOutput
	h.ok("query", map[string]any{"sql": `SELECT 1.5::DOUBLE AS d, 'nan'::DOUBLE AS nan, INTERVAL 1 DAY AS iv, [1, 2] AS l, {'a': 1, 'b': [true]} AS st,
		MAP {'k': 1} AS m, '\x01'::BLOB AS b, 170141183460469231731687303715884105727::HUGEINT AS h, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID AS u,
		1.50::DECIMAL(5,2) AS dec, TIMESTAMPTZ '2026-01-01 00:00:00+00' AS ts, DATE '2026-01-01' AS day, NULL AS n, true AS t, [1.10::DECIMAL(4,2)] AS decs`}, &out)
	b, _ := json.Marshal(out.Rows)
	want := `[[1.5,"NaN",{"days":1,"micros":0,"months":0},[1,2],{"a":1,"b":[true]},[{"key":"k","value":1}],"\\x01","170141183460469231731687303715884105727","a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","1.50","2026-01-01T00:00:00Z","2026-01-01T00:00:00Z",null,true,`
	if !strings.HasPrefix(string(b), want) {
		t.Errorf("cells = %s\nwant prefix %s", b, want)
	}
	// Integers a float64 holds are numbers; beyond, strings (a JSON client
	// and the SDK's own output check read numbers as float64).
	h.ok("query", map[string]any{"sql": `SELECT 9007199254740991::BIGINT, -9007199254740991::BIGINT, 9007199254740993::BIGINT, (-9223372036854775808)::BIGINT,
		18446744073709551615::UBIGINT, [9007199254740993::BIGINT], {'x': 9007199254740993::BIGINT}`}, &out)
	if b, _ := json.Marshal(out.Rows); string(b) != `[[9007199254740991,-9007199254740991,"9007199254740993","-9223372036854775808","18446744073709551615",["9007199254740993"],{"x":"9007199254740993"}]]` {
		t.Errorf("big integers = %s", b)
	}
	res := h.call("query", map[string]any{"sql": "SELECT 170141183460469231731687303715884105727::HUGEINT AS h"})
	if got := text(res); !strings.Contains(got, `"170141183460469231731687303715884105727"`) {
		t.Errorf("a huge integer is not exact on the wire: %s", got)
	}
}

// TestQueryInfinity: a date's or timestamp's ±infinity is a cell of the
// strings "infinity" and "-infinity" (PostgreSQL's to_json), never the
// date the driver makes of it (294247-01-10T04:00:54.775807Z); a finite
// date next to it is still RFC 3339.
func TestQueryInfinity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var out QueryOutput
	h.ok("query", map[string]any{"sql": `SELECT 'infinity'::TIMESTAMP AS ts, '-infinity'::TIMESTAMP AS nts, 'infinity'::TIMESTAMPTZ AS tz,
		'-infinity'::TIMESTAMPTZ AS ntz, 'infinity'::DATE AS d, '-infinity'::DATE AS nd, ['-infinity'::DATE, DATE '2026-01-01'] AS ds,
		{'t': 'infinity'::TIMESTAMP} AS st, TIMESTAMP '294246-01-01 00:00:00' AS finite`}, &out)
	b, _ := json.Marshal(out.Rows)
	want := `[["infinity","-infinity","infinity","-infinity","infinity","-infinity",["-infinity","2026-01-01T00:00:00Z"],{"t":"infinity"},"294246-01-01T00:00:00Z"]]`
	if string(b) != want {
		t.Errorf("cells = %s\nwant %s", b, want)
	}
}
