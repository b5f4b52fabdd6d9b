package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/logging"
)

// TestAuditRecords: an audited action logs a begin and an end record with
// the stable keys, scrubbed; a command that only reads is not audited.
func TestAuditRecords(t *testing.T) {
	var buf bytes.Buffer
	const id = "20260101T000000Z-abcdef"
	a := newAudit("init", id, []string{"-c", "x.yml", "init", "postgres://u:pw-secret@h/db"}, "json", &buf, logging.NewScrubber("pw-secret"))
	a.begin()
	a.event("stop_requested")
	a.end(ExitUsage, errors.New("connect: password=pw-secret refused"))
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

	if a := newAudit("status", id, nil, "text", &buf, logging.NewScrubber()); a != nil {
		t.Error("status is audited")
	}
	var none *audit
	none.begin()
	none.end(0, nil)
	none.event("x")
	if auditFrom(context.Background()) != nil || len(runIDFrom(context.Background())) != len(id) {
		t.Error("a context without an audit")
	}
}

// TestAuditLevel: audit records are written whatever log.level says.
func TestAuditLevel(t *testing.T) {
	var buf bytes.Buffer
	a := newAudit("teardown", "20260101T000000Z-abcdef", nil, "text", &buf, logging.NewScrubber())
	a.begin()
	if !strings.Contains(buf.String(), "audit=true action=teardown phase=begin") {
		t.Fatalf("text record: %s", buf.String())
	}
}

// TestScrubberKnowsTheSecrets: the source password, as loaded and as its
// ${VAR} resolves now, the key passphrase, the endpoint's password and the
// AWS secrets from the environment are all scrubbed.
func TestScrubberKnowsTheSecrets(t *testing.T) {
	t.Setenv("TEST_SOURCE_PW", "rotated-password-2")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIK7MDENG")
	t.Setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLE")
	yml := `source:
  postgres:
    url: "postgres://app:${TEST_SOURCE_PW}@db/app?sslkey=/k&sslpassword=key-passphrase"
storage:
  type: s3
  bucket: b
  endpoint: "https://minio:minio-secret-9@minio:9000"
`
	cfg, err := config.Parse([]byte(yml), "x.yml", []string{"TEST_SOURCE_PW=loaded-password-1"})
	if err != nil {
		t.Fatal(err)
	}
	s := scrubberFor(cfg)
	for _, secret := range []string{"loaded-password-1", "rotated-password-2", "key-passphrase", "minio-secret-9",
		"wJalrXUtnFEMIK7MDENG", "FwoGZXIvYXdzEXAMPLE"} {
		if got := s.Scrub("value " + secret + " here"); strings.Contains(got, secret) {
			t.Errorf("%s is not scrubbed: %s", secret, got)
		}
	}
	var buf bytes.Buffer
	newLogger(cfg, &buf).Info("connecting", "err", errors.New("auth failed for rotated-password-2"))
	if strings.Contains(buf.String(), "rotated") {
		t.Errorf("the logger shows the password: %s", buf.String())
	}
}
