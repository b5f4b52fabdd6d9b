package sinktest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2"
)

// QueryJSON reads the output of `pg-cdc query --format json` into the
// column names and rows, with each value turned back, by its column's
// DuckDB type, into what DuckDB's database/sql driver returns for it (the
// values MergedRows holds), so AssertSameRows compares them with the
// source through Canonical: decimals, UUIDs, times and bytes arrive as
// strings and are parsed; numbers keep every digit (json.Number). It fails
// on a truncated result: a comparison with part of the rows proves
// nothing.
func QueryJSON(data []byte) (cols []string, rows [][]any, err error) {
	var out struct {
		Columns []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"columns"`
		Rows      [][]json.RawMessage `json:"rows"`
		Truncated bool                `json:"truncated"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&out); err != nil {
		return nil, nil, fmt.Errorf("query output: %w\n%s", err, data)
	}
	if out.Truncated {
		return nil, nil, fmt.Errorf("query output is truncated (%d rows): raise query.max_rows or query.max_bytes", len(out.Rows))
	}
	for _, c := range out.Columns {
		cols = append(cols, c.Name)
	}
	for _, raw := range out.Rows {
		row := make([]any, len(raw))
		for i, cell := range raw {
			var v any
			d := json.NewDecoder(bytes.NewReader(cell))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				return nil, nil, err
			}
			if row[i], err = fromJSON(v, out.Columns[i].Type); err != nil {
				return nil, nil, fmt.Errorf("column %s (%s): %w", out.Columns[i].Name, out.Columns[i].Type, err)
			}
		}
		rows = append(rows, row)
	}
	return cols, rows, nil
}

// fromJSON turns one JSON value of DuckDB type typ into the driver's Go
// value.
func fromJSON(v any, typ string) (any, error) {
	if v == nil {
		return nil, nil
	}
	if elem, ok := strings.CutSuffix(typ, "[]"); ok {
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%v is not a list", v)
		}
		out := make([]any, len(list))
		for i, e := range list {
			var err error
			if out[i], err = fromJSON(e, elem); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	s, _ := v.(string)
	n, isNumber := v.(json.Number)
	switch {
	case strings.HasPrefix(typ, "DECIMAL("):
		return parseDecimal(s, typ)
	case typ == "UUID":
		b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
		if err != nil || len(b) != 16 {
			return nil, fmt.Errorf("UUID %q", s)
		}
		return duckdb.UUID(b), nil
	case typ == "BLOB":
		return hex.DecodeString(strings.TrimPrefix(s, `\x`))
	case typ == "DATE" || strings.HasPrefix(typ, "TIME"):
		return time.Parse(time.RFC3339Nano, s)
	case typ == "FLOAT" || typ == "DOUBLE":
		bits := 64
		if typ == "FLOAT" {
			bits = 32
		}
		text := s
		if isNumber {
			text = n.String()
		}
		f, err := parseFloat(text, bits)
		if bits == 32 {
			return float32(f), err
		}
		return f, err
	case typ == "HUGEINT" || typ == "UHUGEINT":
		b, ok := new(big.Int).SetString(n.String(), 10)
		if !ok {
			return nil, fmt.Errorf("integer %q", n)
		}
		return b, nil
	case isNumber && strings.HasSuffix(typ, "INT") || typ == "INTEGER":
		return strconv.ParseInt(n.String(), 10, 64)
	case typ == "JSON":
		return floats(v), nil // as the driver decodes JSON: numbers as float64
	}
	return v, nil // strings, booleans, structs: as decoded
}

// floats turns the json.Numbers of a decoded JSON value into float64s.
func floats(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = floats(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = floats(x[k])
		}
	}
	return v
}

// parseDecimal reads a decimal's exact text as the driver's Decimal.
func parseDecimal(s, typ string) (any, error) {
	var width, scale int
	if _, err := fmt.Sscanf(typ, "DECIMAL(%d,%d)", &width, &scale); err != nil {
		return nil, fmt.Errorf("type %s: %w", typ, err)
	}
	digits := strings.Replace(s, ".", "", 1)
	if i := strings.IndexByte(s, '.'); i >= 0 && len(s)-i-1 != scale {
		return nil, fmt.Errorf("decimal %q does not have scale %d", s, scale)
	}
	v, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return nil, fmt.Errorf("decimal %q", s)
	}
	return duckdb.Decimal{Width: uint8(width), Scale: uint8(scale), Value: v}, nil
}

func parseFloat(s string, bits int) (float64, error) {
	switch s {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(s, bits)
}
