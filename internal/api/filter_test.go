package api

import (
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

var testCols = []readpath.Column{{Name: "id", Type: "BIGINT"}, {Name: "status", Type: "VARCHAR"}, {Name: `we"ird`, Type: "VARCHAR"}}

// FuzzFilter: any filter text parses or is a 400, and what it compiles to
// holds no byte of the value: values are parameters only.
func FuzzFilter(f *testing.F) {
	for _, s := range []string{"status:eq:pending", "id:in:1|2", "status:is_null", `we"ird:like:%x%`, "status:eq:x' OR 1=1 --", "a:b", ":::", "id:in:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flt, _, err := parseFilter(s, testCols)
		if err != nil {
			if _, ok := err.(*apiError); !ok {
				t.Fatalf("parseFilter(%q): %T %v", s, err, err)
			}
			return
		}
		sql, args := where([]filter{flt}, testCols)
		n := 0
		for _, v := range flt.Values {
			n++
			if v != "" && len(v) > 3 && strings.Contains(sql, v) && !strings.Contains(`"we""ird" CAST AS VARCHAR BIGINT LIKE IN IS NOT NULL`, v) {
				t.Fatalf("filter %q: the value %q is in the SQL %q", s, v, sql)
			}
		}
		if len(args) != n {
			t.Fatalf("filter %q: %d parameters for %d values", s, len(args), n)
		}
	})
}

func TestKeyText(t *testing.T) {
	if got := keyText([]byte{0xAB, 0x01}, "BLOB"); got != `\xAB\x01` {
		t.Errorf("keyText bytes = %q", got)
	}
}
