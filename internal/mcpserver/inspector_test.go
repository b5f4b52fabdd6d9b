//go:build !nodb

package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The official MCP inspector's CLI (npm @modelcontextprotocol/inspector),
// a real client from outside this code base, lists the tools and calls
// every one over stdio (this test binary as the server, on a prepared
// sink, as pg-cdc mcp runs) and over streamable HTTP (Handler behind a
// bearer token), checks the results against the fixture's rows, and runs
// its --strict schema lint.

// ensureInspector installs the inspector with scripts/ensure-mcp-inspector.sh
// and returns its command. Without node or npm the test fails under CI=true
// and is skipped elsewhere.
func ensureInspector(t *testing.T) string {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("the inspector tests run node: not in -short")
	}
	bin, msg := installInspector()
	if msg != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// installInspector runs the setup script once per test binary.
var installInspector = sync.OnceValues(func() (bin, failure string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "scripts", "ensure-mcp-inspector.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Sprintf("ensure-mcp-inspector.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), ""
})

// inspector runs the inspector CLI with a private HOME and returns its
// stdout, stderr and exit code.
type inspector struct {
	t      *testing.T
	bin    string
	home   string
	target []string // after --: the server command, or its URL
	pre    []string // options before the method: -e, --header, --transport
	// tools are the tools tools/list gave, by name: each call's
	// structured result is validated against its output schema.
	tools map[string]*mcp.Tool
}

func (in *inspector) run(args ...string) (stdout, stderr string, code int) {
	in.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append(append(append([]string{"--cli"}, in.pre...), args...), "--")
	full = append(full, in.target...)
	cmd := exec.CommandContext(ctx, in.bin, full...)
	cmd.Env = append(os.Environ(), "HOME="+in.home, "XDG_CONFIG_HOME="+filepath.Join(in.home, ".config"), "NO_COLOR=1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		in.t.Fatalf("inspector %v: %v\n%s", full, err, e.String())
	}
	return o.String(), e.String(), code
}

// envelope is the inspector's --format json output.
type envelope struct {
	Result         json.RawMessage `json:"result"`
	SchemaFindings []any           `json:"schemaFindings"`
}

// callResult is a tools/call result as the inspector prints it.
type callResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

func (in *inspector) listTools() []map[string]any {
	in.t.Helper()
	stdout, stderr, code := in.run("--method", "tools/list", "--strict", "--format", "json")
	if code != 0 {
		in.t.Fatalf("tools/list --strict: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var env envelope
	if err := json.Unmarshal([]byte(stdout), &env); err != nil {
		in.t.Fatalf("tools/list: %v\n%s", err, stdout)
	}
	if len(env.SchemaFindings) != 0 || strings.Contains(stderr, "portability") {
		in.t.Errorf("--strict found schema problems: %v\n%s", env.SchemaFindings, stderr)
	}
	var res struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(env.Result, &res); err != nil {
		in.t.Fatal(err)
	}
	in.tools = map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		name, _ := tool["name"].(string)
		in.tools[name] = &mcp.Tool{Name: name, OutputSchema: tool["outputSchema"]}
	}
	return res.Tools
}

// call calls a tool with args (each value sent as JSON, so strings stay
// strings) and decodes its structured result into out; wantError expects
// a tool error instead and returns its text.
func (in *inspector) call(tool string, args map[string]any, out any) {
	in.t.Helper()
	res, code, stderr := in.callRaw(tool, args)
	if code != 0 || res.IsError {
		in.t.Fatalf("%s %v: exit %d, isError %v: %+v\n%s", tool, args, code, res.IsError, res.Content, stderr)
	}
	var sc any
	if err := json.Unmarshal(res.StructuredContent, &sc); err != nil {
		in.t.Fatalf("%s: structured content %s: %v", tool, res.StructuredContent, err)
	}
	// The output as the inspector received it, against the output schema
	// it was given.
	validateOutput(in.t, in.tools[tool], sc)
	if err := json.Unmarshal(res.StructuredContent, out); err != nil {
		in.t.Fatalf("%s: structured content %s: %v", tool, res.StructuredContent, err)
	}
}

func (in *inspector) wantError(tool string, args map[string]any) string {
	in.t.Helper()
	res, code, stderr := in.callRaw(tool, args)
	if code == 0 || !res.IsError || len(res.Content) == 0 {
		in.t.Fatalf("%s %v: want a tool error; exit %d, %+v\n%s", tool, args, code, res, stderr)
	}
	return res.Content[0].Text
}

func (in *inspector) callRaw(tool string, args map[string]any) (callResult, int, string) {
	in.t.Helper()
	cli := []string{"--method", "tools/call", "--tool-name", tool, "--format", "json"}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range args {
			if !yield(k) {
				return
			}
		}
	}) {
		v, _ := json.Marshal(args[k])
		cli = append(cli, "--tool-arg", k+"="+string(v))
	}
	stdout, stderr, code := in.run(cli...)
	var env envelope
	var res callResult
	if err := json.Unmarshal([]byte(stdout), &env); err != nil || json.Unmarshal(env.Result, &res) != nil {
		in.t.Fatalf("%s: exit %d, output not JSON: %v\n%s\n%s", tool, code, err, stdout, stderr)
	}
	return res, code, stderr
}

