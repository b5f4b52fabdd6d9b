package query

import (
	"math/big"
	"strings"
	"testing"
	"time"
)

func TestEstimateSize(t *testing.T) {
	for _, c := range []struct {
		v    any
		want int64
	}{
		{nil, 1},
		{true, 1},
		{int32(7), 4},
		{int64(7), 8},
		{3.5, 8},
		{"", 0},
		{strings.Repeat("x", 1000), 1000},
		{[]byte("abc"), 3},
		{time.Now(), 8},
		{new(big.Int).Lsh(big.NewInt(1), 100), 17},
		{Interval{Months: 1}, 16},
		{[]any{"ab", int64(1), nil}, 11},
		{map[string]any{"key": "value"}, 8},
		{[]MapEntry{{Key: "k", Value: "vv"}}, 3},
		{[]any{[]any{"abc"}, map[string]any{"a": []byte("xy")}}, 6},
		{[4]uint16{}, 8}, // a type not listed: its shallow size
	} {
		if got := estimateSize(c.v); got != c.want {
			t.Errorf("estimateSize(%#v) = %d, want %d", c.v, got, c.want)
		}
	}
	if got := rowSize([]any{"abc", int64(1)}); got != 11 {
		t.Errorf("rowSize = %d", got)
	}
}
