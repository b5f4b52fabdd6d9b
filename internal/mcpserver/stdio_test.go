package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// rpcLine is a JSON-RPC response line as the stdio server writes it; ID is
// kept raw to tell null from absent.
type rpcLine struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestServeStdioMalformed: lines that are not JSON-RPC messages are
// answered with JSON-RPC errors (-32700 not JSON, -32600 not a message),
// id null unless the line had a well-formed one, and the session goes on:
// requests after them are answered, and ServeStdio returns nil at the
// input's end (the process would exit 0, not 1).
func TestServeStdioMalformed(t *testing.T) {
	t.Parallel()
	// No reader: initialize, tools/list and ping need none.
	srv := New(Options{Version: "test"})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(context.Background(), inR, outW); outW.Close() }()
	lines := bufio.NewScanner(outR)
	lines.Buffer(nil, 4<<20)
	send := func(msg string) {
		t.Helper()
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() rpcLine {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("no line on out: %v", lines.Err())
		}
		var l rpcLine
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil || l.JSONRPC != "2.0" {
			t.Fatalf("not a JSON-RPC line on out: %q", lines.Text())
		}
		return l
	}
	refused := func(line string, code int64, id string) {
		t.Helper()
		send(line)
		l := next()
		if l.Error == nil || l.Error.Code != code || string(l.ID) != id || l.Result != nil {
			t.Errorf("%.40q: %+v (error %+v); want error %d with id %s", line, l, l.Error, code, id)
		}
	}
	refused("garbage", -32700, "null")
	refused("{}", -32600, "null")
	refused("[1]", -32600, "null")
	send("   ") // blank: skipped unanswered, so the next answer is the next line's
	refused(`{"jsonrpc":"2.0","id":1,"method":"ping"} {"jsonrpc":"2.0","id":2,"method":"ping"}`, -32700, "null")
	refused(`{"jsonrpc":"2.0","id":1,"method":"ping"`, -32700, "null")
	refused(`"initialize"`, -32600, "null")
	refused(`{"jsonrpc":"1.0","id":7,"method":"ping"}`, -32600, "7") // its id is well formed: the client waits on it
	refused(`{"jsonrpc":"2.0","id":"a","method":3}`, -32600, `"a"`)
	refused(`{"jsonrpc":"2.0","id":{},"method":"ping"}`, -32600, "null")
	refused(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, -32600, "null") // batches: not supported
	refused(strings.Repeat(" ", maxLine+1)+"{}", -32600, "null")          // too long, answered and skipped

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if l := next(); l.Error != nil || string(l.ID) != "1" || !strings.Contains(string(l.Result), `"serverInfo":{"name":"pg-cdc"`) {
		t.Errorf("initialize: %+v", l)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	refused("\x00\xff not json", -32700, "null")
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + " \r") // trailing blanks: trimmed, not the end of the session
	if l := next(); l.Error != nil || string(l.ID) != "2" || !strings.Contains(string(l.Result), `"name":"list_tables"`) {
		t.Errorf("tools/list: %+v", l)
	}
	// A response to a request the server never sent is a message: the SDK
	// ignores it, and the session goes on.
	send(`{"jsonrpc":"2.0","id":99,"result":{}}`)
	send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if l := next(); l.Error != nil || string(l.ID) != "3" {
		t.Errorf("ping: %+v", l)
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

// TestLineFilterLastLine: a last line without a newline is checked and
// passed like any other.
func TestLineFilterLastLine(t *testing.T) {
	var out strings.Builder
	f := newLineFilter(strings.NewReader("x\n"+`{"jsonrpc":"2.0","id":1,"method":"ping"}`), &lockedWriter{w: &out}, New(Options{}).o.Log)
	got, err := io.ReadAll(f)
	if err != nil || string(got) != `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n" {
		t.Errorf("passed %q, %v", got, err)
	}
	if !strings.Contains(out.String(), `"code":-32700`) {
		t.Errorf("answered %q", out.String())
	}
}
