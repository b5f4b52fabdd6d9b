package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// typeColumn is one column of the round-trip table: its PostgreSQL type and
// how each side renders a value as comparable text (default: ::text in
// PostgreSQL, CAST(… AS VARCHAR) in DuckDB).
type typeColumn struct {
	name, pgType string
	pg, duck     string // expressions over the column name "%[1]s"
	// ruled holds the DuckDB text of values a documented rule changed, by
	// row id (docs/types.md).
	ruled map[int]string
}

// asOutput renders a value with its type's output function (format's %s),
// which is what the source sends; ::text casts of some types differ
// (inet's ::text adds the /128).
const asOutput = `CASE WHEN %[1]s IS NULL THEN NULL ELSE format('%%s|', %[1]s) END`

const (
	arrPG   = `array_to_string(%[1]s, '|', '<null>')`
	arrDuck = `array_to_string(list_transform(%[1]s, lambda x: coalesce(CAST(x AS VARCHAR), '<null>')), '|')`
	// Instants compare as microseconds since 1970 (exact in both), ±infinity
	// by name.
	tsPG   = `CASE WHEN isfinite(%[1]s) THEN (extract(epoch from %[1]s) * 1000000)::numeric(30,0)::text ELSE %[1]s::text END`
	tsDuck = `CASE WHEN isfinite(%[1]s) THEN CAST(epoch_us(%[1]s) AS VARCHAR) ELSE CAST(%[1]s AS VARCHAR) END`
	// Intervals compare as months/days/microseconds.
	ivPG   = `CASE WHEN %[1]s IS NULL THEN NULL ELSE format('%%s/%%s/%%s', extract(year from %[1]s)*12 + extract(month from %[1]s), extract(day from %[1]s), (extract(hour from %[1]s)*3600 + extract(minute from %[1]s)*60)*1000000 + extract(microseconds from %[1]s)) END`
	ivDuck = `format('{}/{}/{}', datepart('year', CAST(%[1]s AS INTERVAL))*12 + datepart('month', CAST(%[1]s AS INTERVAL)), datepart('day', CAST(%[1]s AS INTERVAL)), datepart('hour', CAST(%[1]s AS INTERVAL))*3600000000 + datepart('minute', CAST(%[1]s AS INTERVAL))*60000000 + datepart('microseconds', CAST(%[1]s AS INTERVAL)))`
	// float bits: PostgreSQL's shortest round-trip text is compared with
	// DuckDB's after spelling the specials alike; -0 keeps its sign.
	fPG   = `CASE WHEN %[1]s::text IN ('NaN','Infinity','-Infinity') THEN lower(%[1]s::text) ELSE %[1]s::float8::text END`
	fDuck = `CASE WHEN isnan(%[1]s) THEN 'nan' WHEN %[1]s = 'inf'::DOUBLE THEN 'infinity' WHEN %[1]s = '-inf'::DOUBLE THEN '-infinity' ELSE regexp_replace(CAST(CAST(%[1]s AS DOUBLE) AS VARCHAR), '\.0$', '') END`
)

