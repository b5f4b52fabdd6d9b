package parquetfile

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func TestUnrepresentableValues(t *testing.T) {
	table := allTypes()
	s, err := NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ column, text string }{
		{"amount", "1.2345"},         // more fractional digits than the scale
		{"amount", "1234567890.000"}, // 10 integer digits in numeric(12,3)
		{"amount", "1e5"},
		{"amount", "12..3"},
		{"amount", ""},
		{"amount", "-"},
		{"d5", "1000.00"},
		{"d5", "0.001"},
		{"big", "10000000000000000000000000000"}, // 29 integer digits
		{"big", "0.00000000001"},
		{"mid", "1.5"},
		{"mid", "100000000000000000000"},
		{"small", "32768"},
		{"small", "-32769"},
		{"small", "1.0"},
		{"medium", "2147483648"},
		{"id", "9223372036854775808"},
		{"id", "-9223372036854775809"},
		{"id", ""},
		{"id", "12a"},
		{"id", " 1"},
		{"o", "-1"},
		{"o", "4294967296"},
		{"flag", "yes"},
		{"f4", "1e39"},
		{"f4", "abc"},
		{"f8", "1e400"},
		{"f8", ""},
		{"day", "2026-02-29"},
		{"day", "2026-13-01"},
		{"day", "0000-01-01 BC"},
		{"day", "26-11-29"},
		{"day", "9999999-01-01"},
		{"day", "12345678-01-01"},
		{"day", "2026-11-29 08:00:00"},
		{"ts", "2026-11-29 24:00:00"},
		{"ts", "2026-11-29 08:00:00.1234567"},
		{"ts", "2026-11-29 08:00:00."},
		{"ts", "2026-11-29 08:00:00+00"},
		{"ts", "2026-11-29T08:00:00"},
		{"tstz", "2026-11-29 08:00:00"},
		{"tstz", "2026-11-29 08:00:00+0"},
		{"tstz", "2026-11-29 08:00:00+05:3"},
		{"tstz", "2026-11-29 08:00:00+05:30 BC x"},
		{"u", "not-a-uuid"},
		{"u", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1"},
		{"u", "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}"},
		{"u", "a0eebc999c0b-4ef8-bb6d-6bb9bd380a11-"},
		{"blob", "0a0b"},
		{"blob", `\x0`},
		{"blob", `\xzz`},
		{"name", "\xff\xfe"},
		{"arr", "1,2"},
		{"arr", "{1,x}"},
		{"arr", "{1,2"},
		{"arr", "{\"1}"},
		{"arr", "[0:1]"},
		{"tm", "25:00:00"},
		{"tm", "12:00"},
		{"tm", "12:00:00.1234567"},
		{"j", "{\"a\": \"\xc3\x28\"}"},
	}
	for _, tc := range cases {
		t.Run(tc.column+"/"+tc.text, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf, s)
			values := make([]cdc.Datum, len(table.Columns))
			values[0] = cdc.Datum{Kind: cdc.DatumText, Text: []byte("1")}
			i := table.ColumnIndex(tc.column)
			values[i] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(tc.text)}
			err := w.Write(cdc.RowMeta{Op: cdc.OpInsert}, values)
			if !errors.Is(err, cdc.ErrData) {
				t.Fatalf("Write(%s=%q) = %v, want an error matching cdc.ErrData", tc.column, tc.text, err)
			}
			msg := err.Error()
			t.Log(msg)
			for _, want := range []string{"public.all_types", `"` + tc.column + `"`, table.Columns[i].PGType, s.ParquetType(i)} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not name %q", msg, want)
				}
			}
			var ve *ValueError
			if !errors.As(err, &ve) || ve.Column != tc.column || ve.Value != tc.text || ve.Table != table.ID {
				t.Errorf("error %#v does not carry the column and value", err)
			}
			if cdc.HintOf(err) == "" {
				t.Errorf("error %q has no operator hint", msg)
			}
			if w.Rows() != 0 {
				t.Errorf("Rows() = %d after a refused row", w.Rows())
			}
		})
	}
}

