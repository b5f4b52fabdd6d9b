package query

import (
	"maps"
	"slices"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// closest is the hint for an unknown table: "; did you mean a or b?" with
// the tables of ms whose names are nearest to name (readpath.Closest), or
// "" when none is near.
func closest(name string, ms ...*manifest.Manifest) string {
	keys := map[string]bool{}
	for _, m := range ms {
		for key := range m.Tables {
			keys[key] = true
		}
	}
	return readpath.DidYouMean(readpath.Closest(name, slices.Sorted(maps.Keys(keys))))
}
