package parquetfile

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestRulesLandCountedAndReadable writes values that a documented rule
// changes, and the new type families, and reads them back with DuckDB.
func TestRulesLandCountedAndReadable(t *testing.T) {
	table := &cdc.Table{
		ID: cdc.TableID{Schema: "public", Name: "rules"},
		Columns: []cdc.Column{
			{Name: "id", TypeOID: oidInt4, TypeMod: -1, PGType: "integer"},
			{Name: "d", TypeOID: oidDate, TypeMod: -1, PGType: "date"},
			{Name: "ts", TypeOID: oidTimestamp, TypeMod: -1, PGType: "timestamp"},
			{Name: "tz", TypeOID: oidTimestampTZ, TypeMod: -1, PGType: "timestamptz"},
			{Name: "n", TypeOID: oidNumeric, TypeMod: numericMod(10, 2), PGType: "numeric(10,2)"},
			{Name: "tm", TypeOID: oidTime, TypeMod: -1, PGType: "time"},
			{Name: "iv", TypeOID: oidInterval, TypeMod: -1, PGType: "interval"},
			{Name: "ta", TypeOID: 1009, TypeMod: -1, PGType: "text[]"},
			{Name: "na", TypeOID: 1231, TypeMod: numericMod(10, 2), PGType: "numeric(10,2)[]"},
			{Name: "mood", TypeOID: 90001, TypeMod: -1, PGType: "mood", EnumLabels: []string{"sad", "ok"}},
			{Name: "dom", TypeOID: 90002, TypeMod: -1, PGType: "posint", BaseTypeOID: oidInt4, BaseTypeMod: -1},
			{Name: "u", TypeOID: oidUUID, TypeMod: -1, PGType: "uuid", Repr: ReprString},
		},
		PrimaryKey: []string{"id"},
	}
	// Both writers: the pipelined one converts and counts on its encoders.
	for name, newWriter := range map[string]func(io.Writer, *Schema) *Writer{"plain": NewWriter, "pipelined": NewPipelinedWriter} {
		t.Run(name, func(t *testing.T) {
			forcePipeline(t) // every row through the encoders (the plain writer ignores it)
			s, err := NewSchema(table)
			if err != nil {
				t.Fatal(err)
			}
			var reports []Adjustment
			s.SetReporter(func(a Adjustment) { reports = append(reports, a) })
			rows := [][]string{
				{"1", "infinity", "infinity", "-infinity", "NaN", "24:00:00", "-1 years +3 days -00:00:00.000001",
					`{"a b","NULL",NULL,"\"q\\",""}`, "{1.50,NaN,NULL}", "ok", "7", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
				{"2", "-infinity", "294276-12-31 23:59:59.999999", "2026-01-01 00:00:00+00", "Infinity", "00:00:00.000001", "00:00:00",
					"{{a,b},{c,d}}", "[0:1]={1,2}", "sad", "8", "00000000-0000-0000-0000-000000000000"},
				{"3", "2026-01-02", "0001-01-01 00:00:00 BC", "2026-01-01 05:45:00+05:45", "-1.25", "12:34:56.5", "1 mon",
					"{}", "{}", "", "9", ""},
			}
			var buf bytes.Buffer
			w := newWriter(&buf, s)
			for _, r := range rows {
				vals := make([]cdc.Datum, len(r))
				for i, v := range r {
					vals[i] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(v)}
				}
				if r[0] == "3" {
					vals[9], vals[11] = cdc.Datum{}, cdc.Datum{}
				}
				if err := w.Write(cdc.RowMeta{Op: cdc.OpInsert}, vals); err != nil {
					t.Fatalf("row %s: %v", r[0], err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			wantCounts := map[string]int64{"d": 2, "ts": 2, "tz": 1, "n": 2, "ta": 1, "na": 2}
			got := w.Adjusted()
			if len(got) != len(wantCounts) {
				t.Errorf("Adjusted() = %v, want %v", got, wantCounts)
			}
			for k, v := range wantCounts {
				if got[k] != v {
					t.Errorf("Adjusted()[%s] = %d, want %d", k, got[k], v)
				}
			}
			if len(reports) != len(wantCounts) {
				t.Errorf("%d reports, want one per column: %v", len(reports), reports)
			}
			for _, a := range reports {
				if a.Key == "" || !strings.Contains(a.String(), "public.rules") {
					t.Errorf("report without key or table: %s", a)
				}
			}
			path := filepath.Join(t.TempDir(), "f.parquet")
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			db := openDuckDB(t)
			q := `SELECT CAST(d AS VARCHAR), CAST(ts AS VARCHAR), CAST(tz AS VARCHAR), CAST(n AS VARCHAR), CAST(tm AS VARCHAR),
				CAST(CAST(iv AS INTERVAL) AS VARCHAR), array_to_string(list_transform(ta, lambda x: coalesce(x, '<null>')), '|'), CAST(na AS VARCHAR), mood, CAST(dom AS VARCHAR), u,
				typeof(tm), typeof(ta), typeof(na), typeof(mood), typeof(dom), typeof(u)
				FROM read_parquet(` + quoteLiteral(path) + `) ORDER BY id`
			res := queryStrings(t, db, q)
			want := [][]string{
				{"infinity", "infinity", "-infinity", "NULL", "24:00:00", "-1 year 3 days -00:00:00.000001",
					`a b|NULL|<null>|"q\|`, "[1.50, NULL, NULL]", "ok", "7", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
					"TIME", "VARCHAR[]", "DECIMAL(10,2)[]", "VARCHAR", "INTEGER", "VARCHAR"},
				{"-infinity", "infinity", "2026-01-01 00:00:00+00", "NULL", "00:00:00.000001", "00:00:00",
					"a|b|c|d", "[1.00, 2.00]", "sad", "8", "00000000-0000-0000-0000-000000000000"},
				{"2026-01-02", "0001-01-01 (BC) 00:00:00", "2026-01-01 00:00:00+00", "-1.25", "12:34:56.5", "1 month",
					"", "[]", "NULL", "9", "NULL"},
			}
			for r := range want {
				for c := range want[r] {
					if res[r][c] != want[r][c] {
						t.Errorf("row %d column %d: got %q, want %q", r+1, c, res[r][c], want[r][c])
					}
				}
			}
		})
	}
}
