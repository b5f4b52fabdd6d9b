package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
)

var errJSON = errors.New("json column value is not valid JSON")

// AppendJSON appends the JSON value of table column col, whose values are
// vals (one element of Split's result), to dst:
//
//   - NULL: null;
//   - BOOLEAN: true or false;
//   - INT16, INT32, INT64: a number (exact in the text; readers that parse
//     numbers as float64 lose digits beyond 2^53);
//   - FLOAT, DOUBLE: a number, in the shortest text that reads back as the
//     same float4 or float8 (PostgreSQL's text); NaN, Infinity and
//     -Infinity, which JSON numbers cannot hold, as the strings "NaN",
//     "Infinity" and "-Infinity";
//   - JSON (json, jsonb): the value itself, embedded; its text is kept
//     (key order, duplicate keys, white space), except that a value spread
//     over several lines is compacted so that a JSONL row stays on one line;
//     a JSON null and SQL NULL both print as null;
//   - arrays: a JSON array of the elements' values, null for a NULL element;
//   - everything else (DECIMAL, text, enum, bytea, uuid, date, time,
//     timestamp, timestamptz, interval, timetz and the other types kept as
//     text): a JSON string of the PostgreSQL text AppendText prints, so a
//     DECIMAL keeps its digits and scale ("12.30") and ±infinity, BC dates
//     and bytea ("\\x00ff") print as in PostgreSQL.
func (t *Table) AppendJSON(dst []byte, col int, vals []parquet.Value) ([]byte, error) {
	c := &t.cols[col]
	out, err := appendJSONValue(dst, c, vals)
	if err != nil {
		return dst, fmt.Errorf("render column %q (%s): %w", c.name, c.ptype, err)
	}
	return out, nil
}

func appendJSONValue(dst []byte, c *column, vals []parquet.Value) ([]byte, error) {
	if !c.list {
		v, null, err := scalarValue(vals)
		if err != nil {
			return dst, err
		}
		if null {
			return append(dst, "null"...), nil
		}
		return appendScalarJSON(dst, c, v, nil)
	}
	empty, null, err := listShape(vals)
	switch {
	case err != nil:
		return dst, err
	case null:
		return append(dst, "null"...), nil
	case empty:
		return append(dst, "[]"...), nil
	}
	dst = append(dst, '[')
	var scratch []byte
	for i, v := range vals {
		if i > 0 {
			dst = append(dst, ',')
		}
		if v.DefinitionLevel() == listNullElemDef || v.IsNull() {
			dst = append(dst, "null"...)
			continue
		}
		if dst, err = appendScalarJSON(dst, c, v, scratch[:0]); err != nil {
			return dst, fmt.Errorf("element %d: %w", i+1, err)
		}
	}
	return append(dst, ']'), nil
}

// appendScalarJSON appends the JSON of one non-NULL value; scratch is a
// buffer for the text form.
func appendScalarJSON(dst []byte, c *column, v parquet.Value, scratch []byte) ([]byte, error) {
	switch c.kind {
	case kindBool, kindInt:
		// "t"/"f" are not JSON; integers print the same.
		if c.kind == kindBool {
			if v.Kind() != parquet.Boolean {
				return dst, errKind
			}
			if v.Boolean() {
				return append(dst, "true"...), nil
			}
			return append(dst, "false"...), nil
		}
		return appendScalarText(dst, c, v)
	case kindFloat, kindDouble:
		var f float64
		switch v.Kind() {
		case parquet.Float:
			f = float64(v.Float())
		case parquet.Double:
			f = v.Double()
		default:
			return dst, errKind
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return appendJSONString(dst, appendFloat(scratch, f, 64)), nil
		}
		// PostgreSQL's float text is a valid JSON number ("1e+15",
		// "-0", "0.0001").
		return appendScalarText(dst, c, v)
	case kindJSON:
		if v.Kind() != parquet.ByteArray {
			return dst, errKind
		}
		raw := v.ByteArray()
		if !json.Valid(raw) {
			return dst, errJSON
		}
		if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
			return append(dst, raw...), nil
		}
		// A newline in valid JSON is white space between tokens (inside
		// a string it is escaped); compacting drops only white space.
		var b bytes.Buffer
		b.Grow(len(raw))
		if err := json.Compact(&b, raw); err != nil {
			return dst, errJSON
		}
		return append(dst, b.Bytes()...), nil
	}
	text, err := appendScalarText(scratch, c, v)
	if err != nil {
		return dst, err
	}
	return appendJSONString(dst, text), nil
}

// appendJSONString appends s as a JSON string. Unlike encoding/json it does
// not escape <, > and &, which a dump is not embedded in HTML to need;
// invalid UTF-8 (which internal/parquetfile never stores in a STRING) becomes
// U+FFFD, as with encoding/json.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c >= 0x20:
				dst = append(dst, c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but line terminators in JavaScript: escaped,
			// as encoding/json does, so a JSONL line is one line to
			// every reader.
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
