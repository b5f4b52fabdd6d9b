//go:build !nodb

package mcpserver

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/mcpserver/inspectortest"
)

// The official MCP inspector's CLI (npm @modelcontextprotocol/inspector,
// run by inspectortest), a real client from outside this code base, lists
// the tools and calls every one over stdio (this test binary as the
// server, on a prepared sink, as pg-cdc mcp runs) and over streamable HTTP
// (Handler behind a bearer token), checks the results against the
// fixture's rows, and runs its --strict schema lint. internal/e2e does the
// same against pg-cdc itself on a sink fed from PostgreSQL.

// checkAll lists and calls every tool through the inspector, and checks
// the answers against the fixture (buildSink).
func checkAll(t *testing.T, in *inspectortest.Inspector) {
	tools := in.ListTools()
	var names []string
	for _, tool := range tools {
		names = append(names, tool["name"].(string))
		ann, _ := tool["annotations"].(map[string]any)
		if ann["readOnlyHint"] != true || tool["outputSchema"] == nil || tool["inputSchema"] == nil {
			t.Errorf("tool %v: annotations %v, schemas present: %v %v", tool["name"], ann, tool["inputSchema"] != nil, tool["outputSchema"] != nil)
		}
	}
	slices.Sort(names)
	if want := slices.Sorted(slices.Values(allTools)); !slices.Equal(names, want) {
		t.Fatalf("inspector lists %v, want %v", names, want)
	}

	var lt ListTablesOutput
	in.Call("list_tables", nil, &lt)
	rows := map[string]int64{}
	for _, tb := range lt.Tables {
		rows[tb.Name] = tb.Rows
	}
	if fmt.Sprint(rows) != "map[public.events:2 public.items:1 public.orders:4 shop.orders:1]" || lt.At.Version != 4 {
		t.Errorf("list_tables: %v at %+v", rows, lt.At)
	}

	var dt DescribeTableOutput
	in.Call("describe_table", map[string]any{"table": "public.orders"}, &dt)
	if dt.Rows != 4 || len(dt.Columns) != 5 || dt.Columns[4].FieldID != 5 || len(dt.SchemaVersions) != 2 {
		t.Errorf("describe_table = %+v", dt)
	}

	var sh SchemaHistoryOutput
	in.Call("get_schema_history", map[string]any{"table": "public.orders"}, &sh)
	if len(sh.Versions) != 2 || !slices.Equal(sh.Versions[1].Changes, []string{"column status text added"}) {
		t.Errorf("get_schema_history = %+v", sh)
	}

	var sr SampleOutput
	in.Call("sample_rows", map[string]any{"table": "public.orders", "n": 2}, &sr)
	if b, _ := json.Marshal(sr.Rows); string(b) != `[[1,"a2","11.00","`+uid1+`",null],[3,"c","30.25","`+uid3+`","paid"]]` {
		t.Errorf("sample_rows = %s", b)
	}

	var q QueryOutput
	in.Call("query", map[string]any{"sql": `SELECT id, amount FROM "public"."orders" ORDER BY id`, "max_rows": 3, "as_of": "4"}, &q)
	if b, _ := json.Marshal(q.Rows); string(b) != `[[1,"11.00"],[3,"30.25"],[4,"40.00"]]` || !q.Truncated || q.NextCursor == "" {
		t.Errorf("query page 1 = %s %+v", b, q)
	}
	in.Call("query", map[string]any{"sql": `SELECT id, amount FROM "public"."orders" ORDER BY id`, "cursor": q.NextCursor}, &q)
	if b, _ := json.Marshal(q.Rows); string(b) != `[[5,"50.00"]]` || q.Truncated || q.Offset != 3 {
		t.Errorf("query page 2 = %s %+v", b, q)
	}

	var ch ChangesOutput
	in.Call("get_changes", map[string]any{"table": "public.orders", "limit": 5}, &ch)
	if len(ch.Changes) != 5 || !ch.More || ch.Changes[4].Op != "D" {
		t.Errorf("get_changes page 1 = %+v", ch)
	}
	in.Call("get_changes", map[string]any{"table": "public.orders", "after": ch.NextCursor}, &ch)
	if len(ch.Changes) != 3 || ch.More || ch.Changes[2].Op != "U" || ch.Changes[2].Values[4] != "paid" {
		t.Errorf("get_changes page 2 = %+v", ch)
	}

	var mo ManifestOutput
	in.Call("get_manifest", nil, &mo)
	if mo.At.Version != 4 || len(mo.Tables) != 4 || mo.Oldest.Version != 1 {
		t.Errorf("get_manifest = %+v", mo)
	}

	var fr FreshnessOutput
	in.Call("get_freshness", nil, &fr)
	if fr.FreshAsOf != "2026-12-01T08:03:00Z" || fr.BehindSeconds != 10 {
		t.Errorf("get_freshness = %+v", fr)
	}

	var sn SnapshotOutput
	in.Call("get_snapshot", map[string]any{"table": "public.orders"}, &sn)
	if len(sn.Tables) != 1 || len(sn.Tables[0].Files) != 3 || sn.Tables[0].Rows != 8 {
		t.Errorf("get_snapshot = %+v", sn)
	}

	var df DiffOutput
	in.Call("get_diff", map[string]any{"from": "2", "to": "4"}, &df)
	if df.Verdict != "schema_change" || len(df.Tables) != 1 || df.Tables[0].Inserted != 2 || df.Tables[0].Deleted != 1 || df.Tables[0].Changed != 1 {
		t.Errorf("get_diff = %+v", df)
	}

	// Tool errors reach the client as isError results that say how to fix
	// the call.
	contains(t, in.WantError("describe_table", map[string]any{"table": "public.ordrs"}), "did you mean public.orders")
	contains(t, in.WantError("query", map[string]any{"sql": "SELECT * FROM read_text('/etc/passwd')"}), "query refused: only the views and ordinary functions: the table function read_text")
	contains(t, in.WantError("query", map[string]any{"sql": "SELECT 1; INSTALL httpfs"}), "query refused: only one statement")
	contains(t, in.WantError("list_tables", map[string]any{"as_of": "epoch:99"}), "the history holds version 1")
}

