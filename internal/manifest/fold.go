package manifest

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Fold records that major compactions retired a range of one generation's
// files: every base of epoch From up to (not including) Through, and every
// delta of epoch after From up to Through. A major compaction writes a
// base of epoch Through from its base and the deltas up to Through, so the
// range is the files it replaced and nothing it wrote or the streamer
// writes later (a later flush's epoch is above Through); the deltas up to
// From were the earlier fold's. Folds take the place of one Garbage entry per folded
// file: a table compacted every few minutes would otherwise list thousands
// of files for the history's retention, in a manifest rewritten at every
// flush (design.md §7.6).
//
// The files are found by their keys (FileKey, MergedKey), so a fold covers
// the inputs of minor compactions as well, and the leftovers of killed
// flushes and merges inside its range: all of them are kept as long as the
// fold's files and deleted with them.
type Fold struct {
	// Prefix is the generation's key prefix, "<schema>/<table>/<gen>/".
	Prefix  string `json:"prefix"`
	From    uint64 `json:"from_epoch"`
	Through uint64 `json:"through_epoch"`
	// RetiredAt is when the newest major compaction of the range was
	// committed: the whole range is kept as if retired then, which keeps
	// a file at most FoldWindow longer than its own retirement needs.
	RetiredAt time.Time `json:"retired_at"`
	// Since is when the first major compaction of the range was committed.
	Since time.Time `json:"since"`
	// Version is the manifest version that committed the newest major
	// compaction of the range: a catalog publisher that published an
	// older version looks for what the folds after it retired in the
	// history (catalog.PlanChangelog).
	Version uint64 `json:"version"`
}

// FoldPrefix is the key prefix of table t's generation gen.
func FoldPrefix(t *Table) string {
	return EscapeKeyElement(t.Schema) + "/" + EscapeKeyElement(t.Name) + "/" + EscapeKeyElement(t.Generation) + "/"
}

// AddFold records the major compaction of table t, committed as manifest
// version version at at, which replaced its base of epoch from (0 for a
// snapshot's, or none) with one of epoch through, retiring the files
// retired. It extends the newest fold of the generation when that fold's
// range ends at from and it began less than window ago, so a table holds
// about retention ÷ window folds however often it is compacted; otherwise
// it adds a fold. A retired file the fold does not hold by its key (one
// outside FileKey's layout) is listed in Garbage, so no retired file is
// ever left to the orphan rule.
func (m *Manifest) AddFold(t *Table, from, through, version uint64, at time.Time, window time.Duration, retired []File) {
	at = at.UTC()
	f := m.fold(FoldPrefix(t), from, through, version, at, window)
	for _, r := range retired {
		if !f.Holds(r.Path) {
			m.Retire([]File{r}, at)
		}
	}
}

func (m *Manifest) fold(prefix string, from, through, version uint64, at time.Time, window time.Duration) Fold {
	for i := len(m.Folds) - 1; i >= 0; i-- {
		f := &m.Folds[i]
		if f.Prefix != prefix {
			continue
		}
		if f.Through == from && at.Sub(f.Since) < window {
			f.Through, f.RetiredAt, f.Version = through, at, version
			return *f
		}
		break
	}
	m.Folds = append(m.Folds, Fold{Prefix: prefix, From: from, Through: through, RetiredAt: at, Since: at, Version: version})
	return m.Folds[len(m.Folds)-1]
}

// Holds reports whether key is one of the files fold f retired, by the
// layout FileKey and MergedKey fix: <prefix><kind>/<epoch>/<name>.
func (f Fold) Holds(key string) bool {
	rest, ok := strings.CutPrefix(key, f.Prefix)
	if !ok {
		return false
	}
	kind, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return false
	}
	dir, name, ok := strings.Cut(rest, "/")
	if !ok || strings.Contains(name, "/") {
		return false
	}
	epoch, err := strconv.ParseUint(dir, 10, 64)
	if err != nil {
		return false
	}
	switch Kind(kind) {
	case KindBase:
		return f.From <= epoch && epoch < f.Through
	case KindDelta:
		return f.From < epoch && epoch <= f.Through
	}
	return false
}

// FoldedAt says when the file at key was retired by a fold of m: the
// newest retirement among the folds that hold it (a fold is never older
// than the retirement of the files it holds).
func (m *Manifest) FoldedAt(key string) (time.Time, bool) {
	var at time.Time
	found := false
	for _, f := range m.Folds {
		if f.Holds(key) {
			found = true
			if f.RetiredAt.After(at) {
				at = f.RetiredAt
			}
		}
	}
	return at, found
}

// Folded walks the history from version from to version to and returns
// the files the major compactions of table key in between retired: at
// each version whose base differs from the version before's (in the same
// generation), the files the version before referenced that it does not,
// stamped with its commit time. It is how the files behind a fold are
// found again (a fold names a range, and the range also holds what minor
// compactions merged and killed writers left, which must not be counted);
// the walk reads one log entry a version.
func (h *History) Folded(ctx context.Context, key string, from, to uint64) ([]RetiredFile, error) {
	var (
		out  []RetiredFile
		prev *Table
	)
	err := h.Walk(ctx, from, to, func(v *Manifest) error {
		t := v.Tables[key]
		if prev != nil && t != nil && t.Generation == prev.Generation && !sameBaseFiles(prev.Base, t.Base) {
			kept := map[string]bool{}
			for _, f := range t.Files() {
				kept[f.Path] = true
			}
			for _, f := range prev.Files() {
				if !kept[f.Path] {
					out = append(out, RetiredFile{Path: f.Path, RetiredAt: v.CommittedAt})
				}
			}
		}
		prev = t
		return nil
	})
	return out, err
}

// sameBaseFiles reports whether two bases are the same files.
func sameBaseFiles(a, b *Base) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return slices.EqualFunc(a.Files, b.Files, func(x, y File) bool { return x.Path == y.Path })
}
