package render

import (
	"math"
	"math/big"
	"strconv"
)

// appendFloat prints a float4 (bits 32) or float8 as PostgreSQL 12+ does
// with extra_float_digits > 0 (float4out, float8out): the shortest digits
// that read back as the same value, by its copy of Ryu; fixed-point when
// the decimal exponent is in [-4, 15) for float8 and [-4, 6) for float4
// (printf's %g thresholds), else scientific with a sign and at least two
// exponent digits ("1e+15", "5e-324"); NaN, Infinity, -Infinity and -0 by
// name.
func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0"...)
		}
		return append(dst, '0')
	}
	var buf [32]byte
	e := ryuDigits(buf[:0], f, bits)
	// e is "[-]d[.ddd]e±XX": split it into sign, digits and exponent.
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	mant, exp := e, 0
	for i := range e {
		if e[i] == 'e' {
			mant = e[:i]
			exp, _ = strconv.Atoi(string(e[i+1:]))
			break
		}
	}
	limit := 15
	if bits == 32 {
		limit = 6
	}
	if neg {
		dst = append(dst, '-')
	}
	if exp < -4 || exp >= limit {
		return append(dst, e...) // Go prints the exponent as PostgreSQL does
	}
	var dbuf [24]byte
	digits := dbuf[:0]
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	switch {
	case exp < 0:
		dst = append(dst, '0', '.')
		for range -exp - 1 {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	case len(digits) <= exp+1:
		dst = append(dst, digits...)
		for range exp + 1 - len(digits) {
			dst = append(dst, '0')
		}
		return dst
	}
	dst = append(dst, digits[:exp+1]...)
	dst = append(dst, '.')
	return append(dst, digits[exp+1:]...)
}

// ryuDigits appends f's shortest round-trip digits in Go's 'e' format,
// as PostgreSQL's Ryu (src/common/d2s.c, f2s.c) chooses them. Go's shortest
// output may lie exactly on the boundary of the interval of decimals that
// read back as f (half way to a neighbour, which reads back as f under
// round-half-even); PostgreSQL's Ryu never takes the boundary and prints
// the shortest correctly rounded digits strictly inside the interval,
// sometimes one digit longer (float4 129693264 is "1.29693264e+08", not
// "1.2969326e+08"). Verified against PostgreSQL on random bit patterns
// (TestAgainstPostgresRandom).
func ryuDigits(dst []byte, f float64, bits int) []byte {
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, bits)
	if !mayBeBoundary(dst[start:], f, bits) || !onBoundary(dst[start:], f, bits) {
		return dst
	}
	n := 0
	for _, c := range dst[start:] {
		if c == 'e' {
			break
		}
		if c >= '0' && c <= '9' {
			n++
		}
	}
	for prec := n; prec < 17; prec++ {
		dst = strconv.AppendFloat(dst[:start], f, 'e', prec, bits)
		if g, err := strconv.ParseFloat(string(dst[start:]), bits); err == nil && g == f && !onBoundary(dst[start:], f, bits) {
			return dst
		}
	}
	return strconv.AppendFloat(dst[:start], f, 'e', 16, bits)
}

// mayBeBoundary is a cheap filter for onBoundary: a boundary is a binary
// fraction half way between two floats; with a negative binary exponent its
// decimal expansion ends in 5, and with a non-negative one the floats are
// integers of at least 2^(mantissa bits).
func mayBeBoundary(s []byte, f float64, bits int) bool {
	limit := 1 << 52
	if bits == 32 {
		limit = 1 << 23
	}
	if math.Abs(f) >= float64(limit) {
		return true
	}
	for i, c := range s {
		if c == 'e' {
			return i > 0 && s[i-1] == '5'
		}
	}
	return false
}

// onBoundary reports whether the decimal s is exactly half way between f
// and one of its neighbours (float32 ones when bits is 32).
func onBoundary(s []byte, f float64, bits int) bool {
	r, ok := new(big.Rat).SetString(string(s))
	if !ok {
		return false
	}
	var lo, hi float64
	if bits == 32 {
		lo = float64(math.Nextafter32(float32(f), float32(math.Inf(-1))))
		hi = float64(math.Nextafter32(float32(f), float32(math.Inf(1))))
	} else {
		lo, hi = math.Nextafter(f, math.Inf(-1)), math.Nextafter(f, math.Inf(1))
	}
	for _, n := range [2]float64{lo, hi} {
		if math.IsInf(n, 0) {
			continue
		}
		mid := new(big.Rat).SetFloat64(f)
		mid.Add(mid, new(big.Rat).SetFloat64(n))
		mid.Quo(mid, big.NewRat(2, 1))
		if mid.Cmp(r) == 0 {
			return true
		}
	}
	return false
}
