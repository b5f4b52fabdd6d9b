package parquetfile

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
)

// Reasons a value is refused. They are wrapped into a ValueError that names
// the table and column, so they stay short.
var (
	errMalformed = errors.New("malformed value")
	errRange     = errors.New("out of range")
	errUTF8      = errors.New("not valid UTF-8")
)

func convBool(buf, text []byte) (parquet.Value, []byte, error) {
	switch string(text) {
	case "t", "true":
		return parquet.BooleanValue(true), buf, nil
	case "f", "false":
		return parquet.BooleanValue(false), buf, nil
	}
	return parquet.Value{}, buf, errMalformed
}

func convInt16(buf, text []byte) (parquet.Value, []byte, error) {
	v, err := parseInt(text, math.MinInt16, math.MaxInt16)
	return parquet.Int32Value(int32(v)), buf, err
}

func convInt32(buf, text []byte) (parquet.Value, []byte, error) {
	v, err := parseInt(text, math.MinInt32, math.MaxInt32)
	return parquet.Int32Value(int32(v)), buf, err
}

func convInt64(buf, text []byte) (parquet.Value, []byte, error) {
	v, err := parseInt(text, math.MinInt64, math.MaxInt64)
	return parquet.Int64Value(v), buf, err
}

func convOID(buf, text []byte) (parquet.Value, []byte, error) {
	v, err := parseInt(text, 0, math.MaxUint32)
	return parquet.Int64Value(v), buf, err
}

// parseInt parses a base-10 integer in [lo, hi] without allocating: the
// integer columns are the hottest path of a snapshot.
func parseInt(text []byte, lo, hi int64) (int64, error) {
	s := text
	neg := false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if len(s) == 0 {
		return 0, errMalformed
	}
	// Accumulate the magnitude as uint64 so math.MinInt64 parses.
	limit := uint64(hi)
	if neg {
		limit = uint64(-(lo + 1)) + 1
	}
	var mag uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errMalformed
		}
		d := uint64(c - '0')
		if mag > (limit-d)/10 {
			return 0, errRange
		}
		mag = mag*10 + d
	}
	if neg {
		if mag == 0 {
			return 0, nil
		}
		if lo >= 0 {
			return 0, errRange
		}
		return -int64(mag-1) - 1, nil
	}
	return int64(mag), nil
}

func convFloat4(buf, text []byte) (parquet.Value, []byte, error) {
	f, err := parseFloat(text, 32)
	return parquet.FloatValue(float32(f)), buf, err
}

func convFloat8(buf, text []byte) (parquet.Value, []byte, error) {
	f, err := parseFloat(text, 64)
	return parquet.DoubleValue(f), buf, err
}

// parseFloat accepts PostgreSQL's float output, including NaN, Infinity and
// -Infinity, which are kept (design.md §4). With extra_float_digits=3 the text
// round-trips exactly, so parsing it gives back the stored bits.
func parseFloat(text []byte, bits int) (float64, error) {
	if len(text) == 0 || len(text) > 64 {
		return 0, errMalformed
	}
	f, err := strconv.ParseFloat(string(text), bits)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, errRange
		}
		return 0, errMalformed
	}
	return f, nil
}

// convText stores the text form as a UTF-8 STRING. A database whose encoding
// is not UTF-8 can send other bytes; storing them under the STRING type
// would hand readers invalid data, so they are refused instead.
func convText(buf, text []byte) (parquet.Value, []byte, error) {
	if !utf8.Valid(text) {
		return parquet.Value{}, buf, errUTF8
	}
	return parquet.ByteArrayValue(text), buf, nil
}

// convJSON stores json and jsonb text exactly as sent: it is never parsed
// and re-encoded, so json keeps its key order, duplicates and whitespace.
func convJSON(buf, text []byte) (parquet.Value, []byte, error) {
	return convText(buf, text)
}

// convBytea decodes bytea's hex output (\x0a0b). The escape format is not
// accepted: the source sets bytea_output=hex.
func convBytea(buf, text []byte) (parquet.Value, []byte, error) {
	if len(text) < 2 || text[0] != '\\' || text[1] != 'x' || len(text)%2 != 0 {
		return parquet.Value{}, buf, errMalformed
	}
	hex := text[2:]
	start := len(buf)
	for i := 0; i < len(hex); i += 2 {
		hi, ok1 := unhex(hex[i])
		lo, ok2 := unhex(hex[i+1])
		if !ok1 || !ok2 {
			return parquet.Value{}, buf[:start], errMalformed
		}
		buf = append(buf, hi<<4|lo)
	}
	return parquet.ByteArrayValue(buf[start:len(buf):len(buf)]), buf, nil
}

// convUUID parses the canonical 8-4-4-4-12 form (PostgreSQL's output) and,
// leniently, 32 bare hex digits.
func convUUID(buf, text []byte) (parquet.Value, []byte, error) {
	start := len(buf)
	n := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '-' && len(text) == 36 && (i == 8 || i == 13 || i == 18 || i == 23) {
			continue
		}
		if i+1 >= len(text) || n == 16 {
			return parquet.Value{}, buf[:start], errMalformed
		}
		hi, ok1 := unhex(c)
		lo, ok2 := unhex(text[i+1])
		if !ok1 || !ok2 {
			return parquet.Value{}, buf[:start], errMalformed
		}
		buf = append(buf, hi<<4|lo)
		n++
		i++
	}
	if n != 16 || (len(text) != 36 && len(text) != 32) {
		return parquet.Value{}, buf[:start], errMalformed
	}
	return parquet.FixedLenByteArrayValue(buf[start:len(buf):len(buf)]), buf, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
