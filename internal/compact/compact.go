// Package compact folds a table's deltas into a new base (design.md §7) and
// collects the files no manifest needs any more (design.md §2).
//
// Safety beside a running streamer comes from the manifest alone:
//
//  1. compaction reads one manifest version and merges exactly the base and
//     deltas it names (package merge), writing the result as new base files
//     under base/<E>/, E being the newest folded epoch;
//  2. it commits with compare-and-swap a mutation that replaces the base and
//     removes exactly the folded deltas, so deltas the streamer added
//     meanwhile stay; if another compaction replaced the base first, it
//     gives up and leaves its files to garbage collection;
//  3. the files it replaced are listed as retired in the manifest and
//     deleted by Collect only after gc.grace_period.
//
// A kill at any step leaves the previous manifest authoritative: files
// written before the commit are unreferenced (a rerun writes the same keys
// with the same content, since the output depends only on the inputs and
// the settings), and retired files are deleted again by the next Collect.
package compact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/failpoint"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/merge"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/spool"
)

// Defaults of Options fields left zero.
const (
	DefaultTombstoneTTL    = 720 * time.Hour
	DefaultTargetFileBytes = 256 << 20
)

// ErrConcurrent is returned when another compaction replaced the table's base
// while this one ran; its work is discarded and the table is left as the
// other one made it.
var ErrConcurrent = errors.New("the table was compacted concurrently")

// Options tune a compaction.
type Options struct {
	// ScratchDir holds inputs, sort runs and output files while a table is
	// compacted (state.path/compact). Required.
	ScratchDir string
	// MemoryBytes bounds the merge's sort buffer (merge.DefaultMemoryBytes
	// when zero).
	MemoryBytes int64
	// TombstoneTTL is how long a delete stays in the base as a tombstone,
	// counted back from the newest commit time among the inputs (not the
	// clock), so the output depends only on the inputs.
	TombstoneTTL time.Duration
	// TargetFileBytes starts a new base file once the current one reaches
	// about this size.
	TargetFileBytes int64
	// Now stamps the new base and the retired files (time.Now when nil).
	Now func() time.Time
	// Log receives one line per compacted table (slog.Default when nil).
	Log *slog.Logger
	// Retention (history.retention) and Pinned are Pass's garbage
	// collection's (CollectOptions).
	Retention time.Duration
	Pinned    func(context.Context) ([]uint64, error)
	// KeepRetired is CollectOptions.KeepRetired.
	KeepRetired time.Duration
	// Referenced is CollectOptions.Referenced.
	Referenced func(context.Context, *manifest.Manifest) (map[string]bool, error)
}