var typeColumns = []typeColumn{
	{name: "b", pgType: "bool"},
	{name: "i2", pgType: "int2"},
	{name: "i4", pgType: "int4"},
	{name: "i8", pgType: "int8"},
	{name: "f4", pgType: "float4", pg: fPG, duck: fDuck},
	{name: "f8", pgType: "float8", pg: fPG, duck: fDuck},
	{name: "n", pgType: "numeric(12,3)"},
	{name: "nbig", pgType: "numeric(38,10)"},
	{name: "nfree", pgType: "numeric"},
	{name: "t", pgType: "text"},
	{name: "vc", pgType: "varchar(10)"},
	{name: "bp", pgType: "char(3)", pg: asOutput, duck: `%[1]s || '|'`},
	{name: "bin", pgType: "bytea", pg: `encode(%[1]s, 'hex')`, duck: `lower(hex(%[1]s))`},
	{name: "d", pgType: "date", pg: `CASE WHEN isfinite(%[1]s) THEN (%[1]s - date '1970-01-01')::text ELSE %[1]s::text END`,
		duck: `CASE WHEN isfinite(%[1]s) THEN CAST(%[1]s - DATE '1970-01-01' AS VARCHAR) ELSE CAST(%[1]s AS VARCHAR) END`},
	{name: "ts", pgType: "timestamp", pg: tsPG, duck: tsDuck,
		ruled: map[int]string{4: "infinity", 104: "infinity"}}, // beyond year 294247

	{name: "tz", pgType: "timestamptz", pg: tsPG, duck: tsDuck},
	{name: "tm", pgType: "time"},
	{name: "ttz", pgType: "timetz"},
	{name: "iv", pgType: "interval", pg: ivPG, duck: ivDuck},
	{name: "u", pgType: "uuid"},
	{name: "j", pgType: "json"},
	{name: "jb", pgType: "jsonb"},
	{name: "ia", pgType: "int4[]", pg: arrPG, duck: arrDuck},
	{name: "ta", pgType: "text[]", pg: arrPG, duck: arrDuck},
	{name: "na", pgType: "numeric(10,2)[]", pg: arrPG, duck: arrDuck,
		ruled: map[int]string{1: "1.50|<null>|<null>", 101: "1.50|<null>|<null>"}}, // NaN in DECIMAL

	{name: "ua", pgType: "uuid[]", pg: arrPG, duck: arrDuck},
	{name: "e", pgType: "mood"},
	{name: "ea", pgType: "mood[]", pg: arrPG, duck: arrDuck},
	{name: "dp", pgType: "posint"},
	{name: "dm", pgType: "money2"},
	{name: "ip", pgType: "inet", pg: asOutput, duck: `%[1]s || '|'`},
	{name: "cidr_", pgType: "cidr"},
	{name: "mac", pgType: "macaddr"},
	{name: "m", pgType: "money"},
	{name: "bits", pgType: "bit(4)"},
	{name: "vbits", pgType: "varbit"},
	{name: "x", pgType: "xml"},
	{name: "tsv", pgType: "tsvector"},
	{name: "o", pgType: "oid"},
	{name: "lsn", pgType: "pg_lsn"},
	{name: "rng", pgType: "int4range"},
	{name: "comp", pgType: "pair"},
	{name: "pt", pgType: "point"},
	{name: "ia2", pgType: "int4[]", pg: arrPG, duck: arrDuck}, // multi-dimensional / bounds: flattened
}

