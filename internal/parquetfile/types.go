package parquetfile

import (
	"bytes"

	"github.com/parquet-go/parquet-go"
)

// More type OIDs with a mapping of their own (pg_type.dat).
const (
	oidTime     = 1083
	oidTimeTZ   = 1266
	oidInterval = 1186
	oidBox      = 603
)

// ReprString is the per-column override that stores PostgreSQL's text form
// as a STRING whatever the type (config types: "string").
const ReprString = "string"

// Representations lists the overrides a column may choose.
var Representations = []string{ReprString}

// builtinArrayElem maps the built-in array types to their element types. The
// source adapter resolves every array's element from the catalog
// (cdc.Column.ElemTypeOID); this table serves columns described without it.
var builtinArrayElem = map[uint32]uint32{
	1000: oidBool, 1001: oidBytea, 1002: oidChar, 1003: oidName, 1016: oidInt8,
	1005: oidInt2, 1007: oidInt4, 1009: oidText, 1028: oidOID, 199: oidJSON,
	1021: oidFloat4, 1022: oidFloat8, 1014: oidBPChar, 1015: oidVarchar,
	1182: oidDate, 1183: oidTime, 1115: oidTimestamp, 1185: oidTimestampTZ,
	1270: oidTimeTZ, 1187: oidInterval, 1231: oidNumeric, 2951: oidUUID,
	3807: oidJSONB,
}

// Definition levels of an array column, Optional(List(Optional(element))).
const (
	listEmptyDef   = 1
	listNullDef    = 2
	listElementDef = 3
)

// scalarMapping is the Parquet leaf, type name and converter of a value of
// type oid with typmod mod (domains already resolved). enum says the type is
// an enum. Types without a typed mapping keep PostgreSQL's text form.
func scalarMapping(oid uint32, mod int32, enum bool) (parquet.Node, string, converter) {
	if enum {
		// DuckDB reads the ENUM annotation as VARCHAR; the labels are in
		// the manifest (enum_labels).
		return parquet.Enum(), "ENUM", convText
	}
	switch oid {
	case oidBool:
		return parquet.Leaf(parquet.BooleanType), "BOOLEAN", convBool
	case oidInt2:
		return parquet.Int(16), "INT16", convInt16
	case oidInt4:
		return parquet.Int(32), "INT32", convInt32
	case oidInt8:
		return parquet.Int(64), "INT64", convInt64
	case oidOID:
		// oid is unsigned 32-bit. INT64 holds it exactly and, unlike
		// INT(32, unsigned), maps to Iceberg, which has no unsigned types.
		return parquet.Int(64), "INT64", convOID
	case oidFloat4:
		return parquet.Leaf(parquet.FloatType), "FLOAT", convFloat4
	case oidFloat8:
		return parquet.Leaf(parquet.DoubleType), "DOUBLE", convFloat8
	case oidNumeric:
		if p, s, ok := numericTypmod(mod); ok {
			leaf, conv := decimalNode(p, s)
			return leaf, decimalName(p, s), conv
		}
		// Unconstrained numeric (or beyond DECIMAL's reach): PostgreSQL's
		// exact text, never a lossy double.
		return parquet.String(), "STRING", convText
	case oidBytea:
		return parquet.Leaf(parquet.ByteArrayType), "BINARY", convBytea
	case oidDate:
		return parquet.Date(), "DATE", convDate
	case oidTime:
		return parquet.TimeAdjusted(parquet.Microsecond, false), "TIME(us)", convTime
	case oidTimestamp:
		return parquet.TimestampAdjusted(parquet.Microsecond, false), "TIMESTAMP(us)", convTimestamp
	case oidTimestampTZ:
		return parquet.TimestampAdjusted(parquet.Microsecond, true), "TIMESTAMP(us,UTC)", convTimestampTZ
	case oidInterval:
		return parquet.String(), "STRING", convInterval
	case oidUUID:
		return parquet.UUID(), "UUID", convUUID
	case oidJSON, oidJSONB:
		return parquet.JSON(), "JSON", convJSON
	}
	// text, varchar, bpchar, name, "char", timetz and every type without a
	// typed mapping (composites, ranges, inet, money, bit, xml, ...): the
	// text form.
	return parquet.String(), "STRING", convText
}

