package bench

import "testing"

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{4, 1, 3, 2, 5})
	if s.N != 5 || s.Median != 3 || s.Min != 1 || s.Max != 5 || s.SpreadFraction != 4.0/3 {
		t.Errorf("Summarize = %+v", s)
	}
	if s := Summarize([]float64{1, 2}); s.Median != 1.5 {
		t.Errorf("median of two = %v, want 1.5", s.Median)
	}
	if s := Summarize(nil); s.N != 0 || s.Range(func(float64) string { return "x" }) != "–" {
		t.Errorf("empty: %+v", s)
	}
	xs := make([]float64, 101)
	for i := range xs {
		xs[i] = float64(i)
	}
	if s := Summarize(xs); s.P99 != 99 || s.P50 != 50 {
		t.Errorf("p50 %v p99 %v, want 50 and 99", s.P50, s.P99)
	}
	if got := (Summary{N: 3, Median: 2, Min: 1, Max: 3}).Range(func(x float64) string { return string(rune('0' + int(x))) }); got != "2 (1–3)" {
		t.Errorf("Range = %q", got)
	}
}
