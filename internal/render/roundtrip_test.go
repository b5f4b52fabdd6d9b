package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// null marks a NULL in a row of test values.
const null = "\x00NULL"

// casesTable is a table with an int8 "id" and one column per case, named
// c0, c1, ...; its rows hold the cases' values, row r the r-th value of
// each case (NULL when a case has fewer).
func casesTable(cases []typeCase) (*cdc.Table, [][]string) {
	t := &cdc.Table{
		ID:         cdc.TableID{Schema: "public", Name: "typed"},
		Columns:    []cdc.Column{{Name: "id", TypeOID: oidInt8, TypeMod: -1, PGType: "bigint", NotNull: true}},
		PrimaryKey: []string{"id"},
	}
	n := 0
	for i, c := range cases {
		col := c.col
		col.Name, col.PGType = fmt.Sprintf("c%d", i), c.sql
		t.Columns = append(t.Columns, col)
		n = max(n, len(c.values))
	}
	rows := make([][]string, n)
	for r := range rows {
		row := []string{fmt.Sprint(r + 1)}
		for _, c := range cases {
			v := null
			if r < len(c.values) {
				v = c.values[r]
			}
			row = append(row, v)
		}
		rows[r] = row
	}
	return t, rows
}

// writeParquet writes rows of PostgreSQL text values with internal/parquetfile
// and returns the file's bytes and the table's manifest columns.
func writeParquet(t *testing.T, table *cdc.Table, rows [][]string) ([]byte, []manifest.Column) {
	t.Helper()
	schema, err := parquetfile.NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, schema)
	for i, r := range rows {
		values := make([]cdc.Datum, len(r))
		for j, v := range r {
			if v == null {
				values[j] = cdc.Datum{Kind: cdc.DatumNull}
			} else {
				values[j] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(v)}
			}
		}
		meta := cdc.RowMeta{Op: cdc.OpInsert, LSN: 0x1000 + cdc.LSN(i), Seq: int64(i), XID: 1<<32 + 7,
			CommitTime: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)}
		if err := w.Write(meta, values); err != nil {
			t.Fatalf("write row %d: %v", i+1, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), schema.ManifestColumns(table)
}

