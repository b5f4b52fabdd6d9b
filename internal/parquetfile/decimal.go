package parquetfile

import (
	"errors"
	"math/big"
	"math/bits"

	"github.com/parquet-go/parquet-go"
)

var (
	errDecimalSpecial   = errors.New("NaN and Infinity cannot be stored in a DECIMAL column")
	errDecimalScale     = errors.New("more fractional digits than the column's scale")
	errDecimalPrecision = errors.New("more integer digits than the column's precision allows")
)

// smallDecimal converts a decimal of at most 18 digits to its unscaled value
// through value (Int32Value or Int64Value). NaN and ±Infinity are written as
// NULL and reported as appliedDecimalSpecial, so the rule is counted.
func smallDecimal(p, s int, value func(int64) parquet.Value) converter {
	return func(buf, text []byte) (parquet.Value, []byte, error) {
		neg, _, lo, err := parseDecimal(text, p, s)
		if err == errDecimalSpecial {
			return parquet.NullValue(), buf, appliedDecimalSpecial
		}
		v := int64(lo)
		if neg {
			v = -v
		}
		return value(v), buf, err
	}
}

// decimalNode returns the DECIMAL(p,s) leaf and its converter. The physical
// type follows the Parquet spec's recommendation, which Iceberg requires:
// INT32 up to 9 digits, INT64 up to 18, and above that a FIXED_LEN_BYTE_ARRAY
// of the fewest bytes that hold p digits in two's complement.
// parquet.Decimal takes the scale first.
func decimalNode(p, s int) (parquet.Node, converter) {
	switch {
	case p <= 9:
		return parquet.Decimal(s, p, parquet.Int32Type), smallDecimal(p, s, func(v int64) parquet.Value { return parquet.Int32Value(int32(v)) })
	case p <= 18:
		return parquet.Decimal(s, p, parquet.Int64Type), smallDecimal(p, s, parquet.Int64Value)
	default:
		n := decimalBytes(p)
		return parquet.Decimal(s, p, parquet.FixedLenByteArrayType(n)), func(buf, text []byte) (parquet.Value, []byte, error) {
			neg, hi, lo, err := parseDecimal(text, p, s)
			if err == errDecimalSpecial {
				return parquet.NullValue(), buf, appliedDecimalSpecial
			}
			if err != nil {
				return parquet.Value{}, buf, err
			}
			if neg {
				// Two's complement of the 128-bit magnitude.
				lo, hi = ^lo, ^hi
				var c uint64
				lo, c = bits.Add64(lo, 1, 0)
				hi += c
			}
			var be [16]byte
			for i := 0; i < 8; i++ {
				be[i] = byte(hi >> (56 - 8*i))
				be[8+i] = byte(lo >> (56 - 8*i))
			}
			// |value| < 10^p fits in n bytes, so the high bytes are pure
			// sign extension and may be dropped.
			start := len(buf)
			buf = append(buf, be[16-n:]...)
			return parquet.FixedLenByteArrayValue(buf[start:len(buf):len(buf)]), buf, nil
		}
	}
}

// decimalBytes is the fewest bytes whose two's complement holds every
// p-digit integer: the smallest n with 2^(8n-1) > 10^p - 1.
func decimalBytes(p int) int {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil)
	for n := 1; ; n++ {
		if new(big.Int).Lsh(big.NewInt(1), uint(8*n-1)).Cmp(limit) >= 0 {
			return n
		}
	}
}

// parseDecimal parses numeric text exactly (never through float64) and
// returns its magnitude scaled to s fractional digits as a 128-bit integer.
// Fewer fractional digits are padded with zeros; more are accepted only when
// they are zeros (the value is unchanged), otherwise refused: rounding would
// change the value. The integer part may have at most p-s significant
// digits, which also keeps the magnitude below 10^38 < 2^127.
func parseDecimal(text []byte, p, s int) (neg bool, hi, lo uint64, err error) {
	switch string(text) {
	case "NaN", "Infinity", "-Infinity", "+Infinity":
		return false, 0, 0, errDecimalSpecial
	}
	i := 0
	if i < len(text) && (text[i] == '-' || text[i] == '+') {
		neg = text[i] == '-'
		i++
	}
	digits, intDigits, fracDigits := 0, 0, 0
	seenPoint := false
	for ; i < len(text); i++ {
		c := text[i]
		if c == '.' && !seenPoint {
			seenPoint = true
			continue
		}
		if c < '0' || c > '9' {
			return false, 0, 0, errMalformed
		}
		digits++
		if !seenPoint {
			if intDigits == 0 && c == '0' {
				continue // leading zeros are not significant
			}
			intDigits++
			if intDigits > p-s {
				return false, 0, 0, errDecimalPrecision
			}
		} else {
			fracDigits++
			if fracDigits > s {
				if c != '0' {
					return false, 0, 0, errDecimalScale
				}
				continue
			}
		}
		hi, lo = mul10Add(hi, lo, uint64(c-'0'))
	}
	if digits == 0 {
		return false, 0, 0, errMalformed
	}
	for f := min(fracDigits, s); f < s; f++ {
		hi, lo = mul10Add(hi, lo, 0)
	}
	if hi == 0 && lo == 0 {
		neg = false // "-0.00" is zero
	}
	return neg, hi, lo, nil
}

// mul10Add returns (hi,lo)*10 + d in 128 bits. Callers bound the digit
// count, so it cannot overflow.
func mul10Add(hi, lo, d uint64) (uint64, uint64) {
	carry, lo := bits.Mul64(lo, 10)
	hi = hi*10 + carry
	var c uint64
	lo, c = bits.Add64(lo, d, 0)
	return hi + c, lo
}
