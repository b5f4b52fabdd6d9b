package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLine bounds one line of the stdio transport, as the SDK bounds a
// frame by default: a longer line is answered and skipped, not buffered.
const maxLine = mcp.DefaultMaxLineLength

// lineFilter stands between stdin and the SDK's stdio transport. The SDK
// ends the session at the first frame it cannot decode (the process then
// exits 1), and offers no hook to answer one instead; so each line is
// checked here first with the SDK's own decoder. A line that is one
// JSON-RPC message passes through (without blanks around it); any other is
// answered on out with a JSON-RPC error and dropped, and the session goes
// on:
//
//   - not JSON (or more than one JSON value): -32700, parse error;
//   - JSON that is not a JSON-RPC message, a batch (an array: MCP
//     2025-06-18 removed batching, and the SDK ends the session on one
//     once that version is negotiated), or a line over maxLine: -32600,
//     invalid request.
//
// The error's id is the line's own when it has a well-formed one (the
// client waits on it), else null. Blank lines are skipped, as the SDK's
// decoder skips whitespace.
type lineFilter struct {
	in   *bufio.Reader
	out  io.Writer // shared with the SDK's writes: a lockedWriter
	log  *slog.Logger
	line []byte // the rest of the line being passed through
	err  error  // the input's end or failure, returned once line is empty
}

func newLineFilter(in io.Reader, out io.Writer, log *slog.Logger) *lineFilter {
	return &lineFilter{in: bufio.NewReaderSize(in, 64<<10), out: out, log: log}
}

// Read gives the SDK whole, well-formed lines, at most one per call, so
// the SDK's decoder never reads ahead into a line not yet checked.
func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.line) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		line, tooLong, err := f.next()
		f.err = err
		switch {
		case tooLong:
			if werr := f.refuse(jsonrpc.CodeInvalidRequest, nil, fmt.Sprintf("Invalid Request: a line longer than %d bytes", maxLine)); werr != nil {
				return 0, werr
			}
		case len(bytes.TrimSpace(line)) == 0:
		default:
			// Trimmed: the SDK ends the session on anything but a newline
			// after a value (a trailing space, say).
			line = bytes.TrimSpace(line)
			code, id, why := check(line)
			if code == 0 {
				f.line = append(line, '\n')
				continue
			}
			if werr := f.refuse(code, id, why); werr != nil {
				return 0, werr
			}
		}
	}
	n := copy(p, f.line)
	f.line = f.line[n:]
	return n, nil
}

// next reads one line without its newline. A line over maxLine is read to
// its end and discarded (tooLong). err is the input's end or failure after
// the line.
func (f *lineFilter) next() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := f.in.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxLine+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte{'\n'}), tooLong, err
	}
}

// check says whether line is one JSON-RPC message as the SDK decodes it:
// code 0 if so, else the error code to answer, the id to answer it with
// (nil: null) and why.
func check(line []byte) (code int64, id json.RawMessage, why string) {
	if !json.Valid(line) {
		// One value only: the SDK's stream decoder refuses a second one
		// on the line too ("invalid trailing data"). Parsed again only
		// here, for the reason.
		var v json.RawMessage
		err := json.Unmarshal(line, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return jsonrpc.CodeParseError, nil, "Parse error: the line is not one JSON value: " + err.Error()
	}
	// A valid value: its first byte past the white space says its kind.
	switch bytes.TrimLeft(line, " \t\r\n")[0] {
	case '[':
		return jsonrpc.CodeInvalidRequest, nil, "Invalid Request: batches (JSON arrays) are not supported; send one JSON-RPC message per line"
	case '{':
	default:
		return jsonrpc.CodeInvalidRequest, nil, "Invalid Request: want a JSON-RPC 2.0 message, a JSON object"
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		var members map[string]json.RawMessage
		_ = json.Unmarshal(line, &members) // an object: it parses
		return jsonrpc.CodeInvalidRequest, wellFormedID(members["id"]), "Invalid Request: " + err.Error()
	}
	return 0, nil, ""
}

// wellFormedID is raw if it is a JSON-RPC id (a string or a number), else
// nil (answered as null). Kept as text: a large number keeps its digits.
func wellFormedID(raw json.RawMessage) json.RawMessage {
	if len(raw) > 0 && (raw[0] == '"' || raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') {
		return raw
	}
	return nil
}

// refuse answers a dropped line with a JSON-RPC error.
func (f *lineFilter) refuse(code int64, id json.RawMessage, message string) error {
	if id == nil {
		id = json.RawMessage("null") // never omitted: JSON-RPC wants "id": null
	}
	f.log.Warn("mcp stdio: a line that is no JSON-RPC message answered with an error", "code", code)
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}{code, message}})
	if err != nil {
		return fmt.Errorf("mcp stdio error response: %w", err)
	}
	if _, err := f.out.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("mcp stdio error response: %w", err)
	}
	return nil
}

// lockedWriter serializes writes: the SDK writes each message with one
// Write (under its own lock), and lineFilter answers dropped lines from
// the reading goroutine, so without a shared lock two messages could
// interleave on stdout.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (*lockedWriter) Close() error { return nil }
