package verify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/merge"
	"github.com/pg-cdc/pg-cdc/internal/render"
)

// Defaults of Options fields left zero.
const (
	DefaultWait   = 2 * time.Minute
	DefaultPoll   = 200 * time.Millisecond
	DefaultRounds = 3
	// DefaultLockTimeout: a TRUNCATE or DDL that holds a table longer makes
	// verify fail rather than queue the application's writes behind it.
	DefaultLockTimeout = 30 * time.Second
)

// Source is the database verify reads: a snapshot to read tables under,
// and a way to commit a watermark transaction after it.
type Source interface {
	// BeginSnapshot opens a read-only transaction that first locks tables
	// against TRUNCATE and rewrites (which are not MVCC-safe), waiting at
	// most lockTimeout, then takes its snapshot; the caller closes it.
	BeginSnapshot(ctx context.Context, tables []cdc.TableID, lockTimeout time.Duration) (Snapshot, error)
	// EmitMessage commits a transaction holding one transactional logical
	// decoding message and returns a position the stream passes only after
	// every transaction that committed before it.
	EmitMessage(ctx context.Context, prefix, content string) (cdc.LSN, error)
}

// Snapshot is an open snapshot of the source.
type Snapshot interface {
	// Current is the snapshot as pg_current_snapshot() reports it.
	Current() cdc.Snapshot
	// CopyTable reads every row of t, one of the locked tables, under the
	// snapshot, in no particular order, values in t.Columns order
	// (postgres.DB.CopyTable's contract).
	CopyTable(ctx context.Context, t *cdc.Table, fn func(values []cdc.Datum) error) (int64, error)
	Close() error
}

// Sink is what verify reads of the storage: the manifest and its files.
type Sink interface {
	blob.Store
	blob.Conditional
}

// Options tune a verification.
type Options struct {
	// ScratchDir holds downloaded sink files, the source copy and sort runs
	// while a table is compared; it is created if missing. Required.
	ScratchDir string
	// MemoryBytes bounds the rows the sorts buffer in memory before they
	// spill, for the source and the sink together
	// (merge.DefaultMemoryBytes when zero).
	MemoryBytes int64
	// Wait bounds how long the manifest may take to pass the watermark.
	Wait time.Duration
	// Poll is how often the manifest is read while waiting.
	Poll time.Duration
	// LockTimeout bounds the wait for the tables' ACCESS SHARE locks.
	LockTimeout time.Duration
	// Rounds bounds the snapshots taken for a table whose base compaction
	// replaced while verify waited (see doc.go).
	Rounds int
	// MaxRanges and MaxExamples cap the ranges and value differences
	// listed per table (DefaultMaxRanges, DefaultMaxExamples when zero; a
	// negative MaxExamples lists none).
	MaxRanges   int
	MaxExamples int
	// Log receives one line per table (slog.Default when nil).
	Log *slog.Logger
}