// TestInspectorStdio: the inspector spawns this test binary as the server
// over stdio.
func TestInspectorStdio(t *testing.T) {
	t.Parallel()
	bin := inspectortest.Ensure(t)
	dir := t.TempDir()
	buildSink(t, dir)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in := inspectortest.New(t, bin, []string{exe}, "-e", stdioSinkEnv+"="+dir)
	checkAll(t, in)
	// Resources over stdio too.
	stdout, stderr, code := in.Run("--method", "resources/read", "--uri", "pgcdc://tables/public.orders/schema", "--format", "json")
	if code != 0 || !strings.Contains(stdout, `\"field_id\": 5`) {
		t.Errorf("resources/read: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestInspectorHTTP: the inspector over streamable HTTP with a bearer
// token; without it the server answers 401.
func TestInspectorHTTP(t *testing.T) {
	t.Parallel()
	bin := inspectortest.Ensure(t)
	hs := newHTTPServer(t, HTTPOptions{})
	in := inspectortest.New(t, bin, []string{hs.URL + "/mcp"}, "--transport", "http", "--header", "Authorization: Bearer "+testToken)
	checkAll(t, in)
	hs.mu.Lock()
	n, alice := len(hs.audits), 0
	for _, a := range hs.audits {
		if a.Principal.Name == "alice" {
			alice++
		}
	}
	hs.mu.Unlock()
	if n < 15 || alice != n {
		t.Errorf("%d audit records, %d of them alice's", n, alice)
	}
	noToken := inspectortest.New(t, bin, []string{hs.URL + "/mcp"}, "--transport", "http")
	if stdout, stderr, code := noToken.Run("--method", "tools/list"); code == 0 {
		t.Errorf("tools/list without a token: exit 0\n%s\n%s", stdout, stderr)
	}
}
