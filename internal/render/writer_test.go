package render

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// writerTable is a small table for the writer tests and its rows.
func writerTable(t *testing.T) (*Table, []parquet.Row) {
	t.Helper()
	table := &cdc.Table{ID: cdc.TableID{Schema: "s", Name: "t"}, Columns: []cdc.Column{
		{Name: "id", TypeOID: oidInt8, TypeMod: -1},
		{Name: "name", TypeOID: oidText, TypeMod: -1},
		{Name: "amount", TypeOID: oidNumeric, TypeMod: numericMod(12, 2)},
		{Name: "tags", TypeOID: 1009, TypeMod: -1, ElemTypeOID: oidText},
		{Name: "doc", TypeOID: oidJSONB, TypeMod: -1},
		{Name: `odd "col", name`, TypeOID: oidFloat8, TypeMod: -1},
	}}
	data, mcols := writeParquet(t, table, [][]string{
		{"1", "plain", "12.30", `{a,"b c"}`, `{"k": [1, 2]}`, "1.5"},
		{"2", "", null, "{}", null, "NaN"},
		{"3", null, "-0.05", `{NULL,""}`, `"x"`, null},
		{"4", "quote \" comma , newline \n cr \r end", "0.00", null, `null`, "-0"},
		{"5", " leading space", "1.00", `{"\\."}`, `{}`, "1e+300"},
		{"6", `\.`, "2.00", `{x}`, `[]`, "Infinity"},
	})
	tab, err := NewTable(mcols)
	if err != nil {
		t.Fatal(err)
	}
	return tab, readRows(t, data)
}

