package query

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// closest is the hint for an unknown table: "; did you mean a or b?" with
// the tables of ms whose names are nearest to name (by edit distance, at
// most three, none further than half the name), or "" when none is near.
func closest(name string, ms ...*manifest.Manifest) string {
	type candidate struct {
		key  string
		dist int
	}
	seen := map[string]bool{}
	var cs []candidate
	for _, m := range ms {
		for key, mt := range m.Tables {
			if seen[key] {
				continue
			}
			seen[key] = true
			d := min(distance(strings.ToLower(name), strings.ToLower(key)), distance(strings.ToLower(name), strings.ToLower(mt.Name)))
			if d <= max(2, len(name)/2) {
				cs = append(cs, candidate{key, d})
			}
		}
	}
	if len(cs) == 0 {
		return ""
	}
	slices.SortFunc(cs, func(a, b candidate) int { return cmp.Or(cmp.Compare(a.dist, b.dist), cmp.Compare(a.key, b.key)) })
	var names []string
	for _, c := range cs[:min(3, len(cs))] {
		names = append(names, c.key)
	}
	if len(names) == 1 {
		return fmt.Sprintf("; did you mean %s?", names[0])
	}
	return fmt.Sprintf("; did you mean %s or %s?", strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// distance is the Levenshtein distance of a and b, by bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
