package sinktest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/jackc/pgx/v5/pgtype"
)

// Canonical renders a value from pgx (rows.Values()) or from DuckDB
// (database/sql) as one string, equal for both exactly when they hold the
// same SQL value:
//
//   - nil (and invalid pgtype values) → NULL
//   - strings → Go-quoted, so "NULL" and "5" stay apart from NULL and 5;
//     text is compared exactly (bpchar padding included), never parsed
//   - integers of any width → decimal; bools → true/false
//   - floats → strconv 'g' -1 at their own width (NaN, +Inf, -Inf)
//   - decimals (pgtype.Numeric, duckdb.Decimal; *big.Int as an integer) → exact
//     decimal text with trailing fractional zeros trimmed ("1.50" → "1.5",
//     "-0.000" → "0"), because pgx does not keep a numeric's display scale
//     for every value; NaN, Infinity, -Infinity as PostgreSQL spells them
//   - time.Time → UTC RFC 3339 with nanoseconds (dates are midnight UTC on
//     both sides)
//   - []byte → \x and hex; [16]byte, duckdb.UUID, pgtype.UUID → UUID form
//   - map[string]any, []any (decoded JSON from either side, DuckDB lists) →
//     JSON with sorted keys
func Canonical(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.FormatInt(int64(x), 10)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint:
		return strconv.FormatUint(uint64(x), 10)
	case uint8:
		return strconv.FormatUint(uint64(x), 10)
	case uint16:
		return strconv.FormatUint(uint64(x), 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case json.Number:
		return x.String()
	case *big.Int:
		if x == nil {
			return "NULL"
		}
		return x.String()
	case pgtype.Numeric:
		return canonicalNumeric(x)
	case *pgtype.Numeric:
		if x == nil {
			return "NULL"
		}
		return canonicalNumeric(*x)
	case duckdb.Decimal:
		if x.Value == nil {
			return "NULL"
		}
		return scaledDecimal(x.Value, int(x.Scale))
	case *duckdb.Decimal:
		if x == nil || x.Value == nil {
			return "NULL"
		}
		return scaledDecimal(x.Value, int(x.Scale))
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case pgtype.Time:
		// time of day; DuckDB returns TIME as a time.Time on 0001-01-01 UTC.
		if !x.Valid {
			return "NULL"
		}
		return time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(x.Microseconds) * time.Microsecond).Format(time.RFC3339Nano)
	case []byte:
		if x == nil {
			return "NULL"
		}
		return `\x` + hex.EncodeToString(x)
	case [16]byte:
		return uuidString(x)
	case duckdb.UUID:
		return uuidString(x)
	case *duckdb.UUID:
		if x == nil {
			return "NULL"
		}
		return uuidString(*x)
	case pgtype.UUID:
		if !x.Valid {
			return "NULL"
		}
		return uuidString(x.Bytes)
	case map[string]any, []any:
		return canonicalJSON(x)
	}
	return fmt.Sprintf("%T(%v)", v, v)
}

func canonicalNumeric(n pgtype.Numeric) string {
	switch {
	case !n.Valid:
		return "NULL"
	case n.NaN:
		return "NaN"
	case n.InfinityModifier == pgtype.Infinity:
		return "Infinity"
	case n.InfinityModifier == pgtype.NegativeInfinity:
		return "-Infinity"
	case n.Int == nil:
		return "0"
	}
	if n.Exp >= 0 {
		v := new(big.Int).Mul(n.Int, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.Exp)), nil))
		return v.String()
	}
	return scaledDecimal(n.Int, int(-n.Exp))
}

// scaledDecimal renders unscaled/10^scale exactly, trimmed.
func scaledDecimal(unscaled *big.Int, scale int) string {
	if scale <= 0 {
		return unscaled.String()
	}
	digits := new(big.Int).Abs(unscaled).String()
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	s := digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	if unscaled.Sign() < 0 {
		s = "-" + s
	}
	return trimDecimal(s)
}

// trimDecimal drops trailing fractional zeros and a bare point, and turns
// negative zero into zero.
func trimDecimal(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}

func uuidString(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func canonicalJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%T(%v)", v, v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// maxReported bounds how many differences AssertSameRows reports.
const maxReported = 10

// AssertSameRows compares the source's rows (want) with the sink's (got),
// both with the columns cols, through Canonical. The order of rows does not
// matter: PostgreSQL's collation and DuckDB's byte order may sort text keys
// differently. Rows are paired by their first column (normally the key);
// for each pair that differs it reports the key and the columns, and rows
// without a partner are reported as missing or extra. It reports at most
// ten differences with tb.Errorf and returns whether the rows are equal.
func AssertSameRows(tb testing.TB, want, got [][]any, cols []string) bool {
	tb.Helper()
	render := func(rows [][]any) [][]string {
		out := make([][]string, len(rows))
		for i, r := range rows {
			out[i] = make([]string, len(r))
			for j, v := range r {
				out[i][j] = Canonical(v)
			}
		}
		return out
	}
	w, g := render(want), render(got)

	// Identical rows, as a multiset, need no pairing.
	count := map[string]int{}
	for _, r := range w {
		count[strings.Join(r, "\x00")]++
	}
	var gotLeft [][]string
	for _, r := range g {
		k := strings.Join(r, "\x00")
		if count[k] > 0 {
			count[k]--
			continue
		}
		gotLeft = append(gotLeft, r)
	}
	var wantLeft [][]string
	for _, r := range w {
		k := strings.Join(r, "\x00")
		if count[k] > 0 {
			count[k]--
			wantLeft = append(wantLeft, r)
		}
	}
	if len(wantLeft) == 0 && len(gotLeft) == 0 {
		return true
	}

	reported := 0
	report := func(format string, args ...any) {
		if reported < maxReported {
			tb.Errorf(format, args...)
		}
		reported++
	}
	if len(w) != len(g) {
		report("source has %d rows, sink has %d", len(w), len(g))
	}
	firstCol := "?"
	if len(cols) > 0 {
		firstCol = cols[0]
	}
	byKey := map[string][]int{}
	for i, r := range gotLeft {
		if len(r) > 0 {
			byKey[r[0]] = append(byKey[r[0]], i)
		}
	}
	paired := make([]bool, len(gotLeft))
	for _, wr := range wantLeft {
		var idx []int
		if len(wr) > 0 {
			idx = byKey[wr[0]]
		}
		if len(idx) != 1 || paired[idx[0]] {
			report("row %s=%s is in the source but not in the sink: %.300s", firstCol, first(wr), strings.Join(wr, ", "))
			continue
		}
		gr := gotLeft[idx[0]]
		paired[idx[0]] = true
		for j := range max(len(wr), len(gr)) {
			wv, gv := cell(wr, j), cell(gr, j)
			if wv != gv {
				name := "?"
				if j < len(cols) {
					name = cols[j]
				}
				report("row %s=%.100s column %s: source %.200s, sink %.200s", firstCol, wr[0], name, wv, gv)
			}
		}
	}
	for i, gr := range gotLeft {
		if !paired[i] {
			report("row %s=%s is in the sink but not in the source: %.300s", firstCol, first(gr), strings.Join(gr, ", "))
		}
	}
	if reported > maxReported {
		tb.Errorf("... and %d more differences", reported-maxReported)
	}
	return false
}

func first(r []string) string { return cell(r, 0) }

func cell(r []string, i int) string {
	if i < len(r) {
		return r[i]
	}
	return "(missing)"
}
