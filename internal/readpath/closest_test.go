package readpath

import (
	"slices"
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	names := []string{"public.orders", "shop.orders", "public.order_items", "public.customers"}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"ordrs", []string{"public.orders", "shop.orders"}},
		{"public.ordes", []string{"public.orders", "shop.orders"}},
		{"CUSTOMER", []string{"public.customers"}},
		{"zzzz", []string{}},
		{strings.Repeat("x", 300), []string{}},
	} {
		if got := Closest(tc.name, names); !slices.Equal(got, tc.want) {
			t.Errorf("Closest(%.20q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := DidYouMean([]string{"a", "b", "c"}); got != "; did you mean a, b or c?" {
		t.Errorf("DidYouMean = %q", got)
	}
	if DidYouMean(nil) != "" {
		t.Error("DidYouMean(nil) is not empty")
	}
}
