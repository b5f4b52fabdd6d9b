package render

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

var (
	errKind   = errors.New("value of an unexpected Parquet kind")
	errLevels = errors.New("unexpected repetition or definition level")
	errRange  = errors.New("value out of range")
)

const (
	microsPerSecond = 1_000_000
	microsPerDay    = 86_400 * microsPerSecond
)

// The values internal/parquetfile writes for ±infinity (its rule "infinity
// as extreme value").
const (
	dateInfinity         = math.MaxInt32
	dateNegInfinity      = -math.MaxInt32
	timestampInfinity    = math.MaxInt64
	timestampNegInfinity = -math.MaxInt64
)

// AppendText appends PostgreSQL's text output of table column col, whose
// values are vals (one element of Split's result), to dst. null reports a
// SQL NULL, for which nothing is appended. An array is printed in
// PostgreSQL's {…} form.
func (t *Table) AppendText(dst []byte, col int, vals []parquet.Value) (out []byte, null bool, err error) {
	c := &t.cols[col]
	if c.list {
		out, null, err = appendListText(dst, c, vals)
	} else {
		var v parquet.Value
		if v, null, err = scalarValue(vals); err == nil && !null {
			out, err = appendScalarText(dst, c, v)
		}
	}
	if err != nil {
		return dst, false, fmt.Errorf("render column %q (%s): %w", c.name, c.ptype, err)
	}
	if null {
		return dst, true, nil
	}
	return out, false, nil
}

// Text returns the text of table column col; see AppendText.
func (t *Table) Text(col int, vals []parquet.Value) (text string, null bool, err error) {
	b, null, err := t.AppendText(nil, col, vals)
	return string(b), null, err
}

// scalarValue returns the single value of a scalar column.
func scalarValue(vals []parquet.Value) (parquet.Value, bool, error) {
	if len(vals) != 1 || vals[0].RepetitionLevel() != 0 {
		return parquet.Value{}, false, errLevels
	}
	v := vals[0]
	return v, v.IsNull(), nil
}

// appendListText prints an array as PostgreSQL's array_out does for a
// one-dimensional array with lower bound 1 (the only shape a LIST holds).
func appendListText(dst []byte, c *column, vals []parquet.Value) ([]byte, bool, error) {
	empty, null, err := listShape(vals)
	if err != nil || null {
		return dst, null, err
	}
	dst = append(dst, '{')
	if empty {
		return append(dst, '}'), false, nil
	}
	var elem []byte
	for i, v := range vals {
		if i > 0 {
			dst = append(dst, ',')
		}
		if v.DefinitionLevel() == listNullElemDef || v.IsNull() {
			dst = append(dst, "NULL"...)
			continue
		}
		elem, err = appendScalarText(elem[:0], c, v)
		if err != nil {
			return dst, false, fmt.Errorf("element %d: %w", i+1, err)
		}
		dst = appendArrayElement(dst, elem)
	}
	return append(dst, '}'), false, nil
}

// listShape checks the levels of an array column's values and reports a
// NULL or an empty array.
func listShape(vals []parquet.Value) (empty, null bool, err error) {
	if len(vals) == 0 {
		return false, false, errLevels
	}
	for i, v := range vals {
		rep, def := v.RepetitionLevel(), v.DefinitionLevel()
		if (i == 0) != (rep == 0) || rep > 1 || def > listElemDef {
			return false, false, errLevels
		}
		if def < listNullElemDef && len(vals) != 1 {
			return false, false, errLevels
		}
	}
	switch vals[0].DefinitionLevel() {
	case listNullDef:
		return false, true, nil
	case listEmptyDef:
		return true, false, nil
	}
	return false, false, nil
}

// appendArrayElement appends one non-NULL element's text the way array_out
// does: double-quoted, with '"' and '\' escaped by a backslash, when it is
// empty, is "NULL" in any case, or holds a brace, the delimiter ',', a quote,
// a backslash or white space (array_isspace).
func appendArrayElement(dst, elem []byte) []byte {
	quote := len(elem) == 0 || (len(elem) == 4 && (elem[0]|0x20) == 'n' && (elem[1]|0x20) == 'u' && (elem[2]|0x20) == 'l' && (elem[3]|0x20) == 'l')
	for _, ch := range elem {
		switch ch {
		case '{', '}', ',', '"', '\\', ' ', '\t', '\n', '\r', '\v', '\f':
			quote = true
		}
	}
	if !quote {
		return append(dst, elem...)
	}
	dst = append(dst, '"')
	for _, ch := range elem {
		if ch == '"' || ch == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, ch)
	}
	return append(dst, '"')
}

