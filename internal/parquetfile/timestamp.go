package parquetfile

import (
	"bytes"
	"errors"
	"math"

	"github.com/parquet-go/parquet-go"
)

var errInfinity = errors.New("infinity cannot be stored in a DATE or TIMESTAMP column")

const (
	microsPerSecond = 1_000_000
	microsPerDay    = 86_400 * microsPerSecond
	// maxTimestampDays keeps days*microsPerDay plus a day of time and offset
	// inside int64; it is about 292,000 years either side of 1970, beyond
	// PostgreSQL's own timestamp range except for its last 30 years.
	maxTimestampDays = math.MaxInt64/microsPerDay - 1
)

// The values written for ±infinity (RuleInfinity): DuckDB's own
// representations, which it reads back from Parquet as ±infinity. No finite
// PostgreSQL value maps to them: dates end about 2.1e9 days after 1970, and
// finite timestamps stay within maxTimestampDays.
const (
	dateInfinity      = math.MaxInt32
	dateNegInfinity   = -math.MaxInt32
	timestampInfinity = math.MaxInt64
	timestampNegInf   = -math.MaxInt64
)

func convDate(buf, text []byte) (parquet.Value, []byte, error) {
	switch string(text) {
	case "infinity":
		return parquet.Int32Value(dateInfinity), buf, appliedInfinity
	case "-infinity":
		return parquet.Int32Value(dateNegInfinity), buf, appliedInfinity
	}
	days, rest, err := parseDate(text)
	if err != nil {
		return parquet.Value{}, buf, err
	}
	if len(rest) != 0 {
		return parquet.Value{}, buf, errMalformed
	}
	if days < math.MinInt32 || days > math.MaxInt32 {
		return parquet.Value{}, buf, errRange
	}
	return parquet.Int32Value(int32(days)), buf, nil
}

func convTimestamp(buf, text []byte) (parquet.Value, []byte, error) {
	return convTimestampZone(buf, text, false)
}

func convTimestampTZ(buf, text []byte) (parquet.Value, []byte, error) {
	return convTimestampZone(buf, text, true)
}

func convTimestampZone(buf, text []byte, withZone bool) (parquet.Value, []byte, error) {
	switch string(text) {
	case "infinity":
		return parquet.Int64Value(timestampInfinity), buf, appliedInfinity
	case "-infinity":
		return parquet.Int64Value(timestampNegInf), buf, appliedInfinity
	}
	us, err := parseTimestamp(text, withZone)
	if err == errRange && len(text) > 0 && text[0] >= '0' && text[0] <= '9' && !bytes.HasSuffix(text, []byte(" BC")) {
		if days, _, derr := parseDate(text); derr == nil && days > maxTimestampDays {
			// PostgreSQL's last ~29 years (294247..294276) lie beyond
			// INT64 microseconds since 1970, which no TIMESTAMP(us)
			// reader can hold: later than every representable instant,
			// written as +infinity (RuleTimestampRange).
			return parquet.Int64Value(timestampInfinity), buf, appliedTimestampRange
		}
	}
	return parquet.Int64Value(us), buf, err
}

