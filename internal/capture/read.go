package capture

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/merge"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/refs"
	"github.com/pg-cdc/pg-cdc/internal/render"
	"github.com/pg-cdc/pg-cdc/internal/verify"
)

// CompactOptions tune a compaction pass (design.md §7).
type CompactOptions struct {
	MemoryBytes, TargetFileBytes int64
	TombstoneTTL, GracePeriod    time.Duration
	// Retention is history.retention: the garbage collection keeps every
	// manifest version committed within it readable (compact.Collect).
	Retention time.Duration
	// KeepRetired is compact.CollectOptions.KeepRetired.
	KeepRetired time.Duration
	// Referenced is compact.CollectOptions.Referenced (a catalog's
	// retained snapshots).
	Referenced func(context.Context, *manifest.Manifest) (map[string]bool, error)
}

// Compact folds the deltas of tables (every table when none are named)
// into new bases, then collects the garbage older than the grace period
// and the history retention.
// It is safe beside a running start.
func (c *Capture) Compact(ctx context.Context, tables []string, o CompactOptions) (*CompactReport, error) {
	mc, err := compact.NewCommitter(ctx, c.Sink)
	if err != nil {
		return nil, c.NotInitialized(err)
	}
	mc.SetLogger(c.Log)
	ids, err := Resolve(mc.Current(), tables)
	if err != nil {
		return nil, err
	}
	opts := compact.Options{ScratchDir: filepath.Join(c.StateDir, "compact"), MemoryBytes: o.MemoryBytes,
		TombstoneTTL: o.TombstoneTTL, TargetFileBytes: o.TargetFileBytes, Log: c.Log, Retention: o.Retention, KeepRetired: o.KeepRetired,
		Referenced: o.Referenced, Pinned: func(ctx context.Context) ([]uint64, error) { return refs.Pinned(ctx, c.Sink) }}
	results, gc, err := compact.Pass(ctx, c.Sink, mc, ids, opts, o.GracePeriod)
	return &CompactReport{Results: results, GC: gc}, err
}

// DumpOptions say what Dump writes.
type DumpOptions struct {
	Format string // csv or jsonl
	// UpToEpoch, when set, shows the table as of that epoch.
	UpToEpoch *uint64
	// AllowIncomplete dumps a table whose snapshot is not complete (part of
	// it), warning on Warn, instead of refusing with exit 18.
	AllowIncomplete bool
	MemoryBytes     int64
	Warn            io.Writer
}

// Dump writes table's merged state (base + deltas, design.md §7) to out
// from the manifest alone, rendered as PostgreSQL's text output
// (docs/types.md).
func (c *Capture) Dump(ctx context.Context, table string, o DumpOptions, out io.Writer) error {
	f, err := render.ParseFormat(o.Format)
	if err != nil {
		return cdc.Usage(err)
	}
	m, err := c.Load(ctx)
	if err != nil {
		return err
	}
	ids, err := Resolve(m, []string{table})
	if err != nil {
		return err
	}
	mt := m.Tables[ids[0].String()]
	if _, incomplete := Incomplete(m, ids); len(incomplete) > 0 {
		if !o.AllowIncomplete {
			return IncompleteError(incomplete)
		}
		fmt.Fprintf(o.Warn, "warning: the snapshot of %s is not complete: this is part of the table only\n", incomplete[0])
	}
	if o.UpToEpoch != nil && *o.UpToEpoch > m.Epoch {
		return cdc.Usage(fmt.Errorf("--epoch %d: the manifest holds epochs 0 to %d", *o.UpToEpoch, m.Epoch))
	}
	scratch, err := c.scratch("dump-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	r, err := merge.Open(ctx, c.Sink, mt, merge.Options{MemoryBytes: o.MemoryBytes, UpToEpoch: o.UpToEpoch, ScratchDir: scratch})
	if err != nil {
		return err
	}
	defer r.Close()
	rt, err := render.NewTable(mt.CurrentSchema().Columns)
	if err != nil {
		return err
	}
	buf := bufio.NewWriterSize(out, 256<<10)
	w, err := render.NewWriter(buf, rt, f)
	if err != nil {
		return err
	}
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := w.WriteRow(row); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return buf.Flush()
}

// scratch makes a scratch directory under the state directory.
func (c *Capture) scratch(pattern string) (string, error) {
	if err := os.MkdirAll(c.StateDir, 0o755); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	dir, err := os.MkdirTemp(c.StateDir, pattern)
	if err != nil {
		return "", fmt.Errorf("scratch directory: %w", err)
	}
	return filepath.Clean(dir), nil
}

// VerifyOptions tune Verify.
type VerifyOptions struct {
	Wait            time.Duration
	AllowIncomplete bool
	MemoryBytes     int64
	Warn            io.Writer // where the tables left out are named
}

// Verify compares the source with the sink as of one source snapshot
// (design.md §10). The report's Err is the verdict (exit 19 when anything
// differs); there is no report (nil) when every table named was left out
// as incomplete.
func (c *Capture) Verify(ctx context.Context, tables []string, o VerifyOptions) (*verify.Report, error) {
	m, err := c.Load(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := Resolve(m, tables)
	if err != nil {
		return nil, err
	}
	ids, incomplete := Incomplete(m, ids)
	if len(incomplete) > 0 {
		if !o.AllowIncomplete {
			return nil, IncompleteError(incomplete)
		}
		for _, t := range incomplete {
			fmt.Fprintf(o.Warn, "not compared: the snapshot of %s is not complete\n", t)
		}
		if len(ids) == 0 {
			return nil, nil // nothing left to compare
		}
	}
	// Comparing with another database would report every row as a
	// difference: refuse it as start does (exit 12).
	db, err := c.ConnectUpstream(ctx, m)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	scratch, err := c.scratch("verify-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	return verify.Run(ctx, verifySource{db}, c.Sink, ids, verify.Options{
		ScratchDir: scratch, MemoryBytes: o.MemoryBytes, Wait: o.Wait, Log: c.Log,
	})
}

// verifySource adapts the source adapter to verify's port.
type verifySource struct{ db *postgres.DB }

func (s verifySource) BeginSnapshot(ctx context.Context, tables []cdc.TableID, lockTimeout time.Duration) (verify.Snapshot, error) {
	tx, err := s.db.BeginSnapshot(ctx, tables, lockTimeout)
	if err != nil {
		return nil, err
	}
	return tx, nil
}

func (s verifySource) EmitMessage(ctx context.Context, prefix, content string) (cdc.LSN, error) {
	return s.db.EmitMessage(ctx, prefix, content)
}

// Teardown drops the slot and the publication; the sink is never touched.
func (c *Capture) Teardown(ctx context.Context) error {
	db, err := postgres.Connect(ctx, c.Source)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.DropSlot(ctx, c.Slot); err != nil {
		return err
	}
	return db.DropPublication(ctx, c.Publication)
}