// appendScalarText appends the text of one non-NULL value of c's kind.
func appendScalarText(dst []byte, c *column, v parquet.Value) ([]byte, error) {
	switch c.kind {
	case kindBool:
		if v.Kind() != parquet.Boolean {
			return dst, errKind
		}
		if v.Boolean() {
			return append(dst, 't'), nil
		}
		return append(dst, 'f'), nil
	case kindInt:
		n, err := int64Of(v)
		return strconv.AppendInt(dst, n, 10), err
	case kindFloat:
		if v.Kind() != parquet.Float {
			return dst, errKind
		}
		return appendFloat(dst, float64(v.Float()), 32), nil
	case kindDouble:
		if v.Kind() != parquet.Double {
			return dst, errKind
		}
		return appendFloat(dst, v.Double(), 64), nil
	case kindDecimal:
		return appendDecimal(dst, v, c.scale)
	case kindString, kindJSON:
		if v.Kind() != parquet.ByteArray {
			return dst, errKind
		}
		return append(dst, v.ByteArray()...), nil
	case kindInterval:
		if v.Kind() != parquet.ByteArray {
			return dst, errKind
		}
		return appendInterval(dst, v.ByteArray()), nil
	case kindBinary:
		if v.Kind() != parquet.ByteArray {
			return dst, errKind
		}
		return appendHex(append(dst, `\x`...), v.ByteArray()), nil
	case kindUUID:
		if v.Kind() != parquet.FixedLenByteArray || len(v.ByteArray()) != 16 {
			return dst, errKind
		}
		b := v.ByteArray()
		dst = appendHex(dst, b[0:4])
		dst = appendHex(append(dst, '-'), b[4:6])
		dst = appendHex(append(dst, '-'), b[6:8])
		dst = appendHex(append(dst, '-'), b[8:10])
		return appendHex(append(dst, '-'), b[10:16]), nil
	case kindDate:
		if v.Kind() != parquet.Int32 {
			return dst, errKind
		}
		return appendDate(dst, v.Int32()), nil
	case kindTime:
		if v.Kind() != parquet.Int64 {
			return dst, errKind
		}
		us := v.Int64()
		if us < 0 || us > microsPerDay {
			return dst, errRange
		}
		return appendClock(dst, us), nil
	case kindTimestamp, kindTimestampTZ:
		if v.Kind() != parquet.Int64 {
			return dst, errKind
		}
		return appendTimestamp(dst, v.Int64(), c.kind == kindTimestampTZ), nil
	}
	return dst, errKind
}

// int64Of returns an INT32 or INT64 value as int64.
func int64Of(v parquet.Value) (int64, error) {
	switch v.Kind() {
	case parquet.Int32:
		return int64(v.Int32()), nil
	case parquet.Int64:
		return v.Int64(), nil
	}
	return 0, errKind
}

const hexDigits = "0123456789abcdef"

func appendHex(dst, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return dst
}

// appendDecimal prints a DECIMAL(p,s) value as numeric_out does for a
// numeric(p,s) column: exactly s fractional digits.
func appendDecimal(dst []byte, v parquet.Value, scale int) ([]byte, error) {
	var digits []byte
	neg := false
	switch v.Kind() {
	case parquet.Int32, parquet.Int64:
		n, _ := int64Of(v)
		neg = n < 0
		mag := uint64(n)
		if neg {
			mag = -mag // two's complement: also right for math.MinInt64
		}
		digits = strconv.AppendUint(make([]byte, 0, 20), mag, 10)
	case parquet.FixedLenByteArray, parquet.ByteArray:
		b := v.ByteArray()
		if len(b) == 0 || len(b) > 32 {
			return dst, errKind
		}
		n := new(big.Int).SetBytes(b)
		if b[0]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
		neg = n.Sign() < 0
		digits = n.Abs(n).Append(nil, 10)
	default:
		return dst, errKind
	}
	if neg {
		dst = append(dst, '-')
	}
	if scale == 0 {
		return append(dst, digits...), nil
	}
	if len(digits) <= scale {
		dst = append(dst, '0', '.')
		for range scale - len(digits) {
			dst = append(dst, '0')
		}
		return append(dst, digits...), nil
	}
	dst = append(dst, digits[:len(digits)-scale]...)
	dst = append(dst, '.')
	return append(dst, digits[len(digits)-scale:]...), nil
}

