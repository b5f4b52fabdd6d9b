package main

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/audit"
	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/daemon"
)

func newStartCmd(app *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "start",
		Short: "Stream changes from the slot into the sink until stopped (SIGTERM/SIGINT)",
		Args:  cobra.NoArgs,
		RunE: app.onCapture(false, func(ctx context.Context, c *capture.Capture, cfg config.Config, _ *cobra.Command) error {
			o := app.daemonOptions(c, cfg)
			// The catalog publisher follows the committed versions beside
			// the stream (catalog.type iceberg); the run group stops it
			// before Run returns, so the catalog closes after.
			var history blob.Store // the publisher reads the history on a client of its own
			if cfg.Catalog.Type != config.CatalogNone {
				s, err := openSink(ctx, cfg, nil)
				if err != nil {
					return err
				}
				history = s
			}
			p, closeCat, err := openPublisher(cfg, history, c.Log)
			if err != nil {
				return err
			}
			defer closeCat()
			if p != nil {
				o.Followers = append(o.Followers, p)
				o.Compaction.Referenced = p.Referenced
			}
			return daemon.Run(ctx, o)
		}),
	}
}

// daemonOptions are the configuration's options of the start process.
func (app *cli) daemonOptions(c *capture.Capture, cfg config.Config) daemon.Options {
	args := make([]string, 0, len(os.Args))
	for _, a := range os.Args[1:] {
		args = append(args, app.scrub.Scrub(a))
	}
	return daemon.Options{
		Capture:  c,
		OpenSink: func(ctx context.Context, onRetry func()) (capture.Sink, error) { return openSink(ctx, cfg, onRetry) },
		Stream: daemon.StreamOptions{
			FlushInterval: cfg.Flush.Interval, FlushMaxRows: int64(cfg.Flush.MaxRows), FlushMaxBytes: cfg.Flush.MaxBytes,
			FlushWorkers: cfg.Flush.ParallelWorkers, StandbyInterval: cfg.Replication.StandbyInterval,
			DrainTimeout: cfg.Flush.DrainTimeout, ReceiveTimeout: cfg.Replication.ReceiveTimeout,
			MemoryBudget: cfg.Replication.MemoryBudgetBytes, StateDir: cfg.State.Path,
			BreakerThreshold: cfg.Flush.CASBreakerThreshold, BreakerWindow: cfg.Flush.CASBreakerWindow,
			ChunkRows: cfg.Backfill.ChunkRows, DiscoverInterval: cfg.Backfill.DiscoverInterval,
		},
		Retry: daemon.RetryPolicy{InitialBackoff: cfg.Retry.InitialBackoff, MaxBackoff: cfg.Retry.MaxBackoff, MaxAttempts: cfg.Retry.MaxAttempts},
		Compaction: daemon.CompactionOptions{Interval: cfg.Compaction.Interval,
			MinorFanout: int(cfg.Compaction.MinorFanout), MinorMaxBytes: cfg.Compaction.MinorMaxBytes,
			MajorDeltaPercent: int(cfg.Compaction.MajorDeltaPercent), MajorMinBytes: cfg.Compaction.MajorMinBytes,
			MaxDeltaFiles: int(cfg.Compaction.MaxDeltaFiles), MajorInterval: majorInterval(cfg),
			MemoryBytes:     cfg.Compaction.MemoryBudgetBytes,
			TargetFileBytes: cfg.Compaction.TargetFileBytes, TombstoneTTL: cfg.Compaction.TombstoneTTL, GracePeriod: cfg.GC.GracePeriod,
			Retention: cfg.History.Retention, KeepRetired: keepRetired(cfg)},
		PromotionMode: cfg.Promotion.Mode, ReconcileInterval: cfg.Schema.ReconcileInterval, HeartbeatInterval: cfg.Replication.HeartbeatInterval,
		MaxRetainedWAL: cfg.Guardrail.MaxRetainedWALBytes,
		Listen:         cfg.Metrics.Listen, LivenessTimeout: cfg.Metrics.LivenessTimeout, ReadinessMaxLag: cfg.Metrics.ReadinessMaxLag,
		RunID: app.runID, User: audit.CurrentUser(), Version: version, Args: args, Settings: cfg.RunSettings(app.scrub.Scrub),
		Scrub: app.scrub.Scrub, ExitCode: exitCode, Audit: app.audit.Event, Log: c.Log,
	}
}

// majorInterval is compaction.major_interval, shortened to keep a
// published state table within catalog.iceberg.state_max_age.
func majorInterval(cfg config.Config) time.Duration {
	every := cfg.Compaction.MajorInterval
	if s := cfg.Catalog.Iceberg.StateMaxAge; cfg.Catalog.Type != config.CatalogNone && s > 0 && (every == 0 || s < every) {
		every = s
	}
	return every
}
