//go:build !nodb

package query

import (
	"database/sql/driver"
	"fmt"
	"math/big"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// normalize turns a driver value into the standard types Result promises,
// so that no caller needs the driver's types (and so imports no DuckDB).
// typ is the column's DuckDB type name, used at the top level only: a UUID
// arrives as 16 bytes, which only the column type tells from a BLOB.
func normalize(v driver.Value, typ string) any {
	if typ == "UUID" {
		if b, ok := v.([]byte); ok && len(b) == 16 {
			return uuidString(b)
		}
	}
	return normalizeValue(v)
}

func normalizeValue(v any) any {
	switch x := v.(type) {
	case duckdb.Decimal:
		return decimalString(x)
	case *duckdb.Decimal:
		if x == nil {
			return nil
		}
		return decimalString(*x)
	case duckdb.UUID:
		return uuidString(x[:])
	case *duckdb.UUID:
		if x == nil {
			return nil
		}
		return uuidString(x[:])
	case duckdb.Interval:
		return Interval{Months: x.Months, Days: x.Days, Micros: x.Micros}
	case duckdb.OrderedMap:
		keys, vals := x.Keys(), x.Values()
		out := make([]MapEntry, len(keys))
		for i := range keys {
			out[i] = MapEntry{Key: normalizeValue(keys[i]), Value: normalizeValue(vals[i])}
		}
		return out
	case duckdb.Map:
		out := make([]MapEntry, 0, len(x))
		for k, e := range x {
			out = append(out, MapEntry{Key: normalizeValue(k), Value: normalizeValue(e)})
		}
		return out
	case duckdb.Union:
		return map[string]any{x.Tag: normalizeValue(x.Value)}
	case duckdb.Bit:
		return x.String()
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeValue(e)
		}
		return out
	}
	return v
}

// decimalString renders d exactly, with all of its scale's digits
// ("1.500" for DECIMAL(12,3)), unlike duckdb.Decimal.String, which trims
// trailing zeros.
func decimalString(d duckdb.Decimal) string {
	if d.Value == nil {
		return ""
	}
	digits := new(big.Int).Abs(d.Value).String()
	sign := ""
	if d.Value.Sign() < 0 {
		sign = "-"
	}
	scale := int(d.Scale)
	if scale == 0 {
		return sign + digits
	}
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	return sign + digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
}

func uuidString(b []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
