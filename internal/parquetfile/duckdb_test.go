package parquetfile

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" driver

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// openDuckDB opens an in-memory DuckDB, the independent reader the files
// are checked with. Extensions are neither installed nor loaded on demand:
// parquet and json are linked in.
func openDuckDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "?autoinstall_known_extensions=false&autoload_known_extensions=false")
	if err != nil {
		t.Fatalf("open duckdb: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("SET TimeZone='UTC'"); err != nil {
		t.Fatalf("set duckdb time zone: %v", err)
	}
	return db
}

// writeFile writes rows of table t to a Parquet file in a temp dir and
// returns its path.
func writeFile(t testing.TB, table *cdc.Table, rows []testRow) string {
	t.Helper()
	s, err := NewSchema(table)
	if err != nil {
		t.Fatalf("NewSchema: %v", err)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, s)
	for _, r := range rows {
		if err := w.Write(r.meta, datums(table, r)); err != nil {
			t.Fatalf("Write %v: %v", r.meta, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if w.Rows() != int64(len(rows)) {
		t.Fatalf("Rows() = %d, want %d", w.Rows(), len(rows))
	}
	path := filepath.Join(t.TempDir(), "part-00000.parquet")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// queryStrings runs q and returns every row's columns rendered as strings,
// NULL as "NULL".
func queryStrings(t testing.TB, db *sql.DB, q string) [][]string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("scan %s: %v", q, err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = "NULL"
			if v.Valid {
				row[i] = v.String
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	return out
}

func TestDuckDBReadsTypes(t *testing.T) {
	table := allTypes()
	path := writeFile(t, table, allTypesRows())
	db := openDuckDB(t)
	from := " FROM read_parquet(" + quoteLiteral(path) + ")"

	want := [][2]string{
		{"__op", "VARCHAR"}, {"__lsn", "BIGINT"}, {"__seq", "BIGINT"}, {"__xid", "BIGINT"},
		{"__op_ts", "TIMESTAMP WITH TIME ZONE"}, {"__unchanged", "VARCHAR[]"},
		{"id", "BIGINT"}, {"flag", "BOOLEAN"}, {"small", "SMALLINT"}, {"medium", "INTEGER"},
		{"o", "BIGINT"}, {"f4", "FLOAT"}, {"f8", "DOUBLE"}, {"amount", "DECIMAL(12,3)"},
		{"d5", "DECIMAL(5,2)"}, {"big", "DECIMAL(38,10)"}, {"mid", "DECIMAL(20,0)"},
		{"free", "VARCHAR"}, {"name", "VARCHAR"}, {"vc", "VARCHAR"}, {"bp", "VARCHAR"},
		{"blob", "BLOB"}, {"day", "DATE"}, {"ts", "TIMESTAMP"}, {"tstz", "TIMESTAMP WITH TIME ZONE"},
		{"u", "UUID"}, {"j", "JSON"}, {"jb", "JSON"}, {"iv", "VARCHAR"}, {"arr", "INTEGER[]"}, {"tm", "TIME"},
	}
	got := queryStrings(t, db, "SELECT column_name, column_type FROM (DESCRIBE SELECT *"+from+")")
	if len(got) != len(want) {
		t.Fatalf("DESCRIBE gave %d columns, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i][0] != want[i][0] || got[i][1] != want[i][1] {
			t.Errorf("column %d: got %s %s, want %s %s", i, got[i][0], got[i][1], want[i][0], want[i][1])
		}
	}
}

func TestDuckDBSchemaOrderAndFieldIDs(t *testing.T) {
	table := allTypes()
	path := writeFile(t, table, allTypesRows()[:1])
	db := openDuckDB(t)
	got := queryStrings(t, db, "SELECT name, coalesce(CAST(field_id AS VARCHAR), '-') FROM parquet_schema("+quoteLiteral(path)+")")
	// The root comes first; the metadata columns carry their reserved ids
	// (icebergschema), the table's columns theirs, a LIST's element
	// ElementBase + its column's (the repeated "list" group has none).
	want := []string{"*", "__op 2000000001", "__lsn 2000000002", "__seq 2000000003", "__xid 2000000004", "__op_ts 2000000005",
		"__unchanged 2000000006", "list -", "element 2000000007"}
	for _, c := range table.Columns {
		want = append(want, c.Name+" "+strconv.Itoa(c.FieldID))
		if c.Name == "arr" {
			want = append(want, "list -", "element "+strconv.Itoa(1_000_000_000+c.FieldID))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("parquet_schema gave %d nodes, want %d: %v", len(got), len(want), got)
	}
	for i := 1; i < len(want); i++ {
		if g := got[i][0] + " " + got[i][1]; g != want[i] {
			t.Errorf("schema node %d: got %q, want %q", i, g, want[i])
		}
	}
}

// TestDuckDBIcebergFooter: the footer's iceberg.schema key is the Iceberg
// schema of the file's columns, ids as in the Parquet schema, which an
// Iceberg reader maps columns by (design.md §12).
func TestDuckDBIcebergFooter(t *testing.T) {
	table := allTypes()
	path := writeFile(t, table, allTypesRows()[:1])
	db := openDuckDB(t)
	got := queryStrings(t, db, "SELECT decode(value) FROM parquet_kv_metadata("+quoteLiteral(path)+") WHERE decode(key) = 'iceberg.schema'")
	if len(got) != 1 {
		t.Fatalf("iceberg.schema footer keys: %d, want 1", len(got))
	}
	var schema struct {
		Type     string `json:"type"`
		SchemaID int    `json:"schema-id"`
		Fields   []struct {
			ID       int             `json:"id"`
			Name     string          `json:"name"`
			Required bool            `json:"required"`
			Type     json.RawMessage `json:"type"`
		} `json:"fields"`
	}
	if err := json.Unmarshal([]byte(got[0][0]), &schema); err != nil {
		t.Fatalf("iceberg.schema: %v\n%s", err, got[0][0])
	}
	ids := map[string]string{}
	for _, r := range queryStrings(t, db, "SELECT name, CAST(field_id AS VARCHAR) FROM parquet_schema("+quoteLiteral(path)+") WHERE field_id IS NOT NULL AND name <> 'element'") {
		ids[r[0]] = r[1]
	}
	if schema.Type != "struct" || len(schema.Fields) != 6+len(table.Columns) || len(ids) != len(schema.Fields) {
		t.Fatalf("iceberg.schema: %s with %d fields, the file %d columns with ids:\n%s", schema.Type, len(schema.Fields), len(ids), got[0][0])
	}
	for _, f := range schema.Fields {
		if ids[f.Name] != strconv.Itoa(f.ID) {
			t.Errorf("field %s: id %d in iceberg.schema, %s in the Parquet schema", f.Name, f.ID, ids[f.Name])
		}
	}
	for name, want := range map[string]string{"__op": `"string"`, "__op_ts": `"timestamptz"`, "id": `"long"`} {
		for _, f := range schema.Fields {
			if f.Name == name && string(f.Type) != want {
				t.Errorf("field %s: type %s, want %s", name, f.Type, want)
			}
		}
	}
}

func TestDuckDBReadsValues(t *testing.T) {
	table := allTypes()
	path := writeFile(t, table, allTypesRows())
	db := openDuckDB(t)
	sel := []string{"__op", "__lsn", "__seq", "__xid", "CAST(__op_ts AS VARCHAR)", "CAST(__unchanged AS VARCHAR)"}
	for _, c := range table.Columns {
		sel = append(sel, `CAST("`+c.Name+`" AS VARCHAR)`)
	}
	got := queryStrings(t, db, "SELECT "+strings.Join(sel, ", ")+" FROM read_parquet("+quoteLiteral(path)+") ORDER BY __seq")
	meta := func(op string, seq int) []string {
		return []string{op, "23803720", strconv.Itoa(seq), "4294968046", "2026-11-29 08:00:00.123456+00"}
	}
	null := "NULL"
	want := [][]string{
		append(meta("I", 0), "[]", "1", "true", "-32768", "2147483647", "4294967295", "1.5", "1.5e+20",
			"-123.450", "999.99", "9999999999999999999999999999.9999999999", "-99999999999999999999",
			"3.14159265358979323846264338327950288419716939937510", "héllo wörld ✓ 😀", "", "ab ",
			`\x0A\x0B`, "2026-11-29", "2026-11-29 08:00:00.5", "2026-11-29 08:00:00.123456+00",
			"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `{"b": 1,  "a": [true, null]}`, `{"a": 1, "b": "x"}`,
			"1 year 2 mons 3 days 04:05:06.7", "[1, 2, NULL]"),
		append(meta("U", 1), "[]", "2", "false", "0", "-2147483648", "0", "nan", "-inf",
			"0.000", "-0.01", "-9999999999999999999999999999.9999999999", "0", "NaN", "", null, null,
			"", "0044-03-15 (BC)", "2026-11-29 08:00:00", "2026-11-29 08:00:00.5+00",
			"00000000-0000-0000-0000-000000000000", `"just a string"`, "[]", null, null),
		append(meta("I", 2), "[]", "3", null, null, null, null, "-inf", "inf",
			"999999999.999", "-999.99", "0.0000000001", "12345678901234567890", "-0.000", largeText, null, null,
			`\xDE\xAD\xBE\xEF\x00\xFF`, "12345-06-07", "0001-01-01 (BC) 00:00:00.000001", "1970-01-01 02:59:59.999999+00",
			null, null, null, null, null),
		append(meta("U", 3), "[name, j]", "1", null, null, null, null, null, "5e-324",
			"1.500", "7.00", null, null, null, null, null, null,
			null, null, "2026-11-29 08:00:00.12", "2026-11-29 08:00:00.1234+00",
			null, null, null, null, null),
		append(meta("D", 4), "[]", "2", null, null, null, null, null, null,
			null, null, null, null, null, null, null, null,
			null, null, null, null, null, null, null, null, null),
		append(meta("T", 5), "[]", null, null, null, null, null, null, null,
			null, null, null, null, null, null, null, null,
			null, null, null, null, null, null, null, null, null),
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	names := append([]string{"__op", "__lsn", "__seq", "__xid", "__op_ts", "__unchanged"}, columnNames(table)...)
	for r := range want {
		for c := range want[r] {
			if got[r][c] != want[r][c] {
				t.Errorf("row %d column %s: got %.80q, want %.80q", r, names[c], got[r][c], want[r][c])
			}
		}
	}

	// Floats keep their exact bits, NaN and infinities included.
	var f4 float32
	var f8 float64
	if err := db.QueryRow("SELECT f4, f8 FROM read_parquet("+quoteLiteral(path)+") WHERE __seq = 1").Scan(&f4, &f8); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(f4)) || !math.IsInf(f8, -1) {
		t.Errorf("f4, f8 = %v, %v; want NaN, -Inf", f4, f8)
	}
}

func columnNames(t *cdc.Table) []string {
	out := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = c.Name
	}
	return out
}

// Flushing by size splits a file into row groups that read back whole.
func TestMultipleRowGroups(t *testing.T) {
	s, err := NewSchema(benchTable())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf, s)
	w.budget = 64 << 10
	var rows benchRows
	const n = 20_000
	for i := int64(0); i < n; i++ {
		if err := w.Write(cdc.RowMeta{Op: cdc.OpInsert, Seq: i}, rows.fill(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f.parquet")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	db := openDuckDB(t)
	got := queryStrings(t, db, "SELECT count(*), CAST(sum(id) AS VARCHAR), count(DISTINCT customer), CAST(min(amount) AS VARCHAR), CAST(max(created_at) AS VARCHAR) FROM read_parquet("+quoteLiteral(path)+")")
	want := []string{"20000", "199990000", "20000", "0.000", "2026-11-29 05:33:19.019999+00"}
	if strings.Join(got[0], "|") != strings.Join(want, "|") {
		t.Errorf("aggregates = %v, want %v", got[0], want)
	}
	groups := queryStrings(t, db, "SELECT count(DISTINCT row_group_id) FROM parquet_metadata("+quoteLiteral(path)+")")
	if groups[0][0] == "1" {
		t.Errorf("one row group; the size budget did not flush")
	}
	t.Logf("%s row groups", groups[0][0])
}

// Column chunk statistics: kept for fixed-size types and for key columns,
// left out for other byte-array columns (whose bounds parquet-go would hold
// in memory whole).
func TestStatistics(t *testing.T) {
	table := allTypes()
	table.PrimaryKey = []string{"id", "vc"}
	path := writeFile(t, table, allTypesRows())
	got := queryStrings(t, openDuckDB(t), "SELECT path_in_schema, coalesce(stats_min_value, 'NULL'), coalesce(stats_max_value, 'NULL') FROM parquet_metadata("+quoteLiteral(path)+")")
	stats := map[string][2]string{}
	for _, r := range got {
		stats[r[0]] = [2]string{r[1], r[2]}
	}
	for name, want := range map[string][2]string{
		"id":     {"1", "3"},
		"vc":     {"", ""},
		"amount": {"-123.450", "999999999.999"},
		"__lsn":  {"23803720", "23803720"},
		"name":   {"NULL", "NULL"},
		"blob":   {"NULL", "NULL"},
		"j":      {"NULL", "NULL"},
	} {
		if stats[name] != want {
			t.Errorf("statistics of %s = %q, want %q", name, stats[name], want)
		}
	}
}

// TestOpPositions: the positions of a file's rows by __op, as DuckDB
// numbers them (file_row_number), across row groups.
func TestOpPositions(t *testing.T) {
	table := allTypes()
	rows := allTypesRows()
	path := writeFile(t, table, rows)
	db := openDuckDB(t)
	var want []string
	for _, r := range queryStrings(t, db, "SELECT CAST(file_row_number AS VARCHAR) FROM read_parquet("+quoteLiteral(path)+", file_row_number = true) WHERE __op = 'D' ORDER BY file_row_number") {
		want = append(want, r[0])
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	got, err := OpPositions(f, st.Size(), "D")
	if err != nil {
		t.Fatal(err)
	}
	var gs []string
	for _, p := range got {
		gs = append(gs, strconv.FormatInt(p, 10))
	}
	if len(want) == 0 || strings.Join(gs, ",") != strings.Join(want, ",") {
		t.Errorf("D rows at %v, DuckDB says %v", gs, want)
	}
}