func (o *Options) defaults() {
	if o.MemoryBytes <= 0 {
		o.MemoryBytes = merge.DefaultMemoryBytes
	}
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.Rounds <= 0 {
		o.Rounds = DefaultRounds
	}
	if o.MaxRanges <= 0 {
		o.MaxRanges = DefaultMaxRanges
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Report is the outcome of a verification.
type Report struct {
	Tables []TableResult `json:"tables"`
}

// Differs reports whether any table differs.
func (r *Report) Differs() bool {
	for i := range r.Tables {
		if r.Tables[i].Differs() {
			return true
		}
	}
	return false
}

// TableResult is one table's comparison.
type TableResult struct {
	Table string `json:"table"`
	// Equal: nothing differs (Differs is false).
	Equal bool `json:"equal"`
	// Key names the columns rows are matched by: the primary key, or every
	// column for a table without one (compared as multisets).
	Key      []string `json:"key"`
	Multiset bool     `json:"multiset,omitempty"`
	// Snapshot and Watermark are what the table was compared as of: the
	// source's snapshot, and the watermark committed after it that the
	// manifest (of epoch Epoch, end LSN EndLSN) had passed.
	Snapshot  string  `json:"snapshot"`
	Watermark cdc.LSN `json:"watermark"`
	Epoch     uint64  `json:"epoch"`
	EndLSN    cdc.LSN `json:"end_lsn"`
	Counts
	// Newer counts the sink's versions that the snapshot does not see
	// (written by transactions that committed after it), left out.
	Newer int64 `json:"newer_sink_versions_ignored"`
	// Adjusted counts, per column, source values a documented type rule
	// changed (docs/types.md): compared in the form the sink stores, where
	// distinct source values may look alike.
	Adjusted map[string]int64 `json:"adjusted,omitempty"`
	Duration time.Duration    `json:"-"`
}

// ErrWatermark is returned when the manifest does not pass the watermark in
// time: the streamer is not running, or not keeping up.
var ErrWatermark = errors.New("the sink did not reach verify's watermark")

// errStale marks a table whose manifest entry cannot be read as of the
// snapshot: compaction folded transactions newer than it into the base, or
// deleted a file the entry named. Another round with a new snapshot
// compares it.
var errStale = errors.New("the table's files changed while verify waited")

// Run compares the named tables (every table of the manifest when none are
// named) of the source with the sink, each as of one source snapshot. A
// table's differences are in the report, not in the error: the caller
// decides what they mean (pg-cdc verify exits with cdc.ErrDifferences).
func Run(ctx context.Context, src Source, sink Sink, only []cdc.TableID, opts Options) (*Report, error) {
	opts.defaults()
	if opts.ScratchDir == "" {
		return nil, errors.New("verify: no scratch directory")
	}
	pending := slices.Clone(only)
	rep := &Report{}
	for round := 1; ; round++ {
		results, stale, err := runRound(ctx, src, sink, pending, opts)
		rep.Tables = append(rep.Tables, results...)
		if err != nil {
			return rep, err
		}
		if len(stale) == 0 {
			break
		}
		if round == opts.Rounds {
			names := make([]string, len(stale))
			for i, id := range stale {
				names[i] = id.String()
			}
			return rep, fmt.Errorf("verify %s: compaction replaced the table's base or files between the snapshot and the watermark in %d rounds; run verify again, with compaction less frequent or a longer gc.grace_period",
				strings.Join(names, ", "), round)
		}
		opts.Log.Info("compaction replaced files while verify waited; comparing again under a new snapshot", "tables", len(stale), "round", round+1)
		pending = stale
	}
	slices.SortFunc(rep.Tables, func(a, b TableResult) int { return strings.Compare(a.Table, b.Table) })
	return rep, nil
}

// runRound takes one snapshot and compares the tables under it. It returns
// the tables that must be compared again under a new snapshot.
func runRound(ctx context.Context, src Source, sink Sink, ids []cdc.TableID, opts Options) ([]TableResult, []cdc.TableID, error) {
	// Read before the snapshot is taken: every epoch this manifest holds
	// committed before the snapshot, so a base of one of those epochs folds
	// only transactions the snapshot sees.
	before, _, err := manifest.Load(ctx, sink)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: %w", err)
	}
	if len(ids) == 0 {
		for _, t := range before.Tables {
			ids = append(ids, t.ID())
		}
		slices.SortFunc(ids, func(a, b cdc.TableID) int { return strings.Compare(a.String(), b.String()) })
	}
	snap, err := src.BeginSnapshot(ctx, ids, opts.LockTimeout)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: %w", err)
	}
	defer snap.Close()
	cur := snap.Current()
	prefix, content, err := control.Encode(control.Watermark{Snapshot: cur.String()})
	if err != nil {
		return nil, nil, fmt.Errorf("verify: watermark: %w", err)
	}
	watermark, err := src.EmitMessage(ctx, prefix, content)
	if err != nil {
		return nil, nil, fmt.Errorf("verify: watermark: %w", err)
	}
	m, err := waitWatermark(ctx, sink, watermark, opts)
	if err != nil {
		return nil, nil, err
	}
	var (
		results []TableResult
		stale   []cdc.TableID
	)
	for _, id := range ids {
		mt := m.Tables[id.String()]
		if mt == nil {
			return results, nil, fmt.Errorf("verify %s: the table is not in the manifest", id)
		}
		res, err := compareTable(ctx, snap, sink, before, mt, opts)
		if errors.Is(err, errStale) {
			opts.Log.Info("table changed by compaction while verify waited", "table", id.String(), "err", err)
			stale = append(stale, id)
			continue
		}
		if err != nil {
			return results, nil, fmt.Errorf("verify %s: %w", id, err)
		}
		res.Snapshot, res.Watermark, res.Epoch, res.EndLSN = cur.String(), watermark, m.Epoch, m.EndLSN
		opts.Log.Info("verified table", "table", res.Table, "source_rows", res.SourceRows, "sink_rows", res.SinkRows,
			"matching", res.Matching, "missing_in_sink", res.Missing, "extra_in_sink", res.Extra, "values_differ", res.Changed,
			"duration", res.Duration.Round(time.Millisecond))
		results = append(results, res)
	}
	return results, stale, nil
}

