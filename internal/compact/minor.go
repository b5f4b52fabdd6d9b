package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/failpoint"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/spool"
)

// Defaults of Tiers fields left zero.
const (
	DefaultFanout        = 8
	DefaultMinorMaxBytes = 64 << 20
)

// Tiers shape minor compaction (design.md §7): Fanout consecutive deltas of
// one level, written under one schema version, are merged into one delta of
// the next level, so a table streaming for any time holds at most about
// Fanout-1 deltas per level, and a level holds Fanout times the flushes of
// the one below it. Deltas larger than MaxBytes are left to a major
// compaction: merging them would copy much and gain little.
type Tiers struct {
	Fanout   int
	MaxBytes int64
}

func (t *Tiers) defaults() {
	if t.Fanout < 2 {
		t.Fanout = DefaultFanout
	}
	if t.MaxBytes <= 0 {
		t.MaxBytes = DefaultMinorMaxBytes
	}
}

// MinorResult describes one merge of a minor compaction.
type MinorResult struct {
	Table     cdc.TableID
	FromEpoch uint64
	Epoch     uint64
	Level     int // the merged delta's
	Merged    int // deltas merged
	Rows      int64
	Bytes     int64 // of the merged file
	Duration  time.Duration
}

// planMinor returns the oldest run of deltas that tiers merge, as indexes
// [i, j) into deltas, or ok false when no run is due: Fanout consecutive
// deltas of the same level and schema version, each at most MaxBytes.
func planMinor(deltas []manifest.Delta, tiers Tiers) (i, j int, ok bool) {
	start := 0
	for k := range deltas {
		d := deltas[k]
		if d.Bytes() > tiers.MaxBytes {
			start = k + 1
			continue
		}
		if k > start {
			p := deltas[k-1]
			if p.Level != d.Level || p.SchemaVersion != d.SchemaVersion {
				start = k
			}
		}
		if k+1-start == tiers.Fanout {
			return start, k + 1, true
		}
	}
	return 0, 0, false
}

// errNothingMerged aborts a commit whose merges all lost to another writer.
var errNothingMerged = errors.New("no merge left to commit")

// Minor merges, in every table of the manifest, the runs of deltas tiers
// say are due (planMinor), level after level, at most maxMergesPerTable a
// table, and commits them all with one compare-and-swap: merges must not
// add a manifest write per table beside the streamer's one a flush. The
// merged file holds exactly the run's change rows in their order — the
// order tokens, TOAST markers, truncate markers and deletes as written —
// so every reader (the merged state, the change rows, the changefeed) sees
// what it saw before; the base is not touched. A table whose deltas
// changed meanwhile other than by the streamer appending (a major
// compaction, a new generation) keeps them: its merges are dropped from
// the commit and their files left to garbage collection. The replaced
// files are retired by the merged deltas (their range and merged_at), not
// by Garbage entries.
func Minor(ctx context.Context, store blob.Store, mc *manifest.Committer, tiers Tiers, opts Options) ([]MinorResult, error) {
	opts.defaults()
	tiers.defaults()
	if opts.ScratchDir == "" {
		return nil, errors.New("minor compaction: no scratch directory")
	}
	if err := mc.Refresh(ctx); err != nil {
		return nil, fmt.Errorf("minor compaction: %w", err)
	}
	type planned struct {
		orig, merged []manifest.Delta
		gen          string
		results      []MinorResult
	}
	now := opts.Now().UTC()
	var (
		plans []planned
		errs  []error
	)
	ids := tableIDs(mc.Current())
	for _, id := range ids {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		mt := mc.Current().Tables[id.String()]
		p := planned{orig: mt.Deltas, merged: slices.Clone(mt.Deltas), gen: mt.Generation}
		for range maxMergesPerTable {
			i, j, ok := planMinor(p.merged, tiers)
			if !ok {
				break
			}
			d, res, err := mergeRun(ctx, store, mt, p.merged[i:j], now, opts)
			if err != nil {
				opts.Log.Error("minor compaction failed; the table keeps its deltas", "table", id.String(), "err", err)
				errs = append(errs, err)
				break
			}
			p.merged = slices.Replace(p.merged, i, j, d)
			p.results = append(p.results, res)
		}
		if len(p.results) > 0 {
			plans = append(plans, p)
		}
	}
	if len(plans) == 0 {
		return nil, errors.Join(errs...)
	}
	var committed []MinorResult
	_, err := mc.Commit(ctx, func(m *manifest.Manifest) error {
		committed = committed[:0]
		for _, p := range plans {
			id := p.results[0].Table
			t := m.Tables[id.String()]
			if t == nil || t.Generation != p.gen || len(t.Deltas) < len(p.orig) || !slices.EqualFunc(t.Deltas[:len(p.orig)], p.orig, sameDelta) {
				opts.Log.Info("the table changed while its deltas were merged; it keeps them", "table", id.String())
				continue
			}
			// The streamer only appends: the deltas after the ones read
			// stay, after the merged ones.
			t.Deltas = append(slices.Clone(p.merged), t.Deltas[len(p.orig):]...)
			committed = append(committed, p.results...)
		}
		if len(committed) == 0 {
			return errNothingMerged // no version for nothing
		}
		return nil
	})
	if errors.Is(err, errNothingMerged) {
		return nil, errors.Join(errs...)
	}
	if err != nil {
		return nil, errors.Join(append(errs, fmt.Errorf("minor compaction: commit: %w", err))...)
	}
	for _, r := range committed {
		opts.Log.Info("merged deltas", "table", r.Table.String(), "from_epoch", r.FromEpoch, "epoch", r.Epoch,
			"level", r.Level, "deltas", r.Merged, "rows", r.Rows, "bytes", r.Bytes, "duration", r.Duration.Round(time.Millisecond))
	}
	return committed, errors.Join(errs...)
}