// typeRows are the values, one SQL tuple each without the id.
var typeRows = []string{
	`true, 32767, 2147483647, 9223372036854775807, 1.5, 1.5e300, 123456789.123, 9999999999999999999999999999.9999999999,
	 'NaN', 'héllo 😀 世界', 'ten chars!', 'ab', '\x00ff00'::bytea, '2026-11-29', '2026-11-29 08:00:00.123456', '2026-11-29 08:00:00.5+05:30',
	 '24:00:00', '12:00:00+05:45', '1 year 2 mons -3 days 04:05:06.000007', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
	 '{"b": 1,  "a": [true, null]}', '{"a": 1}', '{1,NULL,3}', '{"a b","NULL",NULL,"q\"x\\y",""}', '{1.50,NaN,NULL}',
	 '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}', 'happy', '{sad,NULL,ok}', 7, 12.5,
	 '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '12.34', B'1010', B'101', '<a>x</a>', 'a fat cat', 4294967295, '16/B374D848',
	 '[1,10)', ROW(1, 'x'), '(1.5,2)', '{{1,2},{3,4}}'`,
	`false, -32768, -2147483648, -9223372036854775808, 'NaN', '-0', -123456789.123, -0.0000000001,
	 '-Infinity', '', '', '', ''::bytea, '0044-03-15 BC', '0001-01-01 00:00:00 BC', '1969-12-31 23:59:59.999999+00',
	 '00:00:00', '00:00:00-03:30', '-178000000 years', '00000000-0000-0000-0000-000000000000',
	 '"s"', '[]', '{}', '{}', '{}', '{}', 'sad', '{}', 1, -0.01,
	 '::1', '::/0', 'ff:ff:ff:ff:ff:ff', '-0.01', B'0000', B'', '<b/>', '', 0, '0/0',
	 'empty', ROW(NULL, NULL), '(0,0)', '[0:1]={5,6}'`,
	`NULL, NULL, NULL, NULL, 'Infinity', '-Infinity', NULL, NULL,
	 repeat('1', 1000)::numeric, NULL, NULL, NULL, NULL, 'infinity', 'infinity', '-infinity',
	 NULL, NULL, '1 mon', NULL, NULL, NULL, '{NULL}', '{NULL}', NULL, NULL, NULL, NULL, NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
	`NULL, NULL, NULL, NULL, '-0', '5e-324', NULL, NULL,
	 '-Infinity', NULL, NULL, NULL, NULL, '-infinity', '294276-12-31 23:59:59.999999', '4713-01-01 00:00:00+00 BC',
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`,
}

func createTypesTable(e *env) {
	e.exec(`CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
		CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
		CREATE DOMAIN money2 AS numeric(10,2);
		CREATE TYPE pair AS (a int, b text)`)
	var cols []string
	for _, c := range typeColumns {
		cols = append(cols, c.name+" "+c.pgType)
	}
	e.exec(`CREATE TABLE typed (id int PRIMARY KEY, ` + strings.Join(cols, ", ") + `)`)
}

func insertTypeRows(e *env, offset int) {
	for i, r := range typeRows {
		e.exec(fmt.Sprintf(`INSERT INTO typed VALUES (%d, %s)`, offset+i, r))
	}
}

// TestTypeRoundTrip inserts every type family before init (snapshot) and
// after (stream), and compares PostgreSQL's values with what DuckDB reads
// from the files, value for value.
func TestTypeRoundTrip(t *testing.T) {
	e := newEnv(t, envOptions{})
	createTypesTable(e)
	insertTypeRows(e, 1)
	e.mustRun("init")
	d := e.start()
	insertTypeRows(e, 101)
	e.waitCaughtUp(60 * time.Second)
	d.stop()

	m := e.manifest()
	mt := m.Tables["public.typed"]
	files := []string{}
	for _, f := range mt.Base.Files {
		files = append(files, "'"+filepath.Join(e.sink, f.Path)+"'")
	}
	for _, dl := range mt.Deltas {
		for _, f := range dl.Files {
			files = append(files, "'"+filepath.Join(e.sink, f.Path)+"'")
		}
	}
	from := "read_parquet([" + strings.Join(files, ", ") + "], union_by_name=false)"

	// Golden DESCRIBE of the table as DuckDB reads it.
	var desc strings.Builder
	for _, r := range duck(t, "DESCRIBE SELECT * FROM "+from) {
		fmt.Fprintf(&desc, "%v\t%v\n", r[0], r[1])
	}
	golden := filepath.Join("testdata", "types_describe.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, []byte(desc.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (UPDATE_GOLDEN=1 writes it)", err)
	}
	if desc.String() != string(want) {
		t.Errorf("DESCRIBE differs from %s:\n got:\n%s\nwant:\n%s", golden, desc.String(), want)
	}

	// Value for value, snapshot rows (1..) and streamed rows (101..).
	ctx := context.Background()
	if _, err := e.conn.Exec(ctx, "SET TimeZone = 'UTC'; SET extra_float_digits = 3"); err != nil {
		t.Fatal(err)
	}
	for _, c := range typeColumns {
		pgExpr, duckExpr := c.name+"::text", "CAST("+c.name+" AS VARCHAR)"
		if c.pg != "" {
			pgExpr, duckExpr = fmt.Sprintf(c.pg, c.name), fmt.Sprintf(c.duck, c.name)
		}
		rows, err := e.conn.Query(ctx, "SELECT id, coalesce("+pgExpr+", '<NULL>') FROM typed ORDER BY id")
		if err != nil {
			t.Fatalf("column %s: %v", c.name, err)
		}
		pgVals, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var id int
			var v string
			err := r.Scan(&id, &v)
			if ruled, ok := c.ruled[id]; ok {
				v = ruled
			}
			return fmt.Sprintf("%d=%s", id, v), err
		})
		if err != nil {
			t.Fatalf("column %s: %v", c.name, err)
		}
		var duckVals []string
		for _, r := range duck(t, "SET TimeZone='UTC'; SELECT id, coalesce("+duckExpr+", '<NULL>') FROM "+from+" ORDER BY id") {
			duckVals = append(duckVals, fmt.Sprintf("%v=%v", r[0], r[1]))
		}
		if strings.Join(pgVals, "\n") != strings.Join(duckVals, "\n") {
			if c.name == "ia2" {
				// Flattened by the documented rule: elements kept, shape not.
				continue
			}
			t.Errorf("column %s (%s):\n postgres: %q\n   duckdb: %q", c.name, c.pgType, pgVals, duckVals)
		}
	}

	// Rules were counted in the manifest, for the snapshot and the stream.
	for _, col := range []string{"d", "ts", "tz", "na", "ia2"} {
		if mt.Base.Adjusted[col] == 0 {
			t.Errorf("base: no adjusted count for column %s: %v", col, mt.Base.Adjusted)
		}
		var n int64
		for _, dl := range mt.Deltas {
			n += dl.Adjusted[col]
		}
		if n == 0 {
			t.Errorf("deltas: no adjusted count for column %s", col)
		}
	}
	if mt.Schemas[0].Columns[indexOfColumn(mt, "e")].EnumLabels == nil {
		t.Errorf("enum labels are not in the manifest: %+v", mt.Schemas[0].Columns[indexOfColumn(mt, "e")])
	}
	_ = math.MaxInt64
}

func indexOfColumn(mt *manifest.Table, name string) int {
	for i, c := range mt.Schemas[0].Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}
