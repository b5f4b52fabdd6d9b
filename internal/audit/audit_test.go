package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/logging"
)

// TestAuditRecords: an audited action logs a begin and an end record with
// the stable keys, scrubbed; a command that only reads is not audited.
func TestAuditRecords(t *testing.T) {
	var buf bytes.Buffer
	const id = "20260101T000000Z-abcdef"
	a := New("init", id, []string{"-c", "x.yml", "init", "postgres://u:pw-secret@h/db"}, TextOrJSON("json", &buf), logging.NewScrubber("pw-secret"))
	a.Begin()
	a.Event("stop_requested")
	a.End(2, errors.New("connect: password=pw-secret refused"))
	if strings.Contains(buf.String(), "pw-secret") {
		t.Fatalf("the audit shows the secret:\n%s", buf.String())
	}
	var recs []map[string]any
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("not JSON: %v: %s", err, sc.Text())
		}
		recs = append(recs, r)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for i, r := range recs {
		for _, k := range []string{"audit", "action", "phase", "user", "host", "pid", "run_id"} {
			if _, ok := r[k]; !ok {
				t.Errorf("record %d lacks %q: %v", i, k, r)
			}
		}
		if r["audit"] != true || r["run_id"] != id || r["level"] != "INFO" {
			t.Errorf("record %d: %v", i, r)
		}
	}
	begin, event, end := recs[0], recs[1], recs[2]
	if begin["action"] != "init" || begin["phase"] != "begin" || len(begin["args"].([]any)) != 4 {
		t.Errorf("begin: %v", begin)
	}
	if event["action"] != "stop_requested" || event["phase"] != "event" {
		t.Errorf("event: %v", event)
	}
	if end["phase"] != "end" || end["result"] != "error" || end["exit_code"] != 2.0 || end["duration_ms"] == nil ||
		!strings.Contains(end["err"].(string), "password=xxxxx") {
		t.Errorf("end: %v", end)
	}

	if a := New("status", id, nil, TextOrJSON("text", &buf), logging.NewScrubber()); a != nil {
		t.Error("status is audited")
	}
	var none *Log
	none.Begin()
	none.End(0, nil)
	none.Event("x")
}

// TestAuditLevel: audit records are written whatever log.level says.
func TestAuditLevel(t *testing.T) {
	var buf bytes.Buffer
	a := New("teardown", "20260101T000000Z-abcdef", nil, TextOrJSON("text", &buf), logging.NewScrubber())
	a.Begin()
	if !strings.Contains(buf.String(), "audit=true action=teardown phase=begin") {
		t.Fatalf("text record: %s", buf.String())
	}
}