// A refused row is not written and the writer stays usable.
func TestWriterUsableAfterRefusedValue(t *testing.T) {
	table := allTypes()
	rows := allTypesRows()
	bad := testRow{meta: rows[0].meta, values: map[string]string{"id": "9", "name": "ok", "amount": "1e5"}}
	s, err := NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, s)
	if err := w.Write(bad.meta, datums(table, bad)); !errors.Is(err, cdc.ErrData) {
		t.Fatalf("Write(bad) = %v", err)
	}
	for _, r := range rows {
		if err := w.Write(r.meta, datums(table, r)); err != nil {
			t.Fatalf("Write after a refused row: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Rows() != int64(len(rows)) {
		t.Errorf("Rows() = %d, want %d", w.Rows(), len(rows))
	}
	path := t.TempDir() + "/f.parquet"
	if err := writeBytes(path, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	got := queryStrings(t, openDuckDB(t), "SELECT count(*), count(*) FILTER (WHERE id = 9) FROM read_parquet("+quoteLiteral(path)+")")
	if got[0][0] != "6" || got[0][1] != "0" {
		t.Errorf("count, count(id=9) = %v, want 6, 0", got[0])
	}
}

func TestErrorValueTruncated(t *testing.T) {
	table := allTypes()
	s, err := NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(&bytes.Buffer{}, s)
	values := make([]cdc.Datum, len(table.Columns))
	long := strings.Repeat("é", 1000) // 2 bytes a rune: the cut must not split one
	values[table.ColumnIndex("amount")] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(long)}
	err = w.Write(cdc.RowMeta{Op: cdc.OpInsert}, values)
	var ve *ValueError
	if !errors.As(err, &ve) {
		t.Fatalf("Write = %v, want a ValueError", err)
	}
	if len(ve.Value) > maxErrorValue+3 || !strings.HasSuffix(ve.Value, "...") || !strings.HasPrefix(ve.Value, "éé") {
		t.Errorf("Value = %q (%d bytes), want at most %d bytes ending in ...", ve.Value, len(ve.Value), maxErrorValue+3)
	}
	if len(err.Error()) > 400 {
		t.Errorf("error is %d bytes long: %s", len(err.Error()), err)
	}
}

func TestWriterCallerErrors(t *testing.T) {
	table := allTypes()
	s, err := NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(&bytes.Buffer{}, s)
	if err := w.Write(cdc.RowMeta{Op: cdc.OpInsert}, make([]cdc.Datum, 3)); err == nil || errors.Is(err, cdc.ErrData) {
		t.Errorf("Write with too few values = %v, want a non-data error", err)
	}
	if err := w.Write(cdc.RowMeta{Op: cdc.OpInsert}, nil); err == nil {
		t.Error("Write of an insert without values succeeded")
	}
	if err := w.Write(cdc.RowMeta{Op: 'X'}, make([]cdc.Datum, len(table.Columns))); err == nil {
		t.Error("Write with an unknown op succeeded")
	}
	if err := w.Write(cdc.RowMeta{Op: cdc.OpTruncate}, nil); err != nil {
		t.Errorf("Write of a truncate marker without values: %v", err)
	}
	odd := make([]cdc.Datum, len(table.Columns))
	odd[3].Kind = 9
	if err := w.Write(cdc.RowMeta{Op: cdc.OpInsert}, odd); err == nil || errors.Is(err, cdc.ErrData) {
		t.Errorf("Write with an unknown datum kind = %v, want a non-data error", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if err := w.Write(cdc.RowMeta{Op: cdc.OpTruncate}, nil); err == nil {
		t.Error("Write after Close succeeded")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterOutputErrorIsSticky(t *testing.T) {
	table := allTypes()
	s, err := NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(failingWriter{}, s)
	for _, r := range allTypesRows() {
		if err := w.Write(r.meta, datums(table, r)); err != nil {
			t.Fatalf("Write: %v (buffered rows should not touch the output)", err)
		}
	}
	err = w.Close()
	if err == nil || !strings.Contains(err.Error(), "disk full") || errors.Is(err, cdc.ErrData) {
		t.Fatalf("Close = %v, want the output's error", err)
	}
}

func TestNewSchemaRefusesBadNames(t *testing.T) {
	for _, names := range [][]string{{"a", "a"}, {"id", "__op"}, {"__unchanged"}, {""}} {
		table := &cdc.Table{ID: cdc.TableID{Schema: "s", Name: "t"}}
		for _, n := range names {
			table.Columns = append(table.Columns, cdc.Column{Name: n, TypeOID: oidText, TypeMod: -1})
		}
		if _, err := NewSchema(table); err == nil {
			t.Errorf("NewSchema(%q) succeeded", names)
		}
	}
	if _, err := NewSchema(nil); err == nil {
		t.Error("NewSchema(nil) succeeded")
	}
}
