//go:build !nodb

package query

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestInfinity: DuckDB's ±infinity of a date or timestamp comes back as
// Infinity, at the top level and inside a list or struct, in process and
// across the worker's pipe (gob); the finite values nearest to it stay
// time.Time.
func TestInfinity(t *testing.T) {
	inf, neg := Infinity{}, Infinity{Negative: true}
	for _, iso := range isolations {
		t.Run(iso.name, func(t *testing.T) {
			root := t.TempDir()
			data := filepath.Join(root, "data")
			if err := os.Mkdir(data, 0o755); err != nil {
				t.Fatal(err)
			}
			data, _ = filepath.EvalSymlinks(data)
			e, err := Open(context.Background(), Options{DataDirs: []string{data}, TempDir: filepath.Join(root, "tmp"), Isolation: iso.isolation}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			r, err := e.Query(context.Background(), `SELECT
				'infinity'::TIMESTAMP, '-infinity'::TIMESTAMP, 'infinity'::TIMESTAMPTZ, '-infinity'::TIMESTAMPTZ,
				'infinity'::DATE, '-infinity'::DATE,
				'infinity'::TIMESTAMP_S, 'infinity'::TIMESTAMP_MS, '-infinity'::TIMESTAMP_NS,
				['infinity'::TIMESTAMP, '2026-01-02'], {'d': '-infinity'::DATE},
				'294246-01-01'::TIMESTAMP, '294247-01-10 04:00:54.775806'::TIMESTAMPTZ,
				'5881580-07-10'::DATE, '5877642-06-25 (BC)'::DATE`)
			if err != nil {
				t.Fatal(err)
			}
			row := r.Rows[0]
			want := []any{inf, neg, inf, neg, inf, neg, inf, inf, neg}
			for i, w := range want {
				if row[i] != w {
					t.Errorf("column %d (%s) = %#v, want %v", i, r.Columns[i].Type, row[i], w)
				}
			}
			if l, ok := row[9].([]any); !ok || len(l) != 2 || l[0] != inf || !l[1].(time.Time).Equal(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("list = %#v, want [infinity, 2026-01-02]", row[9])
			}
			if s, ok := row[10].(map[string]any); !ok || s["d"] != neg {
				t.Errorf("struct = %#v, want {d: -infinity}", row[10])
			}
			finite := []time.Time{
				time.Date(294246, 1, 1, 0, 0, 0, 0, time.UTC),
				time.UnixMicro(1<<63 - 2).UTC(),
				time.Date(5881580, 7, 10, 0, 0, 0, 0, time.UTC),
				time.Date(-5877641, 6, 25, 0, 0, 0, 0, time.UTC),
			}
			for i, w := range finite {
				c := 11 + i
				if got, ok := row[c].(time.Time); !ok || !got.Equal(w) {
					t.Errorf("column %d (%s) = %#v, want %v", c, r.Columns[c].Type, row[c], w)
				}
			}
		})
	}
}

func TestElementType(t *testing.T) {
	for typ, want := range map[string]string{
		"DATE[]": "DATE", "TIMESTAMP WITH TIME ZONE[3]": "TIMESTAMP WITH TIME ZONE", "DATE[][]": "DATE[]",
		"DATE": "", "": "", "STRUCT(a DATE[])": "", "X[a]": "",
	} {
		if got := elementType(typ); got != want {
			t.Errorf("elementType(%q) = %q, want %q", typ, got, want)
		}
	}
}
