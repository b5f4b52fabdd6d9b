// Package inspectortest runs the official MCP inspector's CLI (npm
// @modelcontextprotocol/inspector), a real client from outside this code
// base, against an MCP server, for tests: it installs the CLI once per
// test binary (scripts/ensure-mcp-inspector.sh), runs it with a private
// HOME and a timeout, lists the tools with its --strict schema lint, and
// calls a tool, checking the structured result against the tool's output
// schema. The MCP server's own tests (internal/mcpserver, on a fixture
// sink) and the end-to-end tests (internal/e2e, pg-cdc mcp and pg-cdc
// serve on a sink a daemon fed from PostgreSQL) share it.
//
// It imports no engine (DuckDB) and no part of the read path: what a test
// compares the results with is the test's business.
package inspectortest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/pg-cdc/pg-cdc/internal/npmtest"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Timeout bounds one run of the CLI (node's start, the server's, the call).
const Timeout = 2 * time.Minute

// Ensure installs the inspector (scripts/ensure-mcp-inspector.sh) and
// returns its command; without node or npm the test fails under CI=true
// and is skipped elsewhere (npmtest).
func Ensure(t testing.TB) string {
	t.Helper()
	return npmtest.Ensure(t, "ensure-mcp-inspector.sh", "the MCP inspector")
}

// Inspector runs the inspector CLI against one server. It is used by one
// goroutine at a time (it fails the test through T).
type Inspector struct {
	T    testing.TB
	Bin  string // the mcp-inspector command (Ensure)
	Home string // HOME and XDG_CONFIG_HOME's parent: the CLI's private state
	// Target follows --: the server's command line (stdio), or its URL.
	Target []string
	// Pre are options before the method: -e NAME=VALUE, --header,
	// --transport http.
	Pre []string
	// tools are the tools ListTools gave, by name: each call's
	// structured result is validated against its output schema.
	tools map[string]*mcp.Tool
}

// New is an Inspector with a private HOME in a temporary directory.
func New(t testing.TB, bin string, target []string, pre ...string) *Inspector {
	return &Inspector{T: t, Bin: bin, Home: t.TempDir(), Target: target, Pre: pre}
}

// Run runs the CLI with args (the method and its options) and returns its
// stdout, stderr and exit code; a CLI that does not start, or outlasts
// Timeout, fails the test.
func (in *Inspector) Run(args ...string) (stdout, stderr string, code int) {
	in.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	full := append(append(append([]string{"--cli"}, in.Pre...), args...), "--")
	full = append(full, in.Target...)
	cmd := exec.CommandContext(ctx, in.Bin, full...)
	cmd.Env = append(os.Environ(), "HOME="+in.Home, "XDG_CONFIG_HOME="+filepath.Join(in.Home, ".config"), "NO_COLOR=1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		in.T.Fatalf("inspector %v: no answer within %s\n%s\n%s", full, Timeout, o.String(), e.String())
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		in.T.Fatalf("inspector %v: %v\n%s", full, err, e.String())
	}
	return o.String(), e.String(), code
}

// envelope is the CLI's --format json output.
type envelope struct {
	Result         json.RawMessage `json:"result"`
	SchemaFindings []any           `json:"schemaFindings"`
}

// CallResult is a tools/call result as the CLI prints it.
type CallResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// ListTools runs tools/list with --strict: a failure, or any schema
// finding of the lint, fails the test. It returns the tools as the CLI
// printed them and keeps their output schemas for Call.
func (in *Inspector) ListTools() []map[string]any {
	in.T.Helper()
	stdout, stderr, code := in.Run("--method", "tools/list", "--strict", "--format", "json")
	if code != 0 {
		in.T.Fatalf("tools/list --strict: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var env envelope
	if err := json.Unmarshal([]byte(stdout), &env); err != nil {
		in.T.Fatalf("tools/list: %v\n%s", err, stdout)
	}
	if len(env.SchemaFindings) != 0 || strings.Contains(stderr, "portability") {
		in.T.Errorf("--strict found schema problems: %v\n%s", env.SchemaFindings, stderr)
	}
	var res struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(env.Result, &res); err != nil {
		in.T.Fatalf("tools/list result %s: %v", env.Result, err)
	}
	in.tools = map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		name, _ := tool["name"].(string)
		in.tools[name] = &mcp.Tool{Name: name, OutputSchema: tool["outputSchema"]}
	}
	return res.Tools
}

// Call calls a tool with args (each value sent as JSON, so strings stay
// strings), validates its structured result against the output schema
// ListTools gave (called first), and decodes it into out (a
// *json.RawMessage keeps it as sent). A failure or a tool error fails the
// test.
func (in *Inspector) Call(tool string, args map[string]any, out any) {
	in.T.Helper()
	res, code, stderr := in.CallRaw(tool, args)
	if code != 0 || res.IsError {
		in.T.Fatalf("%s %v: exit %d, isError %v: %+v\n%s", tool, args, code, res.IsError, res.Content, stderr)
	}
	var sc any
	if err := json.Unmarshal(res.StructuredContent, &sc); err != nil {
		in.T.Fatalf("%s: structured content %s: %v", tool, res.StructuredContent, err)
	}
	// The output as the inspector received it, against the output schema
	// it was given.
	ValidateOutput(in.T, in.tools[tool], sc)
	if err := json.Unmarshal(res.StructuredContent, out); err != nil {
		in.T.Fatalf("%s: structured content %s: %v", tool, res.StructuredContent, err)
	}
}

// WantError calls a tool that must answer with a tool error, and returns
// the error's text.
func (in *Inspector) WantError(tool string, args map[string]any) string {
	in.T.Helper()
	res, code, stderr := in.CallRaw(tool, args)
	if code == 0 || !res.IsError || len(res.Content) == 0 {
		in.T.Fatalf("%s %v: want a tool error; exit %d, %+v\n%s", tool, args, code, res, stderr)
	}
	return res.Content[0].Text
}

// CallRaw calls a tool and returns the result, the exit code and stderr;
// output that is not the CLI's JSON fails the test.
func (in *Inspector) CallRaw(tool string, args map[string]any) (CallResult, int, string) {
	in.T.Helper()
	cli := []string{"--method", "tools/call", "--tool-name", tool, "--format", "json"}
	for _, k := range slices.Sorted(maps.Keys(args)) {
		v, err := json.Marshal(args[k])
		if err != nil {
			in.T.Fatalf("%s: argument %s: %v", tool, k, err)
		}
		cli = append(cli, "--tool-arg", k+"="+string(v))
	}
	stdout, stderr, code := in.Run(cli...)
	var env envelope
	var res CallResult
	if err := json.Unmarshal([]byte(stdout), &env); err != nil || json.Unmarshal(env.Result, &res) != nil {
		in.T.Fatalf("%s: exit %d, output not JSON: %v\n%s\n%s", tool, code, err, stdout, stderr)
	}
	return res, code, stderr
}

// ValidateOutput checks a structured result against the tool's declared
// output schema, as a strict client would: independent of the SDK's own
// check on the server side.
func ValidateOutput(t testing.TB, tool *mcp.Tool, v any) {
	t.Helper()
	if tool == nil || tool.OutputSchema == nil {
		t.Fatalf("tool %v has no output schema (list the tools first)", tool)
	}
	b, err := json.Marshal(tool.OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s: output schema: %v", tool.Name, err)
	}
	var inst any
	vb, _ := json.Marshal(v)
	if err := json.Unmarshal(vb, &inst); err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(inst); err != nil {
		t.Fatalf("%s: output %s does not validate against its schema: %v", tool.Name, vb, err)
	}
}