// mergeRun writes run's rows into one file and returns the delta that
// replaces run.
func mergeRun(ctx context.Context, store blob.Store, mt *manifest.Table, run []manifest.Delta, now time.Time, opts Options) (manifest.Delta, MinorResult, error) {
	start := time.Now()
	id := mt.ID()
	res := MinorResult{Table: id, FromEpoch: run[0].First(), Epoch: run[len(run)-1].Epoch, Merged: len(run)}
	for _, d := range run {
		res.Level = max(res.Level, d.Level+1)
	}
	fail := func(err error) (manifest.Delta, MinorResult, error) {
		return manifest.Delta{}, res, fmt.Errorf("minor compaction of %s, epochs %d to %d: %w", id, res.FromEpoch, res.Epoch, err)
	}
	table, err := mt.SourceTableAt(run[0].SchemaVersion)
	if err != nil {
		return fail(err)
	}
	schema, err := parquetfile.NewSchema(table)
	if err != nil {
		return fail(err)
	}
	dir, err := scratchDir(opts.ScratchDir, manifest.EscapeKeyElement(id.Schema)+"."+manifest.EscapeKeyElement(id.Name)+".minor")
	if err != nil {
		return fail(fmt.Errorf("clear scratch: %w", err))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(fmt.Errorf("scratch: %w", err))
	}
	defer os.RemoveAll(dir)

	out, err := spool.Create(dir, schema)
	if err != nil {
		return fail(err)
	}
	defer out.Remove()
	for _, d := range run {
		for _, f := range d.Files {
			if err := copyRows(ctx, store, f.Path, schema, out, dir); err != nil {
				return fail(err)
			}
		}
	}
	size, err := out.Finish()
	if err != nil {
		return fail(err)
	}
	merged := manifest.Delta{
		Epoch: res.Epoch, FromEpoch: res.FromEpoch, Level: res.Level, MergedAt: &now,
		MinLSN: run[0].MinLSN, SchemaVersion: run[0].SchemaVersion,
	}
	for _, d := range run {
		merged.MinLSN = min(merged.MinLSN, d.MinLSN)
		merged.MaxLSN = max(merged.MaxLSN, d.MaxLSN)
		merged.Rows += d.Rows
		merged.Adjusted = addCounts(merged.Adjusted, d.Adjusted)
		merged.UnrecoveredTOAST = addCounts(merged.UnrecoveredTOAST, d.UnrecoveredTOAST)
	}
	if out.Rows() != merged.Rows {
		// The manifest's counts and the files disagree: merging would
		// hide it.
		return fail(fmt.Errorf("the files hold %d rows, the manifest says %d", out.Rows(), merged.Rows))
	}
	key := manifest.MergedKey(id, mt.Generation, res.FromEpoch, res.Epoch, 0)
	if err := out.Upload(ctx, store, key); err != nil {
		return fail(err)
	}
	failpoint.Inject("compact/minor-after-upload")
	merged.Files = []manifest.File{{Path: key, Rows: merged.Rows, Bytes: size}}
	res.Rows, res.Bytes, res.Duration = merged.Rows, size, time.Since(start)
	return merged, res, nil
}

// sameDelta reports whether two manifest versions hold the same delta.
func sameDelta(a, b manifest.Delta) bool {
	return a.Epoch == b.Epoch && a.First() == b.First() &&
		slices.EqualFunc(a.Files, b.Files, func(x, y manifest.File) bool { return x.Path == y.Path })
}

func addCounts(dst, src map[string]int64) map[string]int64 {
	for k, v := range src {
		if dst == nil {
			dst = map[string]int64{}
		}
		dst[k] += v
	}
	return dst
}

// copyRows appends the rows of the file at key to out, in the file's order.
// The file must have been written with schema exactly: a merged file has
// one schema.
func copyRows(ctx context.Context, store blob.Store, key string, schema *parquetfile.Schema, out *spool.File, dir string) error {
	local, err := blob.Download(ctx, store, key, dir, "in-*.parquet")
	if err != nil {
		return err
	}
	defer os.Remove(local)
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return fmt.Errorf("file %s: %w", key, err)
	}
	if !parquet.EqualNodes(pf.Schema(), schema.Parquet()) {
		return fmt.Errorf("file %s: written with another layout than its schema version's", key)
	}
	r := parquet.NewReader(pf)
	defer r.Close()
	rows := make([]parquet.Row, 256)
	for {
		n, err := r.ReadRows(rows)
		for _, row := range rows[:n] {
			if werr := out.WriteRow(row); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("file %s: %w", key, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