// parseTimestamp parses "YYYY-MM-DD HH:MM:SS[.f{1,6}][±HH[:MM[:SS]]][ BC]"
// into microseconds since 1970-01-01 00:00:00 (UTC when withZone). The
// offset is required exactly when withZone: timestamptz always prints one,
// timestamp never does.
func parseTimestamp(text []byte, withZone bool) (int64, error) {
	days, rest, err := parseDate(text)
	if err != nil {
		return 0, err
	}
	if len(rest) < 9 || rest[0] != ' ' || rest[3] != ':' || rest[6] != ':' {
		return 0, errMalformed
	}
	hh, ok1 := twoDigits(rest[1:3])
	mm, ok2 := twoDigits(rest[4:6])
	ss, ok3 := twoDigits(rest[7:9])
	if !ok1 || !ok2 || !ok3 {
		return 0, errMalformed
	}
	if hh > 23 || mm > 59 || ss > 59 {
		return 0, errRange
	}
	rest = rest[9:]
	var frac int64
	if len(rest) > 0 && rest[0] == '.' {
		n := 0
		for n+1 < len(rest) && rest[n+1] >= '0' && rest[n+1] <= '9' {
			n++
		}
		if n == 0 || n > 6 {
			return 0, errMalformed // more than microseconds would need rounding
		}
		for i := 1; i <= n; i++ {
			frac = frac*10 + int64(rest[i]-'0')
		}
		for i := n; i < 6; i++ {
			frac *= 10
		}
		rest = rest[n+1:]
	}
	var offset int64
	if withZone {
		if offset, rest, err = parseOffset(rest); err != nil {
			return 0, err
		}
	}
	if len(rest) != 0 {
		return 0, errMalformed
	}
	if days > maxTimestampDays || days < -maxTimestampDays {
		return 0, errRange
	}
	us := days*microsPerDay + (int64(hh)*3600+int64(mm)*60+int64(ss)-offset)*microsPerSecond + frac
	return us, nil
}

// parseOffset parses "±HH[:MM[:SS]]" and returns it in seconds east of UTC.
func parseOffset(s []byte) (int64, []byte, error) {
	if len(s) < 3 || (s[0] != '+' && s[0] != '-') {
		return 0, s, errMalformed
	}
	sign := int64(1)
	if s[0] == '-' {
		sign = -1
	}
	hh, ok := twoDigits(s[1:3])
	if !ok {
		return 0, s, errMalformed
	}
	secs := int64(hh) * 3600
	s = s[3:]
	for _, unit := range [...]int64{60, 1} {
		if len(s) == 0 || s[0] != ':' {
			break
		}
		if len(s) < 3 {
			return 0, s, errMalformed
		}
		v, ok := twoDigits(s[1:3])
		if !ok || v > 59 {
			return 0, s, errMalformed
		}
		secs += int64(v) * unit
		s = s[3:]
	}
	return sign * secs, s, nil
}

// parseDate parses "YYYY-MM-DD" (four or more year digits) at the start of
// text, with an optional " BC" at the very end of text, and returns days
// since 1970-01-01 in the proleptic Gregorian calendar with astronomical
// years (1 BC is year 0), and what follows the date (without " BC").
func parseDate(text []byte) (int64, []byte, error) {
	switch string(text) {
	case "infinity", "-infinity":
		return 0, nil, errInfinity
	}
	bc := false
	if rest, ok := bytes.CutSuffix(text, []byte(" BC")); ok {
		bc, text = true, rest
	}
	n := 0
	var year int64
	for n < len(text) && text[n] >= '0' && text[n] <= '9' {
		if n == 7 {
			return 0, nil, errRange // PostgreSQL's dates end in year 5874897
		}
		year = year*10 + int64(text[n]-'0')
		n++
	}
	if n < 4 || len(text) < n+6 || text[n] != '-' || text[n+3] != '-' {
		return 0, nil, errMalformed
	}
	month, ok1 := twoDigits(text[n+1 : n+3])
	day, ok2 := twoDigits(text[n+4 : n+6])
	if !ok1 || !ok2 {
		return 0, nil, errMalformed
	}
	if bc {
		if year == 0 {
			return 0, nil, errMalformed // there is no year 0 BC
		}
		year = 1 - year
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) {
		return 0, nil, errRange
	}
	return daysFromCivil(year, int64(month), int64(day)), text[n+6:], nil
}

func twoDigits(b []byte) (int, bool) {
	if len(b) != 2 || b[0] < '0' || b[0] > '9' || b[1] < '0' || b[1] > '9' {
		return 0, false
	}
	return int(b[0]-'0')*10 + int(b[1]-'0'), true
}

func daysIn(year int64, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is Howard Hinnant's days_from_civil: days since 1970-01-01
// of a proleptic Gregorian date, exact for negative years too.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := (m + 9) % 12 // March = 0
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