// convTime parses "HH:MM:SS[.f{1,6}]" (24:00:00 included, as PostgreSQL
// allows) into microseconds since midnight.
func convTime(buf, text []byte) (parquet.Value, []byte, error) {
	if len(text) < 8 || text[2] != ':' || text[5] != ':' {
		return parquet.Value{}, buf, errMalformed
	}
	hh, ok1 := twoDigits(text[0:2])
	mm, ok2 := twoDigits(text[3:5])
	ss, ok3 := twoDigits(text[6:8])
	if !ok1 || !ok2 || !ok3 {
		return parquet.Value{}, buf, errMalformed
	}
	rest := text[8:]
	var frac int64
	if len(rest) > 0 {
		if rest[0] != '.' || len(rest) < 2 || len(rest) > 7 {
			return parquet.Value{}, buf, errMalformed
		}
		n := 0
		for _, c := range rest[1:] {
			if c < '0' || c > '9' {
				return parquet.Value{}, buf, errMalformed
			}
			frac = frac*10 + int64(c-'0')
			n++
		}
		for ; n < 6; n++ {
			frac *= 10
		}
	}
	us := (int64(hh)*3600+int64(mm)*60+int64(ss))*microsPerSecond + frac
	if mm > 59 || ss > 59 || us > microsPerDay {
		return parquet.Value{}, buf, errRange
	}
	return parquet.Int64Value(us), buf, nil
}

// convInterval stores an interval's text (IntervalStyle postgres, which the
// source sets) without its '+' signs: "1 year 2 mons -3 days +04:05:06.5"
// becomes "1 year 2 mons -3 days 04:05:06.5". The '+' marks a positive field
// after a negative one and carries no value of its own; without it the text
// is exact (months, days and microseconds all kept) and both PostgreSQL and
// DuckDB (CAST(x AS INTERVAL)) parse it, which they do not with the '+'.
func convInterval(buf, text []byte) (parquet.Value, []byte, error) {
	if bytes.IndexByte(text, '+') < 0 {
		return convText(buf, text)
	}
	start := len(buf)
	for _, c := range text {
		if c != '+' {
			buf = append(buf, c)
		}
	}
	return convText(buf, buf[start:len(buf):len(buf)])
}

// appendList appends the leaf values of an array column to row: PostgreSQL's
// array text ("{1,NULL,\"a b\"}") parsed into elements, each converted by
// elem. An empty array is an empty list. A multi-dimensional array is
// flattened in row-major order and an array with a lower bound other than 1
// ("[0:1]={a,b}") loses its bounds; both are reported as rules, as is the
// first rule an element converter applied.
func appendList(row parquet.Row, buf, text []byte, elem converter, leaf int) (parquet.Row, []byte, *ruleApplied, error) {
	var rule *ruleApplied
	s := text
	if len(s) > 0 && s[0] == '[' {
		eq := bytes.IndexByte(s, '=')
		if eq < 0 {
			return row, buf, nil, errMalformed
		}
		rule, s = appliedArrayBounds, s[eq+1:]
	}
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return row, buf, nil, errMalformed
	}
	depth, rep, n := 0, 0, 0
	for i := 0; i < len(s); {
		switch s[i] {
		case '{':
			depth++
			if depth > 1 && rule == nil {
				rule = appliedArrayFlattened
			}
			i++
			continue
		case '}':
			depth--
			if depth < 0 {
				return row, buf, nil, errMalformed
			}
			i++
			continue
		case ',':
			i++
			continue
		}
		if depth == 0 {
			return row, buf, nil, errMalformed
		}
		var (
			elemText []byte
			null     bool
		)
		if s[i] == '"' {
			start := len(buf)
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' {
					j++
					if j == len(s) {
						return row, buf[:start], nil, errMalformed
					}
				}
				buf = append(buf, s[j])
			}
			if j == len(s) {
				return row, buf[:start], nil, errMalformed
			}
			elemText, i = buf[start:len(buf):len(buf)], j+1
		} else {
			j := i
			for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != '{' {
				j++
			}
			elemText, i = s[i:j], j
			// An unquoted NULL is SQL NULL; the string "NULL" is quoted.
			null = len(elemText) == 4 && bytes.EqualFold(elemText, []byte("NULL"))
			if bytes.IndexByte(elemText, '\\') >= 0 {
				start := len(buf)
				for k := 0; k < len(elemText); k++ {
					if elemText[k] == '\\' && k+1 < len(elemText) {
						k++
					}
					buf = append(buf, elemText[k])
				}
				elemText = buf[start:len(buf):len(buf)]
			}
		}
		n++
		if null {
			row = append(row, parquet.NullValue().Level(rep, listNullDef, leaf))
			rep = 1
			continue
		}
		v, grown, err := elem(buf, elemText)
		if err != nil {
			ra, ok := err.(*ruleApplied)
			if !ok {
				return row, buf, nil, err
			}
			if rule == nil {
				rule = ra
			}
		}
		buf = grown
		def := listElementDef
		if v.IsNull() {
			def = listNullDef
		}
		row = append(row, v.Level(rep, def, leaf))
		rep = 1
	}
	if depth != 0 {
		return row, buf, nil, errMalformed
	}
	if n == 0 {
		row = append(row, parquet.NullValue().Level(0, listEmptyDef, leaf))
	}
	return row, buf, rule, nil
}