// checkAll lists and calls every tool through the inspector, and checks
// the answers against the fixture (buildSink).
func checkAll(t *testing.T, in *inspector) {
	tools := in.listTools()
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
	in.call("list_tables", nil, &lt)
	rows := map[string]int64{}
	for _, tb := range lt.Tables {
		rows[tb.Name] = tb.Rows
	}
	if fmt.Sprint(rows) != "map[public.events:2 public.items:1 public.orders:4 shop.orders:1]" || lt.At.Version != 4 {
		t.Errorf("list_tables: %v at %+v", rows, lt.At)
	}

	var dt DescribeTableOutput
	in.call("describe_table", map[string]any{"table": "public.orders"}, &dt)
	if dt.Rows != 4 || len(dt.Columns) != 5 || dt.Columns[4].FieldID != 5 || len(dt.SchemaVersions) != 2 {
		t.Errorf("describe_table = %+v", dt)
	}

	var sh SchemaHistoryOutput
	in.call("get_schema_history", map[string]any{"table": "public.orders"}, &sh)
	if len(sh.Versions) != 2 || !slices.Equal(sh.Versions[1].Changes, []string{"column status text added"}) {
		t.Errorf("get_schema_history = %+v", sh)
	}

	var sr SampleOutput
	in.call("sample_rows", map[string]any{"table": "public.orders", "n": 2}, &sr)
	if b, _ := json.Marshal(sr.Rows); string(b) != `[[1,"a2","11.00","`+uid1+`",null],[3,"c","30.25","`+uid3+`","paid"]]` {
		t.Errorf("sample_rows = %s", b)
	}

	var q QueryOutput
	in.call("query", map[string]any{"sql": `SELECT id, amount FROM "public"."orders" ORDER BY id`, "max_rows": 3, "as_of": "4"}, &q)
	if b, _ := json.Marshal(q.Rows); string(b) != `[[1,"11.00"],[3,"30.25"],[4,"40.00"]]` || !q.Truncated || q.NextCursor == "" {
		t.Errorf("query page 1 = %s %+v", b, q)
	}
	in.call("query", map[string]any{"sql": `SELECT id, amount FROM "public"."orders" ORDER BY id`, "cursor": q.NextCursor}, &q)
	if b, _ := json.Marshal(q.Rows); string(b) != `[[5,"50.00"]]` || q.Truncated || q.Offset != 3 {
		t.Errorf("query page 2 = %s %+v", b, q)
	}

	var ch ChangesOutput
	in.call("get_changes", map[string]any{"table": "public.orders", "limit": 5}, &ch)
	if len(ch.Changes) != 5 || !ch.More || ch.Changes[4].Op != "D" {
		t.Errorf("get_changes page 1 = %+v", ch)
	}
	in.call("get_changes", map[string]any{"table": "public.orders", "after": ch.NextCursor}, &ch)
	if len(ch.Changes) != 3 || ch.More || ch.Changes[2].Op != "U" || ch.Changes[2].Values[4] != "paid" {
		t.Errorf("get_changes page 2 = %+v", ch)
	}

	var mo ManifestOutput
	in.call("get_manifest", nil, &mo)
	if mo.At.Version != 4 || len(mo.Tables) != 4 || mo.Oldest.Version != 1 {
		t.Errorf("get_manifest = %+v", mo)
	}

	var fr FreshnessOutput
	in.call("get_freshness", nil, &fr)
	if fr.FreshAsOf != "2026-12-01T08:03:00Z" || fr.BehindSeconds != 10 {
		t.Errorf("get_freshness = %+v", fr)
	}

	var sn SnapshotOutput
	in.call("get_snapshot", map[string]any{"table": "public.orders"}, &sn)
	if len(sn.Tables) != 1 || len(sn.Tables[0].Files) != 3 || sn.Tables[0].Rows != 8 {
		t.Errorf("get_snapshot = %+v", sn)
	}

	var df DiffOutput
	in.call("get_diff", map[string]any{"from": "2", "to": "4"}, &df)
	if df.Verdict != "schema_change" || len(df.Tables) != 1 || df.Tables[0].Inserted != 2 || df.Tables[0].Deleted != 1 || df.Tables[0].Changed != 1 {
		t.Errorf("get_diff = %+v", df)
	}

	// Tool errors reach the client as isError results that say how to fix
	// the call.
	contains(t, in.wantError("describe_table", map[string]any{"table": "public.ordrs"}), "did you mean public.orders")
	contains(t, in.wantError("query", map[string]any{"sql": "SELECT * FROM read_text('/etc/passwd')"}), "query refused: only the data directories")
	contains(t, in.wantError("query", map[string]any{"sql": "SELECT 1; INSTALL httpfs"}), "query refused: only one statement")
	contains(t, in.wantError("list_tables", map[string]any{"as_of": "epoch:99"}), "the history holds version 1")
}