// appendInterval restores the '+' signs internal/parquetfile removed from an
// interval's text (IntervalStyle postgres). PostgreSQL's EncodeInterval
// prints a '+' before a positive field that follows a negative one ("-1 days
// +02:00:00", "1 year -2 mons +3 days"): each printed year/mon/day field
// sets "is_before" when it is negative, for the next field only, and the
// time field takes a '+' when is_before is set and it is not negative.
// Text without the pattern, or that is not an interval at all, is copied.
func appendInterval(dst, text []byte) []byte {
	before := false
	for i := 0; i < len(text); {
		j := i
		for j < len(text) && text[j] != ' ' {
			j++
		}
		tok := text[i:j]
		numeric := len(tok) > 0 && (tok[0] == '-' || (tok[0] >= '0' && tok[0] <= '9'))
		if numeric {
			neg := tok[0] == '-'
			isTime := false
			for _, ch := range tok {
				if ch == ':' {
					isTime = true
				}
			}
			if before && !neg && (isTime || !isZero(tok)) {
				dst = append(dst, '+')
			}
			before = neg && !isTime
		}
		dst = append(dst, tok...)
		if j < len(text) {
			dst = append(dst, ' ')
			j++
		}
		i = j
	}
	return dst
}

func isZero(tok []byte) bool {
	for _, ch := range tok {
		if ch != '0' {
			return false
		}
	}
	return true
}

// appendDate prints days since 1970-01-01 as date_out does with DateStyle
// ISO: YYYY-MM-DD, the year zero-padded to four digits, " BC" for
// astronomical years ≤ 0 (year 0 is 1 BC); the extreme INT32 values
// internal/parquetfile writes for ±infinity as "infinity" and "-infinity".
func appendDate(dst []byte, days int32) []byte {
	switch days {
	case dateInfinity:
		return append(dst, "infinity"...)
	case dateNegInfinity:
		return append(dst, "-infinity"...)
	}
	dst, bc := appendYMD(dst, int64(days))
	if bc {
		dst = append(dst, " BC"...)
	}
	return dst
}

// appendTimestamp prints microseconds since 1970-01-01 00:00:00 (UTC when
// tz) as timestamp_out and timestamptz_out do with DateStyle ISO and
// TimeZone UTC: "YYYY-MM-DD HH:MM:SS[.ffffff]" with trailing fractional
// zeros dropped, then "+00" for timestamptz, then " BC"; the extreme INT64
// values written for ±infinity as "infinity" and "-infinity".
func appendTimestamp(dst []byte, us int64, tz bool) []byte {
	switch us {
	case timestampInfinity:
		return append(dst, "infinity"...)
	case timestampNegInfinity:
		return append(dst, "-infinity"...)
	}
	days := us / microsPerDay
	rem := us % microsPerDay
	if rem < 0 {
		days--
		rem += microsPerDay
	}
	dst, bc := appendYMD(dst, days)
	dst = appendClock(append(dst, ' '), rem)
	if tz {
		dst = append(dst, "+00"...)
	}
	if bc {
		dst = append(dst, " BC"...)
	}
	return dst
}

// appendYMD appends "YYYY-MM-DD" of days since 1970-01-01 (proleptic
// Gregorian) and reports whether the year is BC.
func appendYMD(dst []byte, days int64) ([]byte, bool) {
	y, m, d := civilFromDays(days)
	bc := y <= 0
	if bc {
		y = 1 - y
	}
	dst = appendPadded(dst, y, 4)
	dst = appendPadded(append(dst, '-'), m, 2)
	dst = appendPadded(append(dst, '-'), d, 2)
	return dst, bc
}

// appendClock appends "HH:MM:SS[.ffffff]" of us microseconds after
// midnight (24:00:00 included), trailing fractional zeros dropped, as
// PostgreSQL's AppendSeconds does.
func appendClock(dst []byte, us int64) []byte {
	secs, frac := us/microsPerSecond, us%microsPerSecond
	dst = appendPadded(dst, secs/3600, 2)
	dst = appendPadded(append(dst, ':'), secs/60%60, 2)
	dst = appendPadded(append(dst, ':'), secs%60, 2)
	if frac == 0 {
		return dst
	}
	digits := 6
	for frac%10 == 0 {
		frac /= 10
		digits--
	}
	return appendPadded(append(dst, '.'), frac, digits)
}

// appendPadded appends n ≥ 0 in decimal with at least width digits.
func appendPadded(dst []byte, n int64, width int) []byte {
	var buf [20]byte
	s := strconv.AppendInt(buf[:0], n, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// civilFromDays is Howard Hinnant's civil_from_days: the proleptic Gregorian
// date (astronomical year) of days since 1970-01-01; the inverse of
// internal/parquetfile's daysFromCivil.
func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := z
	if era < 0 {
		era -= 146096
	}
	era /= 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}