func writeAll(t *testing.T, tab *Table, rows []parquet.Row, f Format) string {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, tab, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.WriteRow(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestCSV(t *testing.T) {
	tab, rows := writerTable(t)
	got := writeAll(t, tab, rows, FormatCSV)
	want := `id,name,amount,tags,doc,"odd ""col"", name"
1,plain,12.30,"{a,""b c""}","{""k"": [1, 2]}",1.5
2,"",,{},,NaN
3,,-0.05,"{NULL,""""}","""x""",
4,"quote "" comma , newline ` + "\n" + ` cr ` + "\r" + ` end",0.00,,null,-0
5," leading space",1.00,"{""\\.""}",{},1e+300
6,"\.",2.00,{x},[],Infinity
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	// encoding/csv reads it back field for field (it cannot tell NULL
	// from "", which is why the writer does not use it).
	recs, err := csv.NewReader(strings.NewReader(got)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(rows)+1 || recs[4][1] != "quote \" comma , newline \n cr \r end" || recs[0][5] != `odd "col", name` {
		t.Errorf("encoding/csv reads %q", recs)
	}
}

func TestCSVHeaderOnly(t *testing.T) {
	tab, _ := writerTable(t)
	if got := writeAll(t, tab, nil, FormatCSV); got != "id,name,amount,tags,doc,\"odd \"\"col\"\", name\"\n" {
		t.Errorf("got %q", got)
	}
	if got := writeAll(t, tab, nil, FormatJSONL); got != "" {
		t.Errorf("JSONL of no rows: got %q", got)
	}
}

func TestJSONL(t *testing.T) {
	tab, rows := writerTable(t)
	got := writeAll(t, tab, rows, FormatJSONL)
	want := `{"id":1,"name":"plain","amount":"12.30","tags":["a","b c"],"doc":{"k": [1, 2]},"odd \"col\", name":1.5}
{"id":2,"name":"","amount":null,"tags":[],"doc":null,"odd \"col\", name":"NaN"}
{"id":3,"name":null,"amount":"-0.05","tags":[null,""],"doc":"x","odd \"col\", name":null}
{"id":4,"name":"quote \" comma , newline \n cr \r end","amount":"0.00","tags":null,"doc":null,"odd \"col\", name":-0}
{"id":5,"name":" leading space","amount":"1.00","tags":["\\."],"doc":{},"odd \"col\", name":1e+300}
{"id":6,"name":"\\.","amount":"2.00","tags":["x"],"doc":[],"odd \"col\", name":"Infinity"}
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	for i, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || len(m) != tab.NumColumns() {
			t.Errorf("line %d: %v (%d keys)", i+1, err, len(m))
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, s := range []string{"csv", "jsonl"} {
		if f, err := ParseFormat(s); err != nil || string(f) != s {
			t.Errorf("ParseFormat(%q) = %q, %v", s, f, err)
		}
	}
	if _, err := ParseFormat("json"); err == nil || !strings.Contains(err.Error(), "csv or jsonl") {
		t.Errorf("ParseFormat(json): %v", err)
	}
	if _, err := NewWriter(&bytes.Buffer{}, &Table{}, "xml"); err == nil {
		t.Error("NewWriter accepted format xml")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterErrorSticks(t *testing.T) {
	tab, rows := writerTable(t)
	w, err := NewWriter(failWriter{}, tab, FormatJSONL)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRow(rows[0]); err != nil {
		t.Fatal(err) // buffered
	}
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Flush: %v", err)
	}
	if err := w.WriteRow(rows[0]); err == nil {
		t.Error("WriteRow after a failed Flush succeeded")
	}
}

func TestWriterBadRow(t *testing.T) {
	tab, rows := writerTable(t)
	var out bytes.Buffer
	w, _ := NewWriter(&out, tab, FormatCSV)
	short := rows[0][:len(rows[0])-1]
	if err := w.WriteRow(short); err == nil || !strings.Contains(err.Error(), "odd") {
		t.Errorf("row without its last column: %v", err)
	}
	if err := w.WriteRow(rows[0]); err != nil {
		t.Errorf("writer unusable after a bad row: %v", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Errorf("%d lines, want header and one row:\n%s", n, out.String())
	}
}

func TestNewTableUnknownType(t *testing.T) {
	for _, pt := range []string{"INTERVAL", "DECIMAL(39,2)", "DECIMAL(5,6)", "LIST<MAP>", "TIMESTAMP", ""} {
		_, err := NewTable([]manifest.Column{{Name: "ok", ParquetType: "INT64"}, {Name: "bad", ParquetType: pt}})
		if err == nil || !strings.Contains(err.Error(), `"bad"`) || !strings.Contains(err.Error(), `"`+pt+`"`) {
			t.Errorf("%q: %v", pt, err)
		}
	}
}

func TestReadMeta(t *testing.T) {
	_, rows := writerTable(t)
	m, err := ReadMeta(rows[2])
	if err != nil {
		t.Fatal(err)
	}
	if m.Op != cdc.OpInsert || m.LSN != 0x1002 || m.Seq != 2 || m.XID != 1<<32+7 ||
		m.OpTS.Format("2006-01-02T15:04:05.000000Z07:00") != "2026-01-02T03:04:05.000006Z" || len(m.Unchanged) != 0 {
		t.Errorf("meta %+v", m)
	}
	if _, err := ReadMeta(rows[2][2:]); err == nil {
		t.Error("ReadMeta accepted a row without __op and __lsn")
	}
}

func TestReadMetaUnchanged(t *testing.T) {
	table := &cdc.Table{ID: cdc.TableID{Schema: "s", Name: "t"}, Columns: []cdc.Column{
		{Name: "id", TypeOID: oidInt8, TypeMod: -1}, {Name: "a", TypeOID: oidText, TypeMod: -1}, {Name: "b", TypeOID: oidText, TypeMod: -1},
	}}
	s, err := newSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := newWriter(&buf, s)
	if err := w.Write(cdc.RowMeta{Op: cdc.OpUpdate}, []cdc.Datum{
		{Kind: cdc.DatumText, Text: []byte("1")}, {Kind: cdc.DatumUnchanged}, {Kind: cdc.DatumUnchanged},
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	row := readRows(t, buf.Bytes())[0]
	m, err := ReadMeta(row)
	if err != nil || m.Op != cdc.OpUpdate || strings.Join(m.Unchanged, ",") != "a,b" {
		t.Errorf("meta %+v, %v", m, err)
	}
	tab, _ := NewTable(s.ManifestColumns(table))
	texts := renderText(t, tab, []parquet.Row{row})[0]
	if texts[0] != "1" || texts[1] != null || texts[2] != null {
		t.Errorf("unchanged values render as %q, want NULL", texts)
	}
}

func TestSplitErrors(t *testing.T) {
	tab, rows := writerTable(t)
	extra := append(rows[0].Clone(), parquet.Int64Value(1).Level(0, 1, firstDataLeaf+tab.NumColumns()))
	if _, err := tab.Split(extra, nil); err == nil {
		t.Error("Split accepted a value beyond the table's columns")
	}
	// A value of the wrong kind is an error naming the column, not a panic.
	bad := rows[0].Clone()
	for i, v := range bad {
		if v.Column() == firstDataLeaf+2 { // amount, DECIMAL on INT64
			bad[i] = parquet.BooleanValue(true).Level(0, 1, v.Column())
		}
	}
	cols, err := tab.Split(bad, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tab.AppendText(nil, 2, cols[2]); err == nil || !strings.Contains(err.Error(), `"amount"`) {
		t.Errorf("AppendText of a BOOLEAN in a DECIMAL(12,2): %v", err)
	}
	if _, err := tab.AppendJSON(nil, 1, cols[0]); err == nil || !strings.Contains(err.Error(), `"name"`) {
		t.Errorf("AppendJSON of an INT64 in a STRING column: %v", err)
	}
}

// TestNoPanic: values of every Parquet kind and level in a column of every
// type render or fail with an error, never panic.
func TestNoPanic(t *testing.T) {
	types := []string{"BOOLEAN", "INT16", "INT32", "INT64", "FLOAT", "DOUBLE", "DECIMAL(5,2)", "DECIMAL(20,3)",
		"STRING", "ENUM", "JSON", "BINARY", "UUID", "DATE", "TIME(us)", "TIMESTAMP(us)", "TIMESTAMP(us,UTC)"}
	var mcols []manifest.Column
	for _, pt := range types {
		mcols = append(mcols, manifest.Column{Name: pt, ParquetType: pt}, manifest.Column{Name: "l" + pt, ParquetType: "LIST<" + pt + ">"})
	}
	mcols = append(mcols, manifest.Column{Name: "iv", ParquetType: "STRING", TypeOID: oidInterval})
	tab, err := NewTable(mcols)
	if err != nil {
		t.Fatal(err)
	}
	values := []parquet.Value{
		parquet.NullValue(), parquet.BooleanValue(true), parquet.Int32Value(-1), parquet.Int32Value(math32Max),
		parquet.Int64Value(-1), parquet.Int64Value(1 << 62), parquet.Int64Value(-1 << 63), parquet.FloatValue(1.5),
		parquet.DoubleValue(-2.5), parquet.ByteArrayValue(nil), parquet.ByteArrayValue([]byte("{\"a\":1}")),
		parquet.ByteArrayValue([]byte("-1 days 02:00:00 +x -")), parquet.FixedLenByteArrayValue(make([]byte, 16)),
		parquet.FixedLenByteArrayValue([]byte{0xff, 0, 1}),
	}
	for c := range mcols {
		for _, v := range values {
			for _, levels := range [][2]int{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 3}, {0, 7}} {
				vals := []parquet.Value{v.Level(levels[0], levels[1], firstDataLeaf+c)}
				for _, vs := range [][]parquet.Value{vals, append(vals, vals...), nil} {
					_, _, _ = tab.AppendText(nil, c, vs)
					_, _ = tab.AppendJSON(nil, c, vs)
				}
			}
		}
	}
	for _, v := range values {
		_, _ = ReadMeta(parquet.Row{v.Level(0, 0, 0), v.Level(0, 2, 5)})
	}
}

const math32Max = 1<<31 - 1
