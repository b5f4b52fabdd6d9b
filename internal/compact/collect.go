package compact

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/failpoint"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// DefaultGracePeriod is gc.grace_period's default.
const DefaultGracePeriod = time.Hour

// CollectResult describes one garbage collection.
type CollectResult struct {
	Retired  int   // retired files deleted
	Orphans  int   // unreferenced files deleted (uploads no manifest ever named)
	Waiting  int   // retired or orphaned files younger than the grace period
	Bytes    int64 // of the orphans deleted
	Duration time.Duration
}

// Collect deletes data files that no reader can need: files the manifest
// lists as retired for longer than grace, and orphans, files under the
// tables' prefixes that the manifest neither references nor lists and that
// are older than grace (written by a flush or compaction that died before
// its commit). Nothing under _pgcdc/ is touched. grace must exceed the
// longest flush or compaction and the longest a reader holds an old manifest.
//
// The manifest is committed after the deletions, so a kill in between only
// leaves entries whose files are already gone; the next Collect deletes them
// again (deleting a missing key is not an error) and drops them.
func Collect(ctx context.Context, store blob.Store, mc *manifest.Committer, grace time.Duration, now func() time.Time) (CollectResult, error) {
	start := time.Now()
	var res CollectResult
	if now == nil {
		now = time.Now
	}
	if err := mc.Refresh(ctx); err != nil {
		return res, fmt.Errorf("collect garbage: %w", err)
	}
	m := mc.Current()
	cutoff := now().Add(-grace)
	live := referenced(m)
	listed := make(map[string]bool, len(m.Garbage))
	var due []string
	for _, g := range m.Garbage {
		listed[g.Path] = true
		if live[g.Path] {
			continue // referenced again (cannot happen; never delete it)
		}
		if g.RetiredAt.After(cutoff) {
			res.Waiting++
			continue
		}
		due = append(due, g.Path)
	}
	for _, key := range due {
		failpoint.Inject("gc/delete")
		if err := store.Delete(ctx, key); err != nil {
			return res, fmt.Errorf("collect garbage: %w", err)
		}
		res.Retired++
	}

	objects, err := store.List(ctx, "")
	if err != nil {
		return res, fmt.Errorf("collect garbage: %w", err)
	}
	current := currentGenerations(m)
	for _, o := range objects {
		if strings.HasPrefix(o.Key, "_pgcdc/") || !strings.HasSuffix(o.Key, ".parquet") || live[o.Key] || listed[o.Key] {
			continue
		}
		if building(o.Key, current) {
			// A generation after the table's current one is being loaded
			// (pg-cdc rebuild copies it before one manifest write names
			// it); a rebuild longer than the grace period must not lose
			// it. An abandoned one is overwritten by the next attempt,
			// and its leftovers become orphans once a switch makes that
			// generation current.
			res.Waiting++
			continue
		}
		if o.Modified.IsZero() || o.Modified.After(cutoff) {
			res.Waiting++
			continue
		}
		failpoint.Inject("gc/delete")
		if err := store.Delete(ctx, o.Key); err != nil {
			return res, fmt.Errorf("collect garbage: %w", err)
		}
		res.Orphans++
		res.Bytes += o.Size
	}

	if len(due) > 0 {
		gone := make(map[string]bool, len(due))
		for _, k := range due {
			gone[k] = true
		}
		_, err := mc.Commit(ctx, func(m *manifest.Manifest) error {
			kept := m.Garbage[:0]
			for _, g := range m.Garbage {
				if !gone[g.Path] {
					kept = append(kept, g)
				}
			}
			m.Garbage = kept
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("collect garbage: %w", err)
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

// currentGenerations maps each table's key prefix ("<schema>/<table>",
// escaped as in keys) to its current generation.
func currentGenerations(m *manifest.Manifest) map[string]string {
	gens := make(map[string]string, len(m.Tables))
	for _, t := range m.Tables {
		gens[manifest.EscapeKeyElement(t.Schema)+"/"+manifest.EscapeKeyElement(t.Name)] = t.Generation
	}
	return gens
}

// building reports whether key is a data file of a generation after its
// table's current one.
func building(key string, current map[string]string) bool {
	parts := strings.SplitN(key, "/", 4)
	if len(parts) < 4 {
		return false
	}
	gen, ok := current[parts[0]+"/"+parts[1]]
	return ok && manifest.GenerationAfter(parts[2], gen)
}

// referenced returns every file the manifest's tables name.
func referenced(m *manifest.Manifest) map[string]bool {
	live := map[string]bool{}
	for _, t := range m.Tables {
		if t.Base != nil {
			for _, f := range t.Base.Files {
				live[f.Path] = true
			}
		}
		for _, d := range t.Deltas {
			for _, f := range d.Files {
				live[f.Path] = true
			}
		}
		if r := t.Resnapshot; r != nil {
			// The next generation being built: no reader needs it yet,
			// but the switch will.
			for _, d := range r.Deltas {
				for _, f := range d.Files {
					live[f.Path] = true
				}
			}
		}
	}
	return live
}
