package readpath

import (
	"cmp"
	"slices"
	"strings"
)

// Closest returns up to three of names nearest to name, nearest first:
// the suggestions of an error for an unknown table or column. Distance is
// Levenshtein's over runes, ignoring case; a table key ("schema.table") is
// also compared by its table part with the asked name's, so "ordr" and
// "public.ordr" find public.orders. A name
// further than a third of the asked one's length (at least 2) is not
// suggested.
func Closest(name string, names []string) []string {
	type candidate struct {
		name string
		dist int
	}
	low := strings.ToLower(name)
	lowTable := low
	if _, t, ok := strings.Cut(low, "."); ok {
		lowTable = t
	}
	limit := max(2, len([]rune(name))/3)
	var cs []candidate
	for _, n := range names {
		k := strings.ToLower(n)
		d := distance(low, k)
		if _, table, ok := strings.Cut(k, "."); ok {
			d = min(d, distance(lowTable, table))
		}
		if d <= limit {
			cs = append(cs, candidate{n, d})
		}
	}
	slices.SortFunc(cs, func(a, b candidate) int { return cmp.Or(cmp.Compare(a.dist, b.dist), cmp.Compare(a.name, b.name)) })
	out := make([]string, 0, min(3, len(cs)))
	for _, c := range cs[:min(3, len(cs))] {
		out = append(out, c.name)
	}
	return out
}

// DidYouMean is "; did you mean a, b or c?" for suggestions, or "" for
// none: the tail of an error message.
func DidYouMean(suggestions []string) string {
	switch len(suggestions) {
	case 0:
		return ""
	case 1:
		return "; did you mean " + suggestions[0] + "?"
	}
	return "; did you mean " + strings.Join(suggestions[:len(suggestions)-1], ", ") + " or " + suggestions[len(suggestions)-1] + "?"
}

// distance is the Levenshtein distance of a and b, by runes; names longer
// than 256 runes are too far from anything (and would cost quadratic time).
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 256 || len(rb) > 256 {
		return 1 << 30
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
