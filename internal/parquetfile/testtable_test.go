package parquetfile

import (
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// numericMod is PostgreSQL's typmod of numeric(p,s).
func numericMod(p, s int) int32 { return int32(p<<16|s) + varhdrsz }

// allTypes is a table with every mapped type, its columns deliberately not in
// alphabetical order, plus two types that fall back to text.
func allTypes() *cdc.Table {
	cols := []cdc.Column{
		{Name: "id", TypeOID: oidInt8, TypeMod: -1, PGType: "bigint", NotNull: true},
		{Name: "flag", TypeOID: oidBool, TypeMod: -1, PGType: "boolean"},
		{Name: "small", TypeOID: oidInt2, TypeMod: -1, PGType: "smallint"},
		{Name: "medium", TypeOID: oidInt4, TypeMod: -1, PGType: "integer"},
		{Name: "o", TypeOID: oidOID, TypeMod: -1, PGType: "oid"},
		{Name: "f4", TypeOID: oidFloat4, TypeMod: -1, PGType: "real"},
		{Name: "f8", TypeOID: oidFloat8, TypeMod: -1, PGType: "double precision"},
		{Name: "amount", TypeOID: oidNumeric, TypeMod: numericMod(12, 3), PGType: "numeric(12,3)"},
		{Name: "d5", TypeOID: oidNumeric, TypeMod: numericMod(5, 2), PGType: "numeric(5,2)"},
		{Name: "big", TypeOID: oidNumeric, TypeMod: numericMod(38, 10), PGType: "numeric(38,10)"},
		{Name: "mid", TypeOID: oidNumeric, TypeMod: numericMod(20, 0), PGType: "numeric(20,0)"},
		{Name: "free", TypeOID: oidNumeric, TypeMod: -1, PGType: "numeric"},
		{Name: "name", TypeOID: oidText, TypeMod: -1, PGType: "text"},
		{Name: "vc", TypeOID: oidVarchar, TypeMod: 14, PGType: "character varying(10)"},
		{Name: "bp", TypeOID: oidBPChar, TypeMod: 7, PGType: "character(3)"},
		{Name: "blob", TypeOID: oidBytea, TypeMod: -1, PGType: "bytea"},
		{Name: "day", TypeOID: oidDate, TypeMod: -1, PGType: "date"},
		{Name: "ts", TypeOID: oidTimestamp, TypeMod: -1, PGType: "timestamp without time zone"},
		{Name: "tstz", TypeOID: oidTimestampTZ, TypeMod: -1, PGType: "timestamp with time zone"},
		{Name: "u", TypeOID: oidUUID, TypeMod: -1, PGType: "uuid"},
		{Name: "j", TypeOID: oidJSON, TypeMod: -1, PGType: "json"},
		{Name: "jb", TypeOID: oidJSONB, TypeMod: -1, PGType: "jsonb"},
		{Name: "iv", TypeOID: 1186, TypeMod: -1, PGType: "interval"},
		{Name: "arr", TypeOID: 1007, TypeMod: -1, PGType: "integer[]"},
		{Name: "tm", TypeOID: oidTime, TypeMod: -1, PGType: "time without time zone"},
	}
	for i := range cols {
		cols[i].FieldID = i + 1
	}
	return &cdc.Table{
		ID:              cdc.TableID{Schema: "public", Name: "all_types"},
		OID:             16384,
		Columns:         cols,
		PrimaryKey:      []string{"id"},
		ReplicaIdentity: cdc.ReplicaIdentityDefault,
	}
}

// testRow is one row for allTypes: its meta and its values by column name;
// a missing name is NULL, unchangedMark is an unchanged TOAST value.
type testRow struct {
	meta   cdc.RowMeta
	values map[string]string
}

const unchangedMark = "\x00unchanged"

var largeText = strings.Repeat("ü large text ", 100_000) // ~1.4 MB

func commitTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func allTypesRows() []testRow {
	ts := commitTime("2026-11-29T08:00:00.123456Z")
	meta := func(op cdc.Op, seq int64) cdc.RowMeta {
		return cdc.RowMeta{Op: op, LSN: 0x16B3748, Seq: seq, XID: 1<<32 + 750, CommitTime: ts}
	}
	return []testRow{
		{meta(cdc.OpInsert, 0), map[string]string{
			"id": "1", "flag": "t", "small": "-32768", "medium": "2147483647", "o": "4294967295",
			"f4": "1.5", "f8": "1.5e+20", "amount": "-123.450", "d5": "999.99",
			"big": "9999999999999999999999999999.9999999999", "mid": "-99999999999999999999",
			"free": "3.14159265358979323846264338327950288419716939937510",
			"name": "héllo wörld ✓ 😀", "vc": "", "bp": "ab ", "blob": `\x0a0b`,
			"day": "2026-11-29", "ts": "2026-11-29 08:00:00.5", "tstz": "2026-11-29 08:00:00.123456+00",
			"u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": `{"b": 1,  "a": [true, null]}`,
			"jb": `{"a": 1, "b": "x"}`, "iv": "1 year 2 mons 3 days 04:05:06.7", "arr": "{1,2,NULL}",
		}},
		{meta(cdc.OpUpdate, 1), map[string]string{
			"id": "2", "flag": "f", "small": "0", "medium": "-2147483648", "o": "0",
			"f4": "NaN", "f8": "-Infinity", "amount": "0.000", "d5": "-0.01",
			"big": "-9999999999999999999999999999.9999999999", "mid": "0",
			"free": "NaN", "name": "", "blob": `\x`,
			"day": "0044-03-15 BC", "ts": "2026-11-29 08:00:00", "tstz": "2026-11-29 13:30:00.5+05:30",
			"u": "00000000-0000-0000-0000-000000000000", "j": `"just a string"`, "jb": `[]`,
		}},
		{meta(cdc.OpInsert, 2), map[string]string{
			"id": "3", "f4": "-Infinity", "f8": "Infinity", "amount": "999999999.999", "d5": "-999.99",
			"big": "0.0000000001", "mid": "12345678901234567890", "free": "-0.000",
			"name": largeText, "blob": `\xdeadbeef00ff`,
			"day": "12345-06-07", "ts": "0001-01-01 00:00:00.000001 BC", "tstz": "1969-12-31 23:59:59.999999-03",
		}},
		{meta(cdc.OpUpdate, 3), map[string]string{
			"id": "1", "name": unchangedMark, "j": unchangedMark, "amount": "1.5", "d5": "7",
			"ts": "2026-11-29 08:00:00.12", "tstz": "2026-11-29 08:00:00.1234+00", "f8": "4.9406564584124654e-324",
		}},
		{meta(cdc.OpDelete, 4), map[string]string{"id": "2"}},
		{meta(cdc.OpTruncate, 5), nil},
	}
}

// datums renders a testRow as the values Write takes.
func datums(t *cdc.Table, r testRow) []cdc.Datum {
	if r.meta.Op == cdc.OpTruncate {
		return nil
	}
	out := make([]cdc.Datum, len(t.Columns))
	for i, c := range t.Columns {
		v, ok := r.values[c.Name]
		switch {
		case !ok:
			out[i] = cdc.Datum{Kind: cdc.DatumNull}
		case v == unchangedMark:
			out[i] = cdc.Datum{Kind: cdc.DatumUnchanged}
		default:
			out[i] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(v)}
		}
	}
	return out
}
