package runs

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { c.t = c.t.Add(time.Second); return c.t }

func TestNewID(t *testing.T) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.FixedZone("x", 3600))
	id, err := NewID(at, bytes.NewReader([]byte{0x1a, 0x2b, 0x3c}))
	if err != nil || id != "20260102T140405Z-1a2b3c" {
		t.Fatalf("NewID = %q, %v", id, err)
	}
	a, _ := NewID(at, nil)
	b, _ := NewID(at.Add(time.Second), nil)
	if !idPattern.MatchString(a) || a >= b {
		t.Fatalf("IDs do not sort by time: %s, %s", a, b)
	}
}

// TestRunLifecycle writes a whole run and reads every file back.
func TestRunLifecycle(t *testing.T) {
	root := filepath.Join(t.TempDir(), "runs")
	c := &clock{t: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}
	info := Info{RunID: "20260102T150405Z-abcdef", Version: "v1", Command: "start", Args: []string{"-c", "x.yml", "start"},
		PID: 42, Host: "h", User: "u", StartedAt: c.t, Config: map[string]any{"flush.interval_sec": 10}}
	redact := func(s string) string { return strings.ReplaceAll(s, "hunter2", "xxxxx") }
	r, err := Start(root, info, Options{Now: c.now, Redact: redact})
	if err != nil {
		t.Fatal(err)
	}
	run := readJSON(t, filepath.Join(r.Dir(), RunFile))
	if run["run_id"] != info.RunID || run["schema"] != 1.0 || run["stopped_at"] != nil || run["exit_code"] != nil {
		t.Fatalf("run.json at the start: %v", run)
	}

	must(t, r.Emit(SessionStarted{Session: 1, Slot: "s", LSN: 0x16B3748, Epoch: 3, Tables: 2, Provider: "self-managed"}))
	must(t, r.Emit(Flushed{Epoch: 4, LSN: 0x16B4000, Reason: "interval", Txns: 2, Rows: 10, Tables: 1, Bytes: 2048, DurationMS: 7}))
	must(t, r.Emit(SessionFailed{Attempt: 1, Err: "dial postgres://u:hunter2@h/db: refused", WaitMS: 1000}))
	must(t, r.Emit(Flushed{Epoch: 5, LSN: 0x16B5000, Reason: "shutdown", Rows: 5, Bytes: 1024}))
	must(t, r.Emit(StopRequested{}))
	state := State{StartedAt: info.StartedAt, Connected: true, Sessions: 1, DurableLSN: 0x16B4000,
		Tables: map[string]TableState{"public.t": {LastDeltaEpoch: 4, Deltas: 1}}, LastError: "password=hunter2"}
	must(t, r.WriteState(state))
	st := readJSON(t, filepath.Join(r.Dir(), StateFile))
	if st["durable_lsn"] != "0/16B4000" || st["schema"] != 1.0 || st["run_id"] != info.RunID || st["last_error"] != "password=xxxxx" {
		t.Fatalf("state.json: %v", st)
	}

	state.DurableLSN, state.Epoch, state.Connected = 0x16B5000, 5, false
	must(t, r.Finish(state, Stop{ExitCode: 0, DurableLSN: 0x16B5000}))
	must(t, r.Emit(Flushed{Epoch: 6})) // after Finish: nothing

	run = readJSON(t, filepath.Join(r.Dir(), RunFile))
	if run["stopped_at"] == nil || run["exit_code"] != 0.0 || run["durable_lsn"] != "0/16B5000" || run["error"] != nil {
		t.Fatalf("run.json at the stop: %v", run)
	}
	if cfg, _ := run["config"].(map[string]any); cfg["flush.interval_sec"] != 10.0 {
		t.Fatalf("run.json config: %v", run["config"])
	}
	if st := readJSON(t, filepath.Join(r.Dir(), StateFile)); st["durable_lsn"] != "0/16B5000" || st["connected"] != false {
		t.Fatalf("final state.json: %v", st)
	}

	lines := readLines(t, filepath.Join(r.Dir(), EventsFile))
	var types []string
	for i, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", i+1, err, l)
		}
		if ev["schema"] != 1.0 || ev["run_id"] != info.RunID || ev["seq"] != float64(i+1) {
			t.Errorf("line %d envelope: %s", i+1, l)
		}
		if !strings.HasPrefix(l, `{"schema":1,"ts":"`) {
			t.Errorf("line %d does not start with the envelope: %s", i+1, l)
		}
		types = append(types, ev["type"].(string))
	}
	want := []string{"run_started", "session_started", "flushed", "session_failed", "flushed", "stop_requested", "run_stopped"}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	if !strings.Contains(lines[2], `"lsn":"0/16B4000","reason":"interval"`) || !strings.Contains(lines[5], `"type":"stop_requested"}`) {
		t.Errorf("event fields: %s / %s", lines[2], lines[5])
	}

	sum, err := os.ReadFile(filepath.Join(r.Dir(), SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"# pg-cdc run " + info.RunID, "stopped cleanly on request", "flushed 2 epochs (4 to 5): 15 rows, 3.0 KiB",
		"durable LSN at the stop: 0/16B5000 (epoch 5)", "| public.t | 4 | 1 | 0 |", "session failed (attempt 1, retried after 1s): dial postgres://u:xxxxx@h/db"} {
		if !strings.Contains(string(sum), w) {
			t.Errorf("summary.md lacks %q:\n%s", w, sum)
		}
	}
	// Redact saw every byte; no temporary file is left.
	filepath.WalkDir(r.Dir(), func(p string, d os.DirEntry, err error) error {
		if d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte("hunter2")) {
			t.Errorf("%s holds the secret", p)
		}
		if strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

func TestFailedRunSummary(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}
	r, err := Start(t.TempDir(), Info{RunID: "20260102T150405Z-000001", StartedAt: c.t, Command: "start"}, Options{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	must(t, r.Finish(State{}, Stop{ExitCode: 10, Err: "replication slot lost"}))
	run := readJSON(t, filepath.Join(r.Dir(), RunFile))
	if run["exit_code"] != 10.0 || run["error"] != "replication slot lost" {
		t.Fatalf("run.json: %v", run)
	}
	sum, _ := os.ReadFile(filepath.Join(r.Dir(), SummaryFile))
	if !strings.Contains(string(sum), "**exit 10**: replication slot lost") || !strings.Contains(string(sum), "flushed no epoch") {
		t.Fatalf("summary.md:\n%s", sum)
	}
}

// TestEventsRotate: events.ndjson past its bound moves to events.ndjson.1
// and the sequence goes on in a new file.
func TestEventsRotate(t *testing.T) {
	r, err := Start(t.TempDir(), Info{RunID: "20260102T150405Z-000002"}, Options{MaxEventsBytes: 600})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		must(t, r.Emit(Flushed{Epoch: uint64(i + 1), Rows: 1}))
	}
	must(t, r.Finish(State{}, Stop{}))
	cur := readLines(t, filepath.Join(r.Dir(), EventsFile))
	old := readLines(t, filepath.Join(r.Dir(), EventsFile+".1"))
	for _, f := range []string{EventsFile, EventsFile + ".1"} {
		if st, err := os.Stat(filepath.Join(r.Dir(), f)); err != nil || st.Size() > 600 {
			t.Errorf("%s: %v, %d bytes", f, err, st.Size())
		}
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(cur[len(cur)-1]), &last); err != nil || last["type"] != "run_stopped" || last["seq"] != 12.0 {
		t.Fatalf("last event: %s", cur[len(cur)-1])
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(cur[0]), &first); err != nil || int(first["seq"].(float64)) != 12-len(cur)+1 || len(old) == 0 {
		t.Fatalf("after rotation: %d and %d lines, first %s", len(old), len(cur), cur[0])
	}
}

// TestPrune keeps the newest run directories and never touches anything
// that is not one.
func TestPrune(t *testing.T) {
	root := t.TempDir()
	for i := range 25 {
		must(t, os.Mkdir(filepath.Join(root, fmt.Sprintf("20250101T0000%02dZ-000000", i)), 0o755))
	}
	must(t, os.Mkdir(filepath.Join(root, "notes"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "20240101T000000Z-000000"), nil, 0o644)) // a file, not a run
	r, err := Start(root, Info{RunID: "20260101T000000Z-ffffff"}, Options{Keep: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Finish(State{}, Stop{})
	entries, _ := os.ReadDir(root)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 22 || names[0] != "20240101T000000Z-000000" || names[1] != "20250101T000006Z-000000" ||
		names[20] != "20260101T000000Z-ffffff" || names[21] != "notes" {
		t.Fatalf("after pruning: %v", names)
	}
	if _, err := Start(root, Info{RunID: "not-an-id"}, Options{}); err == nil {
		t.Fatal("a malformed run ID was accepted")
	}
}

// TestEventSchemaDocumented: docs/event-schema.md names every event type
// and every field of it, and the envelope.
func TestEventSchemaDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "event-schema.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, f := range []string{"schema", "ts", "run_id", "seq", "type"} {
		if !strings.Contains(text, "`"+f+"`") {
			t.Errorf("the envelope field %q is not documented", f)
		}
	}
	for _, e := range Types() {
		sec := section(text, "### `"+e.Type()+"`")
		if sec == "" {
			t.Errorf("event %q has no section", e.Type())
			continue
		}
		rt := reflect.TypeOf(e)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if !strings.Contains(sec, "`"+name+"`") {
				t.Errorf("event %q: field %q is not documented", e.Type(), name)
			}
		}
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[State](), reflect.TypeFor[TableState]()} {
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if !strings.Contains(text, "`"+name+"`") {
				t.Errorf("state.json field %q is not documented", name)
			}
		}
	}
}

// section is the text from heading to the next heading of the same level.
func section(doc, heading string) string {
	i := strings.Index(doc, heading+"\n")
	if i < 0 {
		return ""
	}
	rest := doc[i+len(heading):]
	if j := strings.Index(rest, "\n### "); j >= 0 {
		rest = rest[:j]
	}
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