// readRows reads every row of a Parquet file with parquet-go, as the dump
// command will.
func readRows(t *testing.T, data []byte) []parquet.Row {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out []parquet.Row
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		buf := make([]parquet.Row, 8)
		for {
			n, err := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				out = append(out, r.Clone())
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// renderText renders every column of every row as text, null for NULL.
func renderText(t *testing.T, tab *Table, rows []parquet.Row) [][]string {
	t.Helper()
	var (
		out  [][]string
		cols [][]parquet.Value
		err  error
	)
	for i, row := range rows {
		if cols, err = tab.Split(row, cols); err != nil {
			t.Fatalf("row %d: %v", i+1, err)
		}
		var texts []string
		for c, vals := range cols {
			s, isNull, err := tab.Text(c, vals)
			if err != nil {
				t.Fatalf("row %d: %v", i+1, err)
			}
			if isNull {
				s = null
			}
			texts = append(texts, s)
		}
		out = append(out, texts)
	}
	return out
}

// roundTrip writes rows through internal/parquetfile, reads them back and
// renders them as text.
func roundTrip(t *testing.T, table *cdc.Table, rows [][]string) [][]string {
	t.Helper()
	data, mcols := writeParquet(t, table, rows)
	tab, err := NewTable(mcols)
	if err != nil {
		t.Fatal(err)
	}
	return renderText(t, tab, readRows(t, data))
}

// TestRoundTripText: PostgreSQL's output text of every type family, written
// to Parquet by internal/parquetfile and read back with parquet-go, renders
// as the same text, byte for byte; NULLs stay NULL.
func TestRoundTripText(t *testing.T) {
	table, rows := casesTable(typeCases)
	got := roundTrip(t, table, rows)
	if len(got) != len(rows) {
		t.Fatalf("%d rows back, want %d", len(got), len(rows))
	}
	checked := 0
	for r := range rows {
		for c := range rows[r] {
			if got[r][c] != rows[r][c] {
				name := "id"
				if c > 0 {
					name = typeCases[c-1].sql
				}
				t.Errorf("%s row %d: got %q, want %q", name, r+1, got[r][c], rows[r][c])
			}
			checked++
		}
	}
	t.Logf("%d values (%d columns × %d rows) round-tripped", checked, len(rows[0]), len(rows))
}

// TestRoundTripLossy: values a documented type rule changed when the file
// was written render as written (docs/types.md), and non-canonical input
// renders in PostgreSQL's canonical form.
func TestRoundTripLossy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		col       cdc.Column
		in, want  string
		wantIsNil bool
	}{
		{"numeric NaN in DECIMAL", scalarCol(oidNumeric, numericMod(10, 2)), "NaN", "", true},
		{"numeric NaN element", arrayCol(1231, oidNumeric, numericMod(10, 2)), "{1.50,NaN}", "{1.50,NULL}", false},
		{"timestamp beyond 294247", scalarCol(oidTimestamp, -1), "294276-12-31 23:59:59.999999", "infinity", false},
		{"timestamptz beyond 294247", scalarCol(oidTimestampTZ, -1), "294276-12-31 23:59:59.999999+00", "infinity", false},
		{"multi-dimensional array", arrayCol(1007, oidInt4, -1), "{{1,2},{3,4}}", "{1,2,3,4}", false},
		{"lower bound not 1", arrayCol(1007, oidInt4, -1), "[0:1]={5,6}", "{5,6}", false},
		{"timestamptz offset", scalarCol(oidTimestampTZ, -1), "2024-01-02 08:34:05.5+05:30", "2024-01-02 03:04:05.5+00", false},
		{"decimal scale padded", scalarCol(oidNumeric, numericMod(6, 3)), "1.5", "1.500", false},
		{"interval override keeps text", cdc.Column{TypeOID: 1186, TypeMod: -1, Repr: parquetfile.ReprString}, "-1 days +02:00:00", "-1 days +02:00:00", false},
		{"unquoted array element", arrayCol(1009, oidText, -1), `{a\"b}`, `{"a\"b"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			col := tc.col
			col.Name = "v"
			table := &cdc.Table{ID: cdc.TableID{Schema: "s", Name: "t"}, Columns: []cdc.Column{col}}
			got := roundTrip(t, table, [][]string{{tc.in}})[0][0]
			want := tc.want
			if tc.wantIsNil {
				want = null
			}
			if got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

// TestRoundTripRowGroups: rows spread over several row groups and NULL
// rows render in order.
func TestRoundTripManyRows(t *testing.T) {
	table := &cdc.Table{ID: cdc.TableID{Schema: "s", Name: "t"}, Columns: []cdc.Column{
		{Name: "id", TypeOID: oidInt8, TypeMod: -1},
		{Name: "a", TypeOID: 1007, TypeMod: -1, ElemTypeOID: oidInt4},
		{Name: "s", TypeOID: oidText, TypeMod: -1},
	}}
	var rows [][]string
	for i := range 2000 {
		a, s := null, null
		if i%3 != 0 {
			a = fmt.Sprintf("{%d,NULL,%d}", i, -i)
			s = strings.Repeat("x", i%7)
		}
		rows = append(rows, []string{fmt.Sprint(i), a, s})
	}
	got := roundTrip(t, table, rows)
	for i := range rows {
		if strings.Join(got[i], "|") != strings.Join(rows[i], "|") {
			t.Fatalf("row %d: got %q, want %q", i, got[i], rows[i])
		}
	}
}

var (
	newSchema = parquetfile.NewSchema
	newWriter = parquetfile.NewWriter
)
