package render

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestJSON: golden JSON of values of every type family, written by
// internal/parquetfile and read back; each is also valid JSON.
func TestJSON(t *testing.T) {
	for _, tc := range []struct {
		col      cdc.Column
		in, want string
	}{
		{scalarCol(oidBool, -1), "t", `true`},
		{scalarCol(oidBool, -1), "f", `false`},
		{scalarCol(oidInt2, -1), "-32768", `-32768`},
		{scalarCol(oidInt4, -1), "2147483647", `2147483647`},
		{scalarCol(oidInt8, -1), "-9223372036854775808", `-9223372036854775808`},
		{scalarCol(oidOID, -1), "4294967295", `4294967295`},
		{scalarCol(oidFloat8, -1), "1.5e+300", `1.5e+300`},
		{scalarCol(oidFloat8, -1), "0.1", `0.1`},
		{scalarCol(oidFloat8, -1), "-0", `-0`},
		{scalarCol(oidFloat8, -1), "5e-324", `5e-324`},
		{scalarCol(oidFloat8, -1), "NaN", `"NaN"`},
		{scalarCol(oidFloat8, -1), "Infinity", `"Infinity"`},
		{scalarCol(oidFloat4, -1), "-Infinity", `"-Infinity"`},
		{scalarCol(oidFloat4, -1), "1e+06", `1e+06`},
		{scalarCol(oidNumeric, numericMod(5, 2)), "1.50", `"1.50"`},
		{scalarCol(oidNumeric, numericMod(38, 10)), "-9999999999999999999999999999.9999999999", `"-9999999999999999999999999999.9999999999"`},
		{scalarCol(oidNumeric, numericMod(10, 2)), "NaN", `null`},
		{scalarCol(oidNumeric, -1), "NaN", `"NaN"`},
		{scalarCol(oidNumeric, -1), "3.14", `"3.14"`},
		{scalarCol(oidText, -1), "", `""`},
		{scalarCol(oidText, -1), "a\"b\\c\nd\te\x01<&>\u2028é😀", `"a\"b\\c\nd\te\u0001<&>\u2028é😀"`},
		{scalarCol(oidBytea, -1), `\x00ff`, `"\\x00ff"`},
		{scalarCol(oidUUID, -1), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`},
		{scalarCol(oidJSON, -1), `{"b": 1,  "a": [true, null], "b": 2}`, `{"b": 1,  "a": [true, null], "b": 2}`},
		{scalarCol(oidJSON, -1), "{\"a\":\n  [1,\r\n 2], \"s\": \"x\\ny\"}", `{"a":[1,2],"s":"x\ny"}`},
		{scalarCol(oidJSON, -1), `null`, `null`},
		{scalarCol(oidJSONB, -1), `123.450`, `123.450`},
		{scalarCol(oidDate, -1), "0044-03-15 BC", `"0044-03-15 BC"`},
		{scalarCol(oidDate, -1), "infinity", `"infinity"`},
		{scalarCol(oidTime, -1), "24:00:00", `"24:00:00"`},
		{scalarCol(oidTimeTZ, -1), "12:00:00+05:45", `"12:00:00+05:45"`},
		{scalarCol(oidTimestamp, -1), "2024-01-02 03:04:05.5", `"2024-01-02 03:04:05.5"`},
		{scalarCol(oidTimestampTZ, -1), "-infinity", `"-infinity"`},
		{scalarCol(oidTimestampTZ, -1), "2024-01-02 03:04:05.123456+00", `"2024-01-02 03:04:05.123456+00"`},
		{scalarCol(1186, -1), "-1 days +02:00:00", `"-1 days +02:00:00"`},
		{cdc.Column{TypeOID: oidMood, TypeMod: -1, EnumLabels: moodLabels}, "happy", `"happy"`},
		{scalarCol(oidInet, -1), "::1", `"::1"`},
		{arrayCol(1007, oidInt4, -1), "{1,NULL,-3}", `[1,null,-3]`},
		{arrayCol(1007, oidInt4, -1), "{}", `[]`},
		{arrayCol(1007, oidInt4, -1), "{NULL}", `[null]`},
		{arrayCol(1007, oidInt4, -1), "{{1,2},{3,4}}", `[1,2,3,4]`},
		{arrayCol(1009, oidText, -1), `{"a b","NULL",NULL,""}`, `["a b","NULL",null,""]`},
		{arrayCol(1022, oidFloat8, -1), "{1.5,NaN,-Infinity}", `[1.5,"NaN","-Infinity"]`},
		{arrayCol(1231, oidNumeric, numericMod(10, 2)), "{1.50,NaN}", `["1.50",null]`},
		{arrayCol(199, oidJSON, -1), "{\"{\\\"a\\\": 1}\",NULL,\"[1,\n2]\"}", `[{"a": 1},null,[1,2]]`},
		{arrayCol(1001, oidBytea, -1), `{"\\x00ff"}`, `["\\x00ff"]`},
		{arrayCol(1000, oidBool, -1), "{t,f}", `[true,false]`},
		{arrayCol(1187, 1186, -1), `{"-1 days +02:00:00"}`, `["-1 days +02:00:00"]`},
		{arrayCol(1182, oidDate, -1), `{infinity,"0001-01-01 BC"}`, `["infinity","0001-01-01 BC"]`},
	} {
		col := tc.col
		col.Name = "v"
		table := &cdc.Table{ID: cdc.TableID{Schema: "s", Name: "t"}, Columns: []cdc.Column{col}}
		data, mcols := writeParquet(t, table, [][]string{{tc.in}})
		tab, err := NewTable(mcols)
		if err != nil {
			t.Fatal(err)
		}
		row := readRows(t, data)[0]
		cols, err := tab.Split(row, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tab.AppendJSON(nil, 0, cols[0])
		if err != nil {
			t.Errorf("%s %q: %v", mcols[0].ParquetType, tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s %q: got %s, want %s", mcols[0].ParquetType, tc.in, got, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s %q: %s is not valid JSON", mcols[0].ParquetType, tc.in, got)
		}
	}
}

// TestJSONEveryCase: every value of every case renders as valid JSON on
// one line, and a JSON string's value is the text form.
func TestJSONEveryCase(t *testing.T) {
	table, rows := casesTable(typeCases)
	data, mcols := writeParquet(t, table, rows)
	tab, err := NewTable(mcols)
	if err != nil {
		t.Fatal(err)
	}
	for r, row := range readRows(t, data) {
		cols, err := tab.Split(row, nil)
		if err != nil {
			t.Fatal(err)
		}
		for c, vals := range cols {
			js, err := tab.AppendJSON(nil, c, vals)
			if err != nil {
				t.Fatalf("row %d column %s: %v", r+1, mcols[c].PGType, err)
			}
			if !json.Valid(js) || strings.ContainsAny(string(js), "\n\r") {
				t.Errorf("row %d column %s: %q is not one line of valid JSON", r+1, mcols[c].PGType, js)
			}
			text, null, _ := tab.Text(c, vals)
			var s string
			if tab.cols[c].kind != kindJSON && json.Unmarshal(js, &s) == nil && !null && s != text {
				t.Errorf("row %d column %s: JSON string %q, text %q", r+1, mcols[c].PGType, s, text)
			}
		}
	}
}
