package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newCompactCmd(app *cli) *cobra.Command {
	var tables []string
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Fold each table's deltas into a new base, then delete files no manifest needs",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringArrayVar(&tables, "table", nil, "compact only this table (schema.table, as the manifest names it); repeatable")
	cmd.RunE = app.onCapture(true, func(ctx context.Context, c *capture.Capture, cfg config.Config, cmd *cobra.Command) error {
		o := capture.CompactOptions{MemoryBytes: cfg.Compaction.MemoryBudgetBytes,
			TargetFileBytes: cfg.Compaction.TargetFileBytes, TombstoneTTL: cfg.Compaction.TombstoneTTL, GracePeriod: cfg.GC.GracePeriod,
			Retention: cfg.History.Retention, KeepRetired: keepRetired(cfg)}
		p, closeCat, err := openPublisher(cfg, c.Sink, c.Log) // gc keeps what the catalog's snapshots name
		if err != nil {
			return err
		}
		defer closeCat()
		if p != nil {
			o.Referenced = p.Referenced
		}
		rep, err := c.Compact(ctx, tables, o)
		if rep != nil {
			rep.WriteText(cmd.OutOrStdout())
		}
		return err
	})
	return cmd
}
