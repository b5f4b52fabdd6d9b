package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/metrics"
)

func newCompactCmd(configPath *string) *cobra.Command {
	var tables []string
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Fold each table's deltas into a new base, then delete files no manifest needs",
		Long: `compact folds every table's deltas (or those of --table) into a new sorted
base by DESIGN §7, commits it with compare-and-swap, and then deletes files
that compaction retired more than gc.grace_period ago. It is safe beside a
running 'pg-cdc start' and idempotent; a kill at any step leaves the previous
state authoritative.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringArrayVar(&tables, "table", nil, "compact only this table (schema.table, as the manifest names it); repeatable")
	cmd.RunE = withSignals(configPath, func(ctx context.Context, cfg config.Config, log *slog.Logger, cmd *cobra.Command) error {
		store, err := openSink(ctx, cfg)
		if err != nil {
			return err
		}
		mc, err := compact.NewCommitter(ctx, store)
		if err != nil {
			return notInitialized(err, cfg)
		}
		ids, err := resolveTables(mc.Current(), tables)
		if err != nil {
			return err
		}
		results, gc, err := compact.Pass(ctx, store, mc, ids, compactOptions(cfg, log), cfg.GC.GracePeriod)
		printCompaction(cmd, results, gc)
		return err
	})
	return cmd
}

func compactOptions(cfg config.Config, log *slog.Logger) compact.Options {
	return compact.Options{
		ScratchDir:      filepath.Join(cfg.State.Path, "compact"),
		MemoryBytes:     cfg.Compaction.MemoryBudgetBytes,
		TombstoneTTL:    cfg.Compaction.TombstoneTTL,
		TargetFileBytes: cfg.Compaction.TargetFileBytes,
		Log:             log,
	}
}

// resolveTables maps --table arguments to the manifest's tables; a name the
// manifest does not hold is a usage error that lists what it does hold.
func resolveTables(m *manifest.Manifest, names []string) ([]cdc.TableID, error) {
	var ids []cdc.TableID
	for _, n := range names {
		t := m.Tables[n]
		if t == nil {
			known := make([]string, 0, len(m.Tables))
			for k := range m.Tables {
				known = append(known, k)
			}
			sort.Strings(known)
			return nil, usageError{fmt.Errorf("table %q is not in the manifest (it holds %s)", n, strings.Join(known, ", "))}
		}
		ids = append(ids, t.ID())
	}
	return ids, nil
}

func printCompaction(cmd *cobra.Command, results []compact.Result, gc compact.CollectResult) {
	out := cmd.OutOrStdout()
	for _, r := range results {
		if r.Skipped != "" {
			fmt.Fprintf(out, "%s: nothing to do (%s)\n", r.Table, r.Skipped)
			continue
		}
		fmt.Fprintf(out, "%s: base of epoch %d from %d deltas: %d rows (%d tombstones kept, %d purged), %d files, %s, %s\n",
			r.Table, r.Epoch, r.FoldedDeltas, r.Rows, r.Tombstones, r.Purged, r.Files, humanBytes(r.Bytes), r.Duration.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "garbage: %d retired and %d orphaned files deleted, %d waiting for the grace period\n", gc.Retired, gc.Orphans, gc.Waiting)
}

// runCompactionLoop compacts every table each interval until ctx ends; start
// runs it beside the stream when compaction.interval is set. A failed pass
// is logged and retried at the next tick: compaction never stops the stream.
// done is told of every pass (the run's events).
func runCompactionLoop(ctx context.Context, store interface {
	blob.Store
	blob.Conditional
}, cfg config.Config, log *slog.Logger, m *metrics.Metrics,
	done func(results []compact.Result, gc compact.CollectResult, took time.Duration, err error)) {
	log = log.With("component", "compaction")
	t := time.NewTicker(cfg.Compaction.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mc, err := compact.NewCommitter(ctx, store)
		if err != nil {
			log.Error("compaction pass could not read the manifest", "err", err)
			continue
		}
		started := time.Now()
		results, collected, err := compact.Pass(ctx, store, mc, nil, compactOptions(cfg, log), cfg.GC.GracePeriod)
		if err != nil && ctx.Err() != nil {
			return
		}
		took := time.Since(started)
		done(results, collected, took, err)
		m.CompactionDuration.Observe(took.Seconds())
		for _, r := range results {
			m.CompactionInputRows.Add(float64(r.Versions))
			m.CompactionOutputRows.Add(float64(r.Rows))
		}
		m.GCDeletedFiles.Add(float64(collected.Retired + collected.Orphans))
		if err != nil {
			m.CompactionRuns.WithLabelValues("error").Inc()
			log.Error("compaction pass failed; retrying at the next interval", "err", err)
			continue
		}
		m.CompactionRuns.WithLabelValues("ok").Inc()
		m.CompactionLastSuccess.Set(float64(time.Now().Unix()))
	}
}