// TestInspectorStdio: the inspector spawns this test binary as the server
// over stdio.
func TestInspectorStdio(t *testing.T) {
	t.Parallel()
	bin := ensureInspector(t)
	dir := t.TempDir()
	buildSink(t, dir)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in := &inspector{t: t, bin: bin, home: t.TempDir(), target: []string{exe}, pre: []string{"-e", stdioSinkEnv + "=" + dir}}
	checkAll(t, in)
	// Resources over stdio too.
	stdout, stderr, code := in.run("--method", "resources/read", "--uri", "pgcdc://tables/public.orders/schema", "--format", "json")
	if code != 0 || !strings.Contains(stdout, `\"field_id\": 5`) {
		t.Errorf("resources/read: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestInspectorHTTP: the inspector over streamable HTTP with a bearer
// token; without it the server answers 401.
func TestInspectorHTTP(t *testing.T) {
	t.Parallel()
	bin := ensureInspector(t)
	hs := newHTTPServer(t, HTTPOptions{})
	in := &inspector{t: t, bin: bin, home: t.TempDir(), target: []string{hs.URL + "/mcp"},
		pre: []string{"--transport", "http", "--header", "Authorization: Bearer " + testToken}}
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
	noToken := &inspector{t: t, bin: bin, home: t.TempDir(), target: []string{hs.URL + "/mcp"}, pre: []string{"--transport", "http"}}
	if stdout, stderr, code := noToken.run("--method", "tools/list"); code == 0 {
		t.Errorf("tools/list without a token: exit 0\n%s\n%s", stdout, stderr)
	}
}