func (o *Options) defaults() {
	if o.TombstoneTTL <= 0 {
		o.TombstoneTTL = DefaultTombstoneTTL
	}
	if o.TargetFileBytes <= 0 {
		o.TargetFileBytes = DefaultTargetFileBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Result describes one table's compaction.
type Result struct {
	Table cdc.TableID
	// Skipped says why nothing was done ("no deltas", "snapshot not
	// complete"); empty when a new base was committed.
	Skipped      string
	Epoch        uint64 // the new base's epoch
	FoldedDeltas int
	Versions     int64 // input rows (base and deltas, truncate markers not counted)
	Rows         int64 // rows of the new base, tombstones included
	Tombstones   int64
	Purged       int64 // tombstones older than the TTL, dropped
	Files        int
	Bytes        int64
	Runs         int // sorted runs the merge spilled
	Duration     time.Duration
}

// Table compacts one table. mc must be a committer of its own (compaction's
// conflicts with the streamer are expected; see manifest.StreamMoved); it is
// refreshed first, so the newest deltas are folded.
func Table(ctx context.Context, store blob.Store, mc *manifest.Committer, id cdc.TableID, opts Options) (Result, error) {
	opts.defaults()
	start := time.Now()
	res := Result{Table: id}
	if opts.ScratchDir == "" {
		return res, errors.New("compact: no scratch directory")
	}
	if err := mc.Refresh(ctx); err != nil {
		return res, fmt.Errorf("compact %s: %w", id, err)
	}
	mt := mc.Current().Tables[id.String()]
	switch {
	case mt == nil:
		return res, fmt.Errorf("compact %s: the table is not in the manifest", id)
	case mt.Snapshot.State != manifest.SnapshotComplete:
		res.Skipped = "snapshot not complete"
		return res, nil
	case mt.Resnapshot != nil:
		// Its generation is about to be replaced; folding it is wasted.
		res.Skipped = "resnapshot in progress"
		return res, nil
	case len(mt.Deltas) == 0:
		res.Skipped = "no deltas"
		return res, nil
	}
	folded := make(map[uint64]bool, len(mt.Deltas))
	for _, d := range mt.Deltas {
		folded[d.Epoch] = true
		res.Epoch = max(res.Epoch, d.Epoch)
	}
	res.FoldedDeltas = len(mt.Deltas)

	dir, err := scratchDir(opts.ScratchDir, manifest.EscapeKeyElement(id.Schema)+"."+manifest.EscapeKeyElement(id.Name))
	if err != nil {
		return res, fmt.Errorf("compact %s: clear scratch: %w", id, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("compact %s: scratch: %w", id, err)
	}
	defer os.RemoveAll(dir)

	r, err := merge.Open(ctx, store, mt, merge.Options{ScratchDir: dir, MemoryBytes: opts.MemoryBytes, Tombstones: true})
	if err != nil {
		return res, fmt.Errorf("compact %s: %w", id, err)
	}
	defer r.Close()
	files, out, err := writeBase(ctx, store, r, mt, res.Epoch, dir, opts)
	if err != nil {
		return res, fmt.Errorf("compact %s: %w", id, err)
	}
	st := r.Stats()
	res.Versions, res.Runs = st.Versions, st.Runs
	res.Rows, res.Tombstones, res.Purged = out.rows, out.tombstones, out.purged
	res.Files = len(files)
	for _, f := range files {
		res.Bytes += f.Bytes
	}
	failpoint.Inject("compact/after-base")

	now := opts.Now().UTC()
	base := &manifest.Base{
		Epoch:            res.Epoch,
		MaxLSN:           cdc.LSN(st.MaxLSN),
		RowCount:         out.rows,
		Files:            files,
		Adjusted:         mt.AdjustedTotals(), // everything folded: the base and every delta
		Tombstones:       out.tombstones,
		SortedBy:         append(append([]string(nil), mt.PrimaryKey...), parquetfile.ColLSN, parquetfile.ColSeq),
		SchemaVersion:    mt.SchemaVersion,
		UnrecoveredTOAST: out.unrecovered,
		Truncate:         r.Truncate(),
		CompactedAt:      &now,
	}
	if mt.Base != nil && mt.Base.MaxLSN > base.MaxLSN {
		base.MaxLSN = mt.Base.MaxLSN
	}
	oldBase := mt.Base
	_, err = mc.Commit(ctx, func(m *manifest.Manifest) error {
		t := m.Tables[id.String()]
		if t == nil {
			return fmt.Errorf("the table left the manifest while it was compacted")
		}
		if t.Generation != mt.Generation {
			return fmt.Errorf("%w: generation %s replaced %s", ErrConcurrent, t.Generation, mt.Generation)
		}
		if !sameBase(t.Base, oldBase) {
			return ErrConcurrent
		}
		var (
			kept    []manifest.Delta
			retired []manifest.File
		)
		if t.Base != nil {
			retired = append(retired, t.Base.Files...)
		}
		for _, d := range t.Deltas {
			switch {
			case folded[d.Epoch]:
				retired = append(retired, d.Files...)
			case d.Epoch <= res.Epoch:
				// Only a writer that is not the streamer could add an old
				// epoch; folding around it would lose it.
				return fmt.Errorf("%w: delta of epoch %d appeared below the folded epoch %d", ErrConcurrent, d.Epoch, res.Epoch)
			default:
				kept = append(kept, d)
			}
		}
		var from uint64
		if t.Base != nil {
			from = t.Base.Epoch
		}
		// The commit's version is the one after the version read.
		m.AddFold(t, from, res.Epoch, m.Version+1, now, opts.foldWindow(), retired)
		t.Deltas = kept
		t.Base = base
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("compact %s: commit: %w", id, err)
	}
	failpoint.Inject("compact/after-manifest")
	res.Duration = time.Since(start)
	opts.Log.Info("compacted table", "table", id.String(), "epoch", res.Epoch, "folded_deltas", res.FoldedDeltas,
		"versions", res.Versions, "rows", res.Rows, "tombstones", res.Tombstones, "purged_tombstones", res.Purged,
		"files", res.Files, "bytes", res.Bytes, "runs", res.Runs, "duration", res.Duration.Round(time.Millisecond))
	return res, nil
}

// sameBase reports whether two manifest versions hold the same base.
func sameBase(a, b *manifest.Base) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Epoch == b.Epoch && slices.EqualFunc(a.Files, b.Files, func(x, y manifest.File) bool { return x.Path == y.Path })
}

// foldWindow is how long a table's fold keeps taking its next major
// compactions in (manifest.AddFold): an eighth of the time retired files
// are kept, so a table holds about nine folds, and none of its files is
// kept more than an eighth longer than it must be.
func (o *Options) foldWindow() time.Duration {
	keep := max(o.Retention, o.KeepRetired)
	if keep <= 0 {
		keep = DefaultGracePeriod
	}
	return keep / 8
}

type written struct {
	rows, tombstones, purged int64
	unrecovered              map[string]int64
}

// writeBase writes the merged rows as base files of epoch E and uploads them.
func writeBase(ctx context.Context, store blob.Store, r *merge.Reader, mt *manifest.Table, epoch uint64, dir string, opts Options) ([]manifest.File, written, error) {
	var (
		out   written
		files []manifest.File
		cur   *spool.File
		part  int
	)
	cutoff := r.Stats().MaxOpTS - opts.TombstoneTTL.Microseconds()
	finish := func() error {
		if cur == nil {
			return nil
		}
		f := cur
		cur = nil
		defer f.Remove()
		size, err := f.Finish()
		if err != nil {
			return err
		}
		key := manifest.FileKey(mt.ID(), mt.Generation, manifest.KindBase, epoch, part)
		if err := f.Upload(ctx, store, key); err != nil {
			return err
		}
		files = append(files, manifest.File{Path: key, Rows: f.Rows(), Bytes: size})
		part++
		return nil
	}
	defer func() {
		if cur != nil {
			cur.Remove()
		}
	}()
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, out, err
		}
		if isDelete(row) {
			if row[parquetfile.LeafOpTS].Int64() < cutoff {
				out.purged++
				continue
			}
			out.tombstones++
		} else {
			countUnchanged(row, &out.unrecovered)
		}
		if cur == nil {
			if cur, err = spool.Create(dir, r.Schema()); err != nil {
				return nil, out, err
			}
		}
		if err := cur.WriteRow(row); err != nil {
			return nil, out, err
		}
		out.rows++
		if cur.Size() >= opts.TargetFileBytes {
			if err := finish(); err != nil {
				return nil, out, err
			}
		}
	}
	if out.rows == 0 {
		// Every row is gone (a truncate, or deletes past their TTL): the
		// base is one empty file, so readers find the table's columns.
		var err error
		if cur, err = spool.Create(dir, r.Schema()); err != nil {
			return nil, out, err
		}
	}
	if err := finish(); err != nil {
		return nil, out, err
	}
	return files, out, nil
}

func isDelete(row parquet.Row) bool {
	b := row[parquetfile.LeafOp].ByteArray()
	return len(b) == 1 && cdc.Op(b[0]) == cdc.OpDelete
}

// countUnchanged counts the columns a merged row still lists as unchanged:
// values no version held (merge's rules).
func countUnchanged(row parquet.Row, counts *map[string]int64) {
	for _, v := range row[parquetfile.LeafUnchanged:] {
		if v.Column() != parquetfile.LeafUnchanged {
			break
		}
		if v.IsNull() {
			continue
		}
		if *counts == nil {
			*counts = map[string]int64{}
		}
		(*counts)[string(v.ByteArray())]++
	}
}

// CollectOptions are the garbage collection's options that go with these
// compaction options, and gc.grace_period.
func (o Options) CollectOptions(grace time.Duration) CollectOptions {
	return CollectOptions{Grace: grace, Retention: o.Retention, Pinned: o.Pinned, KeepRetired: o.KeepRetired, Referenced: o.Referenced, Now: o.Now}
}

// NewCommitter opens the manifest for compaction: a committer whose
// conflicts with the streamer do not count toward its breaker (the streamer
// commits every flush; compaction only retries), bounded per commit instead.
func NewCommitter(ctx context.Context, store blob.Conditional) (*manifest.Committer, error) {
	mc, err := manifest.Open(ctx, store, manifest.Breaker{})
	if err != nil {
		return nil, err
	}
	mc.SetRival(func(_, _ *manifest.Manifest) bool { return false })
	return mc, nil
}

// concurrentTries bounds how often Pass compacts a table that another
// compaction keeps replacing under it.
const concurrentTries = 3

// Pass compacts the named tables (every table of the manifest when none
// are named), then collects garbage. A table another compaction replaced
// meanwhile is compacted again from its new base (concurrentTries in all).
// A table that fails is logged and reported in the joined error; the
// others still run, and so does the collection.
func Pass(ctx context.Context, store blob.Store, mc *manifest.Committer, only []cdc.TableID, opts Options, grace time.Duration) ([]Result, CollectResult, error) {
	opts.defaults()
	if err := mc.Refresh(ctx); err != nil {
		return nil, CollectResult{}, fmt.Errorf("compact: %w", err)
	}
	ids := only
	if len(ids) == 0 {
		for _, t := range mc.Current().Tables {
			ids = append(ids, t.ID())
		}
		slices.SortFunc(ids, func(a, b cdc.TableID) int { return cmpID(a, b) })
	}
	var (
		results []Result
		errs    []error
	)
	for _, id := range ids {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		res, err := Table(ctx, store, mc, id, opts)
		for try := 1; errors.Is(err, ErrConcurrent) && try < concurrentTries && ctx.Err() == nil; try++ {
			// Another compaction (start's, by default) replaced the base
			// first: fold what it left, from its base.
			opts.Log.Info("the table was compacted concurrently; compacting it again from the new base", "table", id.String())
			res, err = Table(ctx, store, mc, id, opts)
		}
		if err != nil {
			opts.Log.Error("compaction failed; the table keeps its previous base and deltas", "table", id.String(), "err", err)
			errs = append(errs, err)
			continue
		}
		results = append(results, res)
	}
	if ctx.Err() != nil {
		return results, CollectResult{}, errors.Join(errs...)
	}
	gc, err := Collect(ctx, store, mc, opts.CollectOptions(grace))
	if err != nil {
		errs = append(errs, err)
	} else if gc.Retired+gc.Orphans+gc.LogDeleted > 0 {
		opts.Log.Info("collected garbage", "retired_deleted", gc.Retired, "orphans_deleted", gc.Orphans, "waiting", gc.Waiting,
			"history_deleted", gc.LogDeleted, "oldest_version", gc.Oldest)
	}
	return results, gc, errors.Join(errs...)
}

func cmpID(a, b cdc.TableID) int {
	if a.Schema != b.Schema {
		return strings.Compare(a.Schema, b.Schema)
	}
	return strings.Compare(a.Name, b.Name)
}

// scratchDir is this process's scratch directory for table under root,
// "<table>.pid<pid>": pg-cdc compact run from cron and the compaction loop
// of pg-cdc start share state.path, so each process works in its own
// directory (a shared one was cleared by one under the other's open
// files). What a process that is gone left — a killed run's — is removed
// here, as is the directory of the releases before this one (no suffix).
func scratchDir(root, table string) (string, error) {
	self := fmt.Sprintf("%s.pid%d", table, os.Getpid())
	entries, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, table)
		if !ok || name == self {
			continue
		}
		var stale bool
		if rest == "" {
			stale = true
		} else if p, ok := strings.CutPrefix(rest, ".pid"); ok {
			pid, err := strconv.Atoi(p)
			stale = err == nil && !processAlive(pid)
		}
		if stale {
			if err := os.RemoveAll(filepath.Join(root, name)); err != nil {
				return "", err
			}
		}
	}
	dir := filepath.Join(root, self)
	// A directory of this very process is a pass that failed half-way.
	return dir, os.RemoveAll(dir)
}

// processAlive reports whether a process with pid exists (signal 0).
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}
