package manifest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FirstGeneration names every table's first lineage of files (design.md §8).
const FirstGeneration = "g0001"

// NextGeneration returns the generation after gen: "g0001" → "g0002". A
// rebuild or a re-snapshot loads its files under the next generation's
// prefix, beside the current one, so readers keep the current generation,
// whole, until one manifest write switches the table to the next. Past
// g9999 the number simply grows a digit ("g10000"): keys stay distinct.
func NextGeneration(gen string) (string, error) {
	digits, ok := strings.CutPrefix(gen, "g")
	n, err := strconv.ParseUint(digits, 10, 32)
	if !ok || err != nil || digits == "" || digits[0] == '+' || n == 0 {
		return "", fmt.Errorf("generation %q is not of the form g0001", gen)
	}
	return fmt.Sprintf("g%04d", n+1), nil
}

// GenerationAfter reports whether generation a comes after b: "g0010"
// after "g0009", "g10000" after "g9999" (a longer number is a larger one).
func GenerationAfter(a, b string) bool {
	return len(a) > len(b) || len(a) == len(b) && a > b
}

// Files lists every data file the table references: its base, then its
// deltas.
func (t *Table) Files() []File {
	var files []File
	if t.Base != nil {
		files = append(files, t.Base.Files...)
	}
	for _, d := range t.Deltas {
		files = append(files, d.Files...)
	}
	return files
}

// Retire lists files in Garbage as retired at at, each once: no reader of
// this manifest needs them, and gc deletes them once they have been retired
// for gc.grace_period (a reader may still hold an older manifest). A file
// already listed keeps its first retirement time.
func (m *Manifest) Retire(files []File, at time.Time) {
	for _, f := range files {
		if !slices.ContainsFunc(m.Garbage, func(r RetiredFile) bool { return r.Path == f.Path }) {
			m.Garbage = append(m.Garbage, RetiredFile{Path: f.Path, RetiredAt: at.UTC()})
		}
	}
}

// SwitchGeneration puts next in place of the table of the same name, and
// retires every file of the table it replaces (its whole generation) at
// at. It is the one mutation that moves a table to a new generation: the
// caller commits it in one conditional write, so a reader sees either the
// old generation or the new one, never a mix. next must name a generation
// other than the current one's, or the retired files would be its own.
func (m *Manifest) SwitchGeneration(next *Table, at time.Time) error {
	key := next.ID().String()
	if old := m.Tables[key]; old != nil {
		if old.Generation == next.Generation {
			return fmt.Errorf("switch table %s to generation %s: it is already the current generation", key, next.Generation)
		}
		m.Retire(old.Files(), at)
	}
	m.Tables[key] = next
	return nil
}
