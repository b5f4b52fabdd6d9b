package compact

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Defaults of Policy fields left zero.
const (
	DefaultMajorDeltaRatio = 0.5
	DefaultMajorMinBytes   = 256 << 10
	DefaultMaxDeltaFiles   = 48
	// maxMergesPerTable bounds one pass's minor work on one table, so a
	// table with a long backlog of deltas (a daemon upgraded after weeks
	// without compaction) does not hold the others back.
	maxMergesPerTable = 64
)

// Policy says when the compaction inside start compacts a table
// (design.md §7): minor merges as Tiers says; a major compaction when the
// table holds more than MaxDeltaFiles delta files, when its deltas reach
// MajorDeltaRatio of its base's bytes and at least MajorMinBytes, or, with
// MajorInterval set, when its base is older than that and deltas wait.
// Size and count bound what a read merges; the ratio makes a major's cost
// (rewriting the base) proportional to the changes it folds.
type Policy struct {
	Tiers
	MajorDeltaRatio float64
	MajorMinBytes   int64
	MaxDeltaFiles   int
	MajorInterval   time.Duration
}

func (p *Policy) defaults() {
	p.Tiers.defaults()
	if p.MajorDeltaRatio <= 0 {
		p.MajorDeltaRatio = DefaultMajorDeltaRatio
	}
	if p.MajorMinBytes <= 0 {
		p.MajorMinBytes = DefaultMajorMinBytes
	}
	if p.MaxDeltaFiles <= 0 {
		p.MaxDeltaFiles = DefaultMaxDeltaFiles
	}
}

// MajorDue says why mt needs a major compaction now, or "" when it does
// not.
func (p Policy) MajorDue(mt *manifest.Table, now time.Time) string {
	p.defaults()
	files, bytes := mt.DeltaFiles()
	var baseBytes int64
	if mt.Base != nil {
		for _, f := range mt.Base.Files {
			baseBytes += f.Bytes
		}
	}
	switch {
	case len(mt.Deltas) == 0:
		return ""
	case files > p.MaxDeltaFiles:
		return fmt.Sprintf("%d delta files, more than %d", files, p.MaxDeltaFiles)
	case bytes >= p.MajorMinBytes && float64(bytes) >= p.MajorDeltaRatio*float64(baseBytes):
		return fmt.Sprintf("%d delta bytes, %.2f of the base's %d", bytes, float64(bytes)/float64(max(baseBytes, 1)), baseBytes)
	case p.MajorInterval > 0 && baseAge(mt, now) >= p.MajorInterval:
		return fmt.Sprintf("base older than %s", p.MajorInterval)
	}
	return ""
}

// baseAge is how long ago the table's base was written: by a compaction,
// or by the snapshot that completed it. A base of unknown age (a manifest
// written before those times were recorded) counts as older than any
// interval.
func baseAge(mt *manifest.Table, now time.Time) time.Duration {
	switch {
	case mt.Base != nil && mt.Base.CompactedAt != nil:
		return now.Sub(*mt.Base.CompactedAt)
	case mt.Snapshot.CompletedAt != nil:
		return now.Sub(*mt.Snapshot.CompletedAt)
	}
	return time.Duration(1<<63 - 1)
}

// AutoResult is one pass of Auto.
type AutoResult struct {
	Minor []MinorResult
	Major []Result
}

// Auto runs one pass of the compaction inside start over every table of the
// manifest: the minor merges that are due, in one commit (Minor), then a
// major compaction of each table the policy names. Nothing is
// collected here (Collect, on its own cadence). A table that fails is
// logged and reported in the joined error; the others still run.
func Auto(ctx context.Context, store blob.Store, mc *manifest.Committer, p Policy, opts Options) (AutoResult, error) {
	p.defaults()
	opts.defaults()
	var (
		res  AutoResult
		errs []error
	)
	minor, err := Minor(ctx, store, mc, p.Tiers, opts)
	res.Minor = minor
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range tableIDs(mc.Current()) {
		if ctx.Err() != nil {
			return res, errors.Join(append(errs, ctx.Err())...)
		}
		mt := mc.Current().Tables[id.String()]
		if mt == nil || !mt.Snapshot.Complete() || mt.Resnapshot != nil {
			continue
		}
		why := p.MajorDue(mt, opts.Now())
		if why == "" {
			continue
		}
		opts.Log.Debug("major compaction due", "table", id.String(), "why", why)
		r, err := Table(ctx, store, mc, id, opts)
		if errors.Is(err, ErrConcurrent) {
			continue
		}
		if err != nil {
			opts.Log.Error("compaction failed; the table keeps its previous base and deltas", "table", id.String(), "err", err)
			errs = append(errs, err)
			continue
		}
		if r.Skipped == "" {
			res.Major = append(res.Major, r)
		}
	}
	return res, errors.Join(errs...)
}

// tableIDs are m's tables, sorted.
func tableIDs(m *manifest.Manifest) []cdc.TableID {
	ids := make([]cdc.TableID, 0, len(m.Tables))
	for _, t := range m.Tables {
		ids = append(ids, t.ID())
	}
	slices.SortFunc(ids, cmpID)
	return ids
}
