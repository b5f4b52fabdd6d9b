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

// Minor merges the oldest due run of a table's deltas into one delta
// (planMinor), and reports done false when none is due. The merged file
// holds exactly the runs' change rows in their order — the order tokens,
// TOAST markers, truncate markers and deletes as written — so every reader
// (the merged state, the change rows, the changefeed) sees what it saw
// before; the base is not touched. Like Table it commits with
// compare-and-swap, giving up (ErrConcurrent) if the run left the table
// meanwhile. The replaced files are retired by the merged delta itself
// (its range and merged_at), not by Garbage entries.
func Minor(ctx context.Context, store blob.Store, mc *manifest.Committer, id cdc.TableID, tiers Tiers, opts Options) (res MinorResult, done bool, err error) {
	opts.defaults()
	tiers.defaults()
	start := time.Now()
	res.Table = id
	if opts.ScratchDir == "" {
		return res, false, errors.New("minor compaction: no scratch directory")
	}
	if err := mc.Refresh(ctx); err != nil {
		return res, false, fmt.Errorf("minor compaction of %s: %w", id, err)
	}
	mt := mc.Current().Tables[id.String()]
	if mt == nil {
		return res, false, fmt.Errorf("minor compaction of %s: the table is not in the manifest", id)
	}
	i, j, ok := planMinor(mt.Deltas, tiers)
	if !ok {
		return res, false, nil
	}
	run := slices.Clone(mt.Deltas[i:j])
	res.FromEpoch, res.Epoch, res.Merged = run[0].First(), run[len(run)-1].Epoch, len(run)
	for _, d := range run {
		res.Level = max(res.Level, d.Level+1)
	}
	table, err := mt.SourceTableAt(run[0].SchemaVersion)
	if err != nil {
		return res, false, fmt.Errorf("minor compaction of %s: %w", id, err)
	}
	schema, err := parquetfile.NewSchema(table)
	if err != nil {
		return res, false, fmt.Errorf("minor compaction of %s: %w", id, err)
	}
	dir, err := scratchDir(opts.ScratchDir, manifest.EscapeKeyElement(id.Schema)+"."+manifest.EscapeKeyElement(id.Name)+".minor")
	if err != nil {
		return res, false, fmt.Errorf("minor compaction of %s: clear scratch: %w", id, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, false, fmt.Errorf("minor compaction of %s: scratch: %w", id, err)
	}
	defer os.RemoveAll(dir)

	out, err := spool.Create(dir, schema)
	if err != nil {
		return res, false, fmt.Errorf("minor compaction of %s: %w", id, err)
	}
	defer out.Remove()
	for _, d := range run {
		for _, f := range d.Files {
			if err := copyRows(ctx, store, f.Path, schema, out, dir); err != nil {
				return res, false, fmt.Errorf("minor compaction of %s: epochs %d to %d: %w", id, res.FromEpoch, res.Epoch, err)
			}
		}
	}
	size, err := out.Finish()
	if err != nil {
		return res, false, fmt.Errorf("minor compaction of %s: %w", id, err)
	}
	merged := manifest.Delta{
		Epoch: res.Epoch, FromEpoch: res.FromEpoch, Level: res.Level,
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
		return res, false, fmt.Errorf("minor compaction of %s: epochs %d to %d: the files hold %d rows, the manifest says %d",
			id, res.FromEpoch, res.Epoch, out.Rows(), merged.Rows)
	}
	key := manifest.MergedKey(id, mt.Generation, res.FromEpoch, res.Epoch, 0)
	if err := out.Upload(ctx, store, key); err != nil {
		return res, false, fmt.Errorf("minor compaction of %s: %w", id, err)
	}
	merged.Files = []manifest.File{{Path: key, Rows: merged.Rows, Bytes: size}}
	res.Rows, res.Bytes = merged.Rows, size
	failpoint.Inject("compact/minor-after-upload")

	now := opts.Now().UTC()
	merged.MergedAt = &now
	_, err = mc.Commit(ctx, func(m *manifest.Manifest) error {
		t := m.Tables[id.String()]
		if t == nil {
			return fmt.Errorf("the table left the manifest while it was compacted")
		}
		if t.Generation != mt.Generation {
			return fmt.Errorf("%w: generation %s replaced %s", ErrConcurrent, t.Generation, mt.Generation)
		}
		at := slices.IndexFunc(t.Deltas, func(d manifest.Delta) bool { return sameDelta(d, run[0]) })
		if at < 0 || at+len(run) > len(t.Deltas) || !slices.EqualFunc(t.Deltas[at:at+len(run)], run, sameDelta) {
			return fmt.Errorf("%w: the deltas of epochs %d to %d changed", ErrConcurrent, res.FromEpoch, res.Epoch)
		}
		// The run's files are not listed in Garbage: the merged delta's
		// range and merged_at say they were retired (Collect's
		// mergedRetirement), so the manifest does not grow with merges.
		t.Deltas = slices.Replace(t.Deltas, at, at+len(run), merged)
		return nil
	})
	if err != nil {
		return res, false, fmt.Errorf("minor compaction of %s: commit: %w", id, err)
	}
	res.Duration = time.Since(start)
	opts.Log.Info("merged deltas", "table", id.String(), "from_epoch", res.FromEpoch, "epoch", res.Epoch,
		"level", res.Level, "deltas", res.Merged, "rows", res.Rows, "bytes", res.Bytes, "duration", res.Duration.Round(time.Millisecond))
	return res, true, nil
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
