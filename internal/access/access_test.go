package access

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// logged writes r as one JSON line and decodes it.
func logged(t *testing.T, r *Record) map[string]any {
	t.Helper()
	var buf bytes.Buffer
	r.Log(slog.New(slog.NewJSONHandler(&buf, nil)))
	var out map[string]any
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	return out
}

// TestRecordSQL: a query's record holds its text, hash and length, or
// with HashSQL the hash and length only; parameters are counted, never
// written; a long text is cut, its hash and length those of the whole.
func TestRecordSQL(t *testing.T) {
	const sql = "SELECT * FROM public.orders WHERE card = '4111-1111-1111-1111' AND id = ?"
	sum := sha256.Sum256([]byte(sql))
	for _, hash := range []bool{false, true} {
		got := logged(t, &Record{Principal: Principal{Name: "alice"}, Surface: SurfaceREST, Endpoint: "POST /v1/query",
			Status: 200, SQL: sql, Params: 1, HashSQL: hash})
		if got["sql_sha256"] != hex.EncodeToString(sum[:]) || got["sql_bytes"] != float64(len(sql)) || got["sql_params"] != 1.0 {
			t.Errorf("hash %v: %v, want the whole text's hash, length and parameter count", hash, got)
		}
		if got["principal"] != "alice" || got["outcome"] != "ok" || got["status"] != 200.0 {
			t.Errorf("hash %v: principal and outcome: %v", hash, got)
		}
		if text, has := got["sql"]; has == hash || !hash && text != sql {
			t.Errorf("hash %v: sql = %v", hash, text)
		}
		if hash {
			line, _ := json.Marshal(got)
			if strings.Contains(string(line), "4111") {
				t.Errorf("the hashed record holds the text: %s", line)
			}
		}
	}
	// Cut at MaxAuditSQL, never inside a character.
	long := "SELECT '" + strings.Repeat("é", MaxAuditSQL) + "'"
	got := logged(t, &Record{SQL: long})
	text, _ := got["sql"].(string)
	if len(text) > MaxAuditSQL || len(text) < MaxAuditSQL-1 || got["sql_truncated"] != true || got["sql_bytes"] != float64(len(long)) {
		t.Errorf("long SQL: %d bytes logged, truncated %v, sql_bytes %v", len(text), got["sql_truncated"], got["sql_bytes"])
	}
	if strings.ContainsRune(text, '\uFFFD') {
		t.Error("the cut split a character")
	}
	// No SQL, no SQL keys: other requests' records are as before.
	if got := logged(t, &Record{Endpoint: "GET /v1/tables", Status: 200}); got["sql_sha256"] != nil || got["sql"] != nil {
		t.Errorf("a record without SQL: %v", got)
	}
}

// TestRecordOutcome: refused (a rule), error (an error or a 4xx/5xx), ok.
func TestRecordOutcome(t *testing.T) {
	for _, c := range []struct {
		r    Record
		want string
	}{
		{Record{Status: 200}, "ok"},
		{Record{}, "ok"}, // an MCP tool call that succeeded
		{Record{Status: 400, Error: "query refused: only queries", Rule: "only queries"}, "refused"},
		{Record{Error: "query refused: only queries", Rule: "only queries"}, "refused"},
		{Record{Status: 400, Error: "bad point"}, "error"},
		{Record{Error: "tool error"}, "error"},
		{Record{Status: 503}, "error"},
	} {
		got := logged(t, &c.r)
		if got["outcome"] != c.want {
			t.Errorf("%+v: outcome %v, want %s", c.r, got["outcome"], c.want)
		}
		if c.r.Rule != "" && got["rule"] != c.r.Rule {
			t.Errorf("%+v: rule %v", c.r, got["rule"])
		}
	}
}
