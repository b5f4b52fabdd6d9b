package compact

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/failpoint"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// DefaultGracePeriod is gc.grace_period's default.
const DefaultGracePeriod = time.Hour

// DefaultRetention is history.retention's default.
const DefaultRetention = 7 * 24 * time.Hour

// CollectOptions tune a garbage collection.
type CollectOptions struct {
	// Grace is gc.grace_period (DefaultGracePeriod when zero): it must
	// exceed the longest flush or compaction and the longest a reader
	// holds an old manifest.
	Grace time.Duration
	// Retention is history.retention (DefaultRetention when zero): every
	// version committed within it stays readable (manifest.History), so
	// it bounds Grace from below.
	Retention time.Duration
	// Pinned returns the versions refs pin (nil: none): their files and
	// the log they are read from are kept whatever their age.
	Pinned func(ctx context.Context) ([]uint64, error)
	// KeepRetired keeps every retired file at least this long after its
	// retirement, beyond Grace and Retention: a published Iceberg
	// snapshot may still name it (catalog.Retention).
	KeepRetired time.Duration
	// Referenced returns the sink keys something outside the manifest
	// still names (nil: nothing does): the files of the snapshots an
	// Iceberg catalog retains (catalog.Publisher.Referenced). They are
	// kept whatever their age; an error stops the collection before it
	// deletes anything.
	Referenced func(ctx context.Context, m *manifest.Manifest) (map[string]bool, error)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (o *CollectOptions) defaults() {
	if o.Grace <= 0 {
		o.Grace = DefaultGracePeriod
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// CollectResult describes one garbage collection.
type CollectResult struct {
	Retired  int   // retired files deleted
	Orphans  int   // unreferenced files deleted (uploads no manifest ever named)
	Waiting  int   // retired or orphaned files younger than the grace period (or named by a retained or pinned version)
	Bytes    int64 // of the orphans deleted
	Duration time.Duration
	// LogDeleted counts the history log objects deleted (entries and
	// checkpoints of versions older than the retention).
	LogDeleted int
	// Oldest is the oldest manifest version readable afterwards (0 for a
	// manifest written before versions existed, which has no log).
	Oldest uint64
	// UnreadablePins lists pinned versions the log can no longer rebuild,
	// for which nothing could be kept.
	UnreadablePins []uint64
}

// Collect deletes what no reader can need, in this order:
//
//  1. the history log (manifest.History) of versions older than the
//     retention: the version that was current at now - Retention and
//     every later one stay readable, and so does every pinned version; the
//     oldest readable version is recorded first, so a reader never finds
//     it deleted;
//  2. files the manifest lists as retired for longer than max(Grace,
//     Retention, KeepRetired) — versions committed within the retention may still name
//     them — unless the oldest retained version or a pinned version names
//     them;
//  3. orphans: files under the tables' prefixes that the manifest neither
//     references nor lists, that no retained or pinned version names, and
//     that are older than Grace (written by a flush or compaction that died
//     before its commit).
//
// Nothing else under _pgcdc/ is touched. The oldest retained version is
// rebuilt and its files kept, so a file a retained version names is never
// deleted, whatever the clocks: the age rule alone would delete a file
// whose retiring compaction straddled the boundary.
//
// The manifest is committed after the deletions, so a kill in between only
// leaves entries whose files are already gone; the next Collect deletes them
// again (deleting a missing key is not an error) and drops them.
func Collect(ctx context.Context, store blob.Store, mc *manifest.Committer, o CollectOptions) (CollectResult, error) {
	o.defaults()
	start := time.Now()
	var res CollectResult
	if err := mc.Refresh(ctx); err != nil {
		return res, fmt.Errorf("collect garbage: %w", err)
	}
	m := mc.Current()
	now := o.Now()
	objects, err := store.List(ctx, "")
	if err != nil {
		return res, fmt.Errorf("collect garbage: %w", err)
	}
	// The manifest as it is after the listing: a flush that committed
	// since m was read names files m does not (they are not orphans), and
	// the one in flight uploads the epoch after it.
	after := m
	if err := mc.Refresh(ctx); err == nil {
		after = mc.Current()
	}
	liveAfter := referenced(after)
	keep, err := collectHistory(ctx, store, m, objects, now, o, &res)
	if err != nil {
		return res, fmt.Errorf("collect garbage: %w", err)
	}

	if o.Referenced != nil {
		named, err := o.Referenced(ctx, m)
		if err != nil {
			return res, fmt.Errorf("collect garbage: %w", err)
		}
		if keep == nil {
			keep = map[string]bool{}
		}
		maps.Copy(keep, named)
	}
	cutoff := now.Add(-o.Grace)
	retiredCutoff := now.Add(-max(o.Grace, o.Retention, o.KeepRetired))
	live := referenced(m)
	listed := make(map[string]bool, len(m.Garbage))
	var due []string
	for _, g := range m.Garbage {
		listed[g.Path] = true
		if live[g.Path] {
			continue // referenced again (cannot happen; never delete it)
		}
		if g.RetiredAt.After(retiredCutoff) || keep[g.Path] {
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

	current := currentGenerations(m)
	spans := mergedSpans(m)
	var waiting []string // files folds hold that this pass keeps
	for _, obj := range objects {
		if strings.HasPrefix(obj.Key, "_pgcdc/") || !strings.HasSuffix(obj.Key, ".parquet") || live[obj.Key] || listed[obj.Key] {
			continue
		}
		at, ok := spans.retired(obj.Key)
		fat, folded := m.FoldedAt(obj.Key)
		if folded {
			at, ok = later(at, fat), true
		}
		if ok {
			// A delta file a minor compaction merged, or a file a major
			// one folded: retired when the delta that holds its rows or
			// the fold was written, and kept like any retired file.
			if at.After(retiredCutoff) || keep[obj.Key] || obj.Modified.IsZero() || obj.Modified.After(cutoff) {
				if folded {
					waiting = append(waiting, obj.Key)
				}
				res.Waiting++
				continue
			}
			failpoint.Inject("gc/delete")
			if err := store.Delete(ctx, obj.Key); err != nil {
				return res, fmt.Errorf("collect garbage: %w", err)
			}
			res.Retired++
			continue
		}
		if liveAfter[obj.Key] || inFlight(obj.Key, after.Epoch) {
			// A flush uploads its files before the manifest names them,
			// always as the epoch after the manifest's: they are not
			// orphans, however long the flush takes (a flush slower than
			// gc.grace_period lost its files to a collection beside it:
			// TestCompactionBesideStreamer/s3 under load). A killed
			// flush's leftovers become orphans once a later epoch commits.
			res.Waiting++
			continue
		}
		if building(obj.Key, current) {
			// A generation after the table's current one is being loaded
			// (pg-cdc rebuild copies it before one manifest write names
			// it); a rebuild longer than the grace period must not lose
			// it. An abandoned one is overwritten by the next attempt,
			// and its leftovers become orphans once a switch makes that
			// generation current.
			res.Waiting++
			continue
		}
		if obj.Modified.IsZero() || obj.Modified.After(cutoff) || keep[obj.Key] {
			res.Waiting++
			continue
		}
		failpoint.Inject("gc/delete")
		if err := store.Delete(ctx, obj.Key); err != nil {
			return res, fmt.Errorf("collect garbage: %w", err)
		}
		res.Orphans++
		res.Bytes += obj.Size
	}

	// A fold is dropped once its files are all deleted: one a retained or
	// pinned version still names keeps its fold, so it stays a retired
	// file, never taken for an orphan or for a live one.
	expired := func(f manifest.Fold) bool {
		return !f.RetiredAt.After(retiredCutoff) && !slices.ContainsFunc(waiting, f.Holds)
	}
	if len(due) > 0 || slices.ContainsFunc(m.Folds, expired) {
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
			m.Folds = slices.DeleteFunc(m.Folds, expired)
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("collect garbage: %w", err)
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

// collectHistory prunes the history log to the retention and returns the
// files the versions it keeps readable name beyond the current manifest:
// those of the oldest retained version and of every pinned one.
func collectHistory(ctx context.Context, store blob.Store, m *manifest.Manifest, objects []blob.ObjectInfo, now time.Time, o CollectOptions, res *CollectResult) (map[string]bool, error) {
	if m.Version == 0 {
		return nil, nil // written before versions existed: there is no log yet
	}
	var pinned []uint64
	if o.Pinned != nil {
		var err error
		if pinned, err = o.Pinned(ctx); err != nil {
			return nil, fmt.Errorf("pinned versions: %w", err)
		}
	}
	hist := manifest.NewHistory(store)
	boundary, ok, err := hist.VersionAt(ctx, now.Add(-o.Retention))
	if err != nil {
		return nil, fmt.Errorf("history retention: %w", err)
	}
	if !ok {
		// Every readable version is younger than the retention.
		oldest, err := hist.Oldest(ctx)
		if err != nil {
			return nil, fmt.Errorf("history retention: %w", err)
		}
		boundary = oldest.Version
	}
	plan := manifest.PlanRetention(objects, boundary, m.Version, pinned)
	res.Oldest, res.UnreadablePins = plan.Oldest, plan.Unreadable
	keep := map[string]bool{}
	for _, v := range plan.Keep {
		if v == m.Version {
			continue // the current manifest's files are live already
		}
		old, err := hist.At(ctx, v)
		if err != nil {
			return nil, fmt.Errorf("history retention: files of version %d: %w", v, err)
		}
		for path := range referenced(old) {
			keep[path] = true
		}
	}
	// Record the new oldest before deleting below it: a reader that finds
	// a version missing then learns it is outside the retention.
	if err := hist.SetOldest(ctx, plan.Oldest); err != nil {
		return nil, fmt.Errorf("history retention: %w", err)
	}
	for _, key := range plan.Delete {
		if err := store.Delete(ctx, key); err != nil {
			return nil, fmt.Errorf("history retention: %w", err)
		}
		res.LogDeleted++
	}
	return keep, nil
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

// inFlight reports whether key is a delta file of the epoch after epoch:
// one a flush has uploaded and not committed yet (a flush always commits
// the manifest's epoch + 1; manifest.FileKey's .../delta/<epoch>/part-N).
func inFlight(key string, epoch uint64) bool {
	parts := strings.Split(key, "/")
	if len(parts) < 3 || parts[len(parts)-3] != string(manifest.KindDelta) {
		return false
	}
	e, err := strconv.ParseUint(parts[len(parts)-2], 10, 64)
	return err == nil && e == epoch+1
}

// span is the epochs a merged delta holds and when it was written or
// retired.
type span struct {
	from, to uint64
	at       time.Time
}

// spans are the merged deltas of every table, by the key prefix of their
// generation's deltas ("<schema>/<table>/<gen>/delta/").
type spans map[string][]span

// mergedSpans lists the merged deltas m names: those its tables hold
// (retired their inputs at merged_at) and those it lists as retired (a
// major compaction folded them; their inputs were retired no later).
func mergedSpans(m *manifest.Manifest) spans {
	out := spans{}
	for _, t := range m.Tables {
		for _, d := range t.Deltas {
			if d.FromEpoch == 0 || d.MergedAt == nil || len(d.Files) == 0 {
				continue
			}
			if prefix, _, ok := deltaKey(d.Files[0].Path); ok {
				out[prefix] = append(out[prefix], span{d.FromEpoch, d.Epoch, *d.MergedAt})
			}
		}
	}
	for _, g := range m.Garbage {
		prefix, rest, ok := deltaKey(g.Path)
		if !ok {
			continue
		}
		epoch, name, _ := strings.Cut(rest, "/")
		var from uint64
		if _, err := fmt.Sscanf(name, "from-%d-", &from); err != nil {
			continue // a flush's delta, not a merged one
		}
		to, err := strconv.ParseUint(epoch, 10, 64)
		if err == nil {
			out[prefix] = append(out[prefix], span{from, to, g.RetiredAt})
		}
	}
	return out
}

// retired says when the delta file at key was retired by a merge: the
// newest time among the merged deltas whose epochs hold its epoch (the
// latest is the safe one; a file merged twice was retired by the first).
func (s spans) retired(key string) (time.Time, bool) {
	prefix, rest, ok := deltaKey(key)
	if !ok || len(s[prefix]) == 0 {
		return time.Time{}, false
	}
	dir, _, _ := strings.Cut(rest, "/")
	epoch, err := strconv.ParseUint(dir, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var at time.Time
	found := false
	for _, sp := range s[prefix] {
		if sp.from <= epoch && epoch <= sp.to {
			found = true
			if sp.at.After(at) {
				at = sp.at
			}
		}
	}
	return at, found
}

// deltaKey splits a delta file's key (manifest.FileKey, MergedKey) into
// "<schema>/<table>/<gen>/delta/" and "<epoch>/<name>".
func deltaKey(key string) (prefix, rest string, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 6 || parts[3] != string(manifest.KindDelta) {
		return "", "", false
	}
	return strings.Join(parts[:4], "/") + "/", parts[4] + "/" + parts[5], true
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
