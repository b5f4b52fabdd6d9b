//go:build !nodb

package query

import (
	"database/sql/driver"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

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
	return normalizeValue(v, typ)
}

// normalizeValue is normalize of a value of type typ, "" when not known
// (inside a STRUCT, MAP or UNION).
func normalizeValue(v any, typ string) any {
	switch x := v.(type) {
	case time.Time:
		if inf, ok := infinity(x, typ); ok {
			return inf
		}
		return x
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
			out[i] = MapEntry{Key: normalizeValue(keys[i], ""), Value: normalizeValue(vals[i], "")}
		}
		return out
	case duckdb.Map:
		out := make([]MapEntry, 0, len(x))
		for k, e := range x {
			out = append(out, MapEntry{Key: normalizeValue(k, ""), Value: normalizeValue(e, "")})
		}
		return out
	case duckdb.Union:
		return map[string]any{x.Tag: normalizeValue(x.Value, "")}
	case duckdb.Bit:
		return x.String()
	case []any:
		out := make([]any, len(x))
		elem := elementType(typ)
		for i, e := range x {
			out[i] = normalizeValue(e, elem)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeValue(e, "")
		}
		return out
	}
	return v
}

// elementType is the element type of LIST or ARRAY type typ ("DATE" of
// "DATE[]" or "DATE[3]"), or "" when typ is none or not known.
func elementType(typ string) string {
	if !strings.HasSuffix(typ, "]") {
		return ""
	}
	i := strings.LastIndexByte(typ, '[')
	if i < 0 || strings.Trim(typ[i+1:len(typ)-1], "0123456789") != "" {
		return ""
	}
	return typ[:i]
}

// infinities are the instants the driver returns for DuckDB's +infinity
// and -infinity of each type that has them. DuckDB keeps the extreme
// values of a type's count for them (±(2^31-1) days, ±(2^63-1) ticks; the
// same values internal/parquetfile writes for PostgreSQL's ±infinity), and
// the driver converts those as any other count (duckdb-go's getDate, getTS,
// getTSMS, getTSNS, getTSS), to a date just past the finite range:
// +infinity of a TIMESTAMP is 294247-01-10 04:00:54.775807 UTC, of a DATE
// 5881580-07-11.
var infinities = func() map[string][2]time.Time {
	const day = 24 * 60 * 60
	date := [2]time.Time{time.Unix(math.MaxInt32*day, 0).UTC(), time.Unix(-math.MaxInt32*day, 0).UTC()}
	micros := [2]time.Time{time.UnixMicro(math.MaxInt64).UTC(), time.UnixMicro(-math.MaxInt64).UTC()}
	return map[string][2]time.Time{
		"DATE":                     date,
		"TIMESTAMP":                micros,
		"TIMESTAMPTZ":              micros,
		"TIMESTAMP WITH TIME ZONE": micros,
		"TIMESTAMP_S":              {time.Unix(math.MaxInt64, 0).UTC(), time.Unix(-math.MaxInt64, 0).UTC()},
		"TIMESTAMP_MS":             {time.UnixMilli(math.MaxInt64).UTC(), time.UnixMilli(-math.MaxInt64).UTC()},
		"TIMESTAMP_NS":             {time.Unix(0, math.MaxInt64).UTC(), time.Unix(0, -math.MaxInt64).UTC()},
	}
}()

// infinity reports whether t is the driver's form of DuckDB's ±infinity
// for a value of type typ, and which. A type without an infinity has none;
// where typ is not known (inside a STRUCT or MAP, whose field types
// normalize does not parse), t is compared with every type's: only DATE's can be a
// finite value of another type, TIMESTAMP_S's or TIMESTAMP_MS's midnight
// of 5881580-07-11, which no PostgreSQL type maps to.
func infinity(t time.Time, typ string) (Infinity, bool) {
	match := func(inf [2]time.Time) (Infinity, bool) {
		switch {
		case t.Equal(inf[0]):
			return Infinity{}, true
		case t.Equal(inf[1]):
			return Infinity{Negative: true}, true
		}
		return Infinity{}, false
	}
	if inf, ok := infinities[typ]; ok {
		return match(inf)
	}
	if typ != "" {
		// A type with no infinity (TIME, TIMETZ): its values are never one.
		return Infinity{}, false
	}
	for _, inf := range infinities {
		if x, ok := match(inf); ok {
			return x, true
		}
	}
	return Infinity{}, false
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
