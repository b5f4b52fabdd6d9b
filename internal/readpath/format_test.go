package readpath

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var (
	posInf = Infinity{}
	negInf = Infinity{Negative: true}
)

// TestInfinityText: ±infinity prints as PostgreSQL prints it, in each
// column type that has it, alone and in a list.
func TestInfinityText(t *testing.T) {
	for _, tc := range []struct {
		v    any
		typ  string
		want string
	}{
		{posInf, "TIMESTAMP", "infinity"},
		{negInf, "TIMESTAMP", "-infinity"},
		{posInf, "TIMESTAMP WITH TIME ZONE", "infinity"},
		{negInf, "TIMESTAMPTZ", "-infinity"},
		{posInf, "DATE", "infinity"},
		{negInf, "DATE", "-infinity"},
		{[]any{negInf, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), posInf}, "DATE[]", `["-infinity","2026-01-02T00:00:00Z","infinity"]`},
		// A finite date next to it is still a date.
		{time.Date(294246, 1, 1, 0, 0, 0, 0, time.UTC), "TIMESTAMP", "294246-01-01 00:00:00"},
	} {
		if got := Text(tc.v, tc.typ); got != tc.want {
			t.Errorf("Text(%v, %s) = %q, want %q", tc.v, tc.typ, got, tc.want)
		}
	}
}

// TestInfinityFormats: the table, CSV and JSON outputs of a result holding
// ±infinity.
func TestInfinityFormats(t *testing.T) {
	r := &Result{
		Columns: []Column{{"ts", "TIMESTAMP"}, {"tz", "TIMESTAMP WITH TIME ZONE"}, {"d", "DATE"}, {"ds", "DATE[]"}},
		Rows: [][]any{
			{posInf, negInf, posInf, []any{negInf, posInf}},
			{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 500_000_000, time.UTC), time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), nil},
		},
	}
	for _, tc := range []struct{ format, want string }{
		{FormatTable, `ts                   tz                        d           ds
infinity             -infinity                 infinity    ["-infinity","infinity"]
2026-01-02 03:04:05  2026-01-02 03:04:05.5+00  2026-01-02  NULL
(2 rows)
`},
		{FormatCSV, `ts,tz,d,ds
infinity,-infinity,infinity,"[""-infinity"",""infinity""]"
2026-01-02 03:04:05,2026-01-02 03:04:05.5+00,2026-01-02,
`},
		{FormatJSON, `{"columns":[{"name":"ts","type":"TIMESTAMP"},{"name":"tz","type":"TIMESTAMP WITH TIME ZONE"},{"name":"d","type":"DATE"},{"name":"ds","type":"DATE[]"}],` +
			`"rows":[["infinity","-infinity","infinity",["-infinity","infinity"]],` +
			`["2026-01-02T03:04:05Z","2026-01-02T03:04:05.5Z","2026-01-02T00:00:00Z",null]],"truncated":false}
`},
	} {
		var b strings.Builder
		if err := r.Write(&b, tc.format); err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		if b.String() != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.format, b.String(), tc.want)
		}
	}
}

// TestInfinityWire: the HTTP transports' JSON form is the string, as for
// every date and time, at any depth.
func TestInfinityWire(t *testing.T) {
	got := map[string]any{
		"ts":     WireValue(posInf, "TIMESTAMP"),
		"tz":     WireValue(negInf, "TIMESTAMP WITH TIME ZONE"),
		"d":      WireValue(negInf, "DATE"),
		"list":   WireValue([]any{posInf, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}, "DATE[]"),
		"struct": WireValue(map[string]any{"t": negInf}, "STRUCT(t TIMESTAMP)"),
	}
	want := map[string]any{
		"ts": "infinity", "tz": "-infinity", "d": "-infinity",
		"list":   []any{"infinity", "2026-01-02"},
		"struct": map[string]any{"t": "-infinity"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WireValue = %#v, want %#v", got, want)
	}
}

// TestInfinityOutsideTheReadPath: a caller that knows nothing of Infinity
// still prints it right (fmt, encoding/json), and gob carries it (the
// engine's worker sends results over a pipe).
func TestInfinityOutsideTheReadPath(t *testing.T) {
	if s := fmt.Sprint(posInf, " ", negInf); s != "infinity -infinity" {
		t.Errorf("fmt: %q", s)
	}
	b, err := json.Marshal([]any{posInf, negInf})
	if err != nil || string(b) != `["infinity","-infinity"]` {
		t.Errorf("json: %s, %v", b, err)
	}
	var back []Infinity
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, []Infinity{posInf, negInf}) {
		t.Errorf("json back: %v, %v", back, err)
	}
	gob.Register(Infinity{})
	var buf bytes.Buffer
	in := []any{posInf, negInf}
	if err := gob.NewEncoder(&buf).Encode(in); err != nil {
		t.Fatal(err)
	}
	var out []any
	if err := gob.NewDecoder(&buf).Decode(&out); err != nil || !reflect.DeepEqual(out, in) {
		t.Errorf("gob: %#v, %v", out, err)
	}
	if err := new(Infinity).UnmarshalText([]byte("2026-01-02")); err == nil {
		t.Error("UnmarshalText took a date")
	}
}
