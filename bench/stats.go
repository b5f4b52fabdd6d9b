package bench

import (
	"fmt"
	"math"
	"sort"
)

// Summary describes repeated measurements of one quantity.
type Summary struct {
	N              int
	Median         float64
	Min, Max       float64
	P50, P99       float64 // for samples (latency), not repetitions
	SpreadFraction float64 // (max - min) / median
}

// Summarize returns the median, extremes and spread of xs; empty gives zero.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	out := Summary{N: len(s), Min: s[0], Max: s[len(s)-1], Median: Quantile(s, 0.5), P50: Quantile(s, 0.5), P99: Quantile(s, 0.99)}
	if out.Median != 0 {
		out.SpreadFraction = (out.Max - out.Min) / math.Abs(out.Median)
	}
	return out
}

// Quantile of sorted xs with linear interpolation.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	i := int(math.Floor(pos))
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}

// Range formats "median (min–max)" with the given formatter.
func (s Summary) Range(f func(float64) string) string {
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 {
		return f(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.Median), f(s.Min), f(s.Max))
}
