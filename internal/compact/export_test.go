package compact

import "github.com/pg-cdc/pg-cdc/internal/manifest"

// PlanMinorForTest returns the deltas planMinor would merge (nil: none).
func PlanMinorForTest(deltas []manifest.Delta, tiers Tiers) []manifest.Delta {
	i, j, ok := planMinor(deltas, tiers)
	if !ok {
		return nil
	}
	return deltas[i:j]
}