// waitWatermark polls the manifest until its end LSN reaches watermark.
func waitWatermark(ctx context.Context, sink Sink, watermark cdc.LSN, opts Options) (*manifest.Manifest, error) {
	deadline := time.Now().Add(opts.Wait)
	first := cdc.LSN(0)
	for {
		m, _, err := manifest.Load(ctx, sink)
		if err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
		if first == 0 {
			first = m.EndLSN
		}
		if m.EndLSN >= watermark {
			return m, nil
		}
		if !time.Now().Before(deadline) {
			moved := "did not move"
			if m.EndLSN != first {
				moved = fmt.Sprintf("moved from %s", first)
			}
			return nil, &cdc.Error{Class: ErrWatermark,
				Msg: fmt.Sprintf("after %s the manifest's end LSN is %s (it %s), short of the watermark %s committed after the snapshot",
					opts.Wait, m.EndLSN, moved, watermark),
				Hint: "verify compares the source with what the streamer made durable: run it while 'pg-cdc start' is running and keeping up, or give it longer with --wait"}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(opts.Poll):
		}
	}
}

// compareTable compares one table under snap with the manifest entry mt.
func compareTable(ctx context.Context, snap Snapshot, sink Sink, before *manifest.Manifest, mt *manifest.Table, opts Options) (TableResult, error) {
	started := time.Now()
	res := TableResult{Table: mt.ID().String()}
	if mt.Snapshot.State != manifest.SnapshotComplete {
		return res, fmt.Errorf("its snapshot is %s, not complete: there is nothing whole to compare yet", mt.Snapshot.State)
	}
	if mt.Base != nil && mt.Base.Epoch > before.Epoch {
		return res, fmt.Errorf("%w: its base folds epoch %d, newer than the snapshot (epoch %d)", errStale, mt.Base.Epoch, before.Epoch)
	}
	dir := filepath.Join(opts.ScratchDir, manifest.EscapeKeyElement(mt.Schema)+"."+manifest.EscapeKeyElement(mt.Name))
	if err := os.RemoveAll(dir); err != nil {
		return res, fmt.Errorf("clear scratch: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("scratch: %w", err)
	}
	defer os.RemoveAll(dir)

	cur := snap.Current()
	multiset := len(mt.PrimaryKey) == 0
	// Two sorts run at once (three without a key): each gets its share.
	share := opts.MemoryBytes / 2
	if multiset {
		share = opts.MemoryBytes / 3
	}
	r, err := merge.Open(ctx, sink, mt, merge.Options{
		ScratchDir:  dir,
		MemoryBytes: share,
		Visible:     func(xid int64) bool { return cur.Visible(cdc.XID(xid)) },
	})
	if errors.Is(err, blob.ErrNotFound) {
		return res, fmt.Errorf("%w: %w", errStale, err)
	}
	if err != nil {
		return res, err
	}
	defer r.Close()
	t := r.Table()
	rt, err := render.NewTable(mt.CurrentSchema().Columns)
	if err != nil {
		return res, err
	}

	order := r.Order()
	var keyCols []int
	if multiset {
		// Rows have no identity: compare the multisets of whole rows,
		// both sides sorted by every column.
		for i := range t.Columns {
			keyCols = append(keyCols, i)
		}
		order = merge.NewOrder(keyCols)
	} else {
		for _, k := range t.PrimaryKey {
			keyCols = append(keyCols, t.ColumnIndex(k))
		}
	}
	for _, c := range keyCols {
		res.Key = append(res.Key, t.Columns[c].Name)
	}
	res.Multiset = multiset

	var sinkRows rowIter = r
	if multiset {
		s, err := sortRows(ctx, r, r.Schema(), order.CompareKey, dir, share)
		if err != nil {
			return res, err
		}
		defer s.Close()
		sinkRows = s
	}
	srcRows, err := readSource(ctx, snap, t, r.Schema(), order.Compare, dir, share)
	if err != nil {
		return res, err
	}
	defer srcRows.Close()
	res.Adjusted = srcRows.adjusted

	cp := newComparer(rt, order.CompareKey, keyCols, opts.MaxRanges, opts.MaxExamples)
	counts, err := cp.run(srcRows, sinkRows)
	if err != nil {
		return res, err
	}
	if counts.SourceRows != srcRows.rows {
		return res, fmt.Errorf("compared %d source rows, the copy read %d", counts.SourceRows, srcRows.rows)
	}
	res.Counts = counts
	res.Equal = !counts.Differs()
	res.Newer = r.Stats().Filtered
	res.Duration = time.Since(started)
	return res, nil
}
