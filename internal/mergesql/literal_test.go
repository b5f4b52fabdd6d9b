package mergesql

import (
	"database/sql"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// TestMissingValueLiterals: a column's missing value (PostgreSQL text, as
// ADD COLUMN's DEFAULT left it) goes through the writer's own conversion
// and comes out of DuckDB as the value the files would hold.
func TestMissingValueLiterals(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, c := range []struct {
		col  cdc.Column
		text *string
		want string // CAST(… AS VARCHAR) in DuckDB
	}{
		{cdc.Column{TypeOID: 16, TypeMod: -1, PGType: "boolean"}, ptr("t"), "true"},
		{cdc.Column{TypeOID: 21, TypeMod: -1, PGType: "smallint"}, ptr("-7"), "-7"},
		{cdc.Column{TypeOID: 20, TypeMod: -1, PGType: "bigint"}, ptr("9007199254740993"), "9007199254740993"},
		{cdc.Column{TypeOID: 701, TypeMod: -1, PGType: "double precision"}, ptr("-Infinity"), "-inf"},
		{cdc.Column{TypeOID: 700, TypeMod: -1, PGType: "real"}, ptr("1.5"), "1.5"},
		{cdc.Column{TypeOID: 1700, TypeMod: (12<<16 | 3) + 4, PGType: "numeric(12,3)"}, ptr("-0.042"), "-0.042"},
		{cdc.Column{TypeOID: 1700, TypeMod: (38<<16 | 2) + 4, PGType: "numeric(38,2)"}, ptr("123456789012345678901234567890123.45"), "123456789012345678901234567890123.45"},
		{cdc.Column{TypeOID: 25, TypeMod: -1, PGType: "text"}, ptr("it's"), "it's"},
		{cdc.Column{TypeOID: 17, TypeMod: -1, PGType: "bytea"}, ptr(`\x00ff41`), `\x00\xFFA`},
		{cdc.Column{TypeOID: 1082, TypeMod: -1, PGType: "date"}, ptr("2026-12-01"), "2026-12-01"},
		{cdc.Column{TypeOID: 1083, TypeMod: -1, PGType: "time"}, ptr("12:34:56.789012"), "12:34:56.789012"},
		{cdc.Column{TypeOID: 1114, TypeMod: -1, PGType: "timestamp"}, ptr("2026-12-01 08:00:00.5"), "2026-12-01 08:00:00.5"},
		{cdc.Column{TypeOID: 1184, TypeMod: -1, PGType: "timestamp with time zone"}, ptr("2026-12-01 08:00:00+05:45"), "2026-12-01 02:15:00+00"},
		{cdc.Column{TypeOID: 2950, TypeMod: -1, PGType: "uuid"}, ptr("3a8f6a8e-3e4b-4a3f-9d1e-2d3a4b5c6d7e"), "3a8f6a8e-3e4b-4a3f-9d1e-2d3a4b5c6d7e"},
		{cdc.Column{TypeOID: 3802, TypeMod: -1, PGType: "jsonb"}, ptr(`{"a": 1}`), `{"a": 1}`},
		{cdc.Column{TypeOID: 1007, TypeMod: -1, PGType: "integer[]", ElemTypeOID: 23}, ptr("{1,NULL,3}"), "[1, NULL, 3]"},
		{cdc.Column{TypeOID: 1009, TypeMod: -1, PGType: "text[]", ElemTypeOID: 25}, ptr("{}"), "[]"},
		{cdc.Column{TypeOID: 20, TypeMod: -1, PGType: "bigint"}, nil, "NULL"},
	} {
		c.col.Name, c.col.FieldID = "x", 1
		tbl := &cdc.Table{ID: cdc.TableID{Schema: "s", Name: "t"}, Columns: []cdc.Column{c.col}}
		schema, err := parquetfile.NewSchema(tbl)
		if err != nil {
			t.Fatal(err)
		}
		pt := schema.ParquetType(0)
		vals, err := schema.ColumnValues(0, c.text)
		if err != nil {
			t.Fatalf("%s: %v", c.col.PGType, err)
		}
		lit, err := literalOf(pt, vals)
		if err != nil {
			t.Fatalf("%s: %v", c.col.PGType, err)
		}
		dt, err := DuckType(pt)
		if err != nil {
			t.Fatal(err)
		}
		var got sql.NullString
		if err := db.QueryRow("SELECT CAST(CAST(" + lit + " AS " + dt + ") AS VARCHAR)").Scan(&got); err != nil {
			t.Fatalf("%s: %s: %v", c.col.PGType, lit, err)
		}
		if g := got.String; !got.Valid {
			g = "NULL"
			got.String = g
		}
		if got.String != c.want {
			t.Errorf("%s %v: %s reads %q, want %q", c.col.PGType, deref(c.text), lit, got.String, c.want)
		}
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
