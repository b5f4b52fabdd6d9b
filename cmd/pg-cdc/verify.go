package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newVerifyCmd(app *cli) *cobra.Command {
	var (
		tables          []string
		wait            time.Duration
		format          string
		allowIncomplete bool
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Compare the source with the sink as of one source snapshot; exit 19 when they differ",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringArrayVar(&tables, "table", nil, "verify only this table (schema.table, as the manifest names it); repeatable")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long the manifest may take to pass the watermark")
	formatFlag(cmd, &format, "text", "json")
	cmd.Flags().BoolVar(&allowIncomplete, "allow-incomplete", false, "skip tables whose snapshot is not complete (listed as not compared) instead of exiting 18")
	cmd.RunE = app.onCapture(true, func(ctx context.Context, c *capture.Capture, cfg config.Config, cmd *cobra.Command) error {
		rep, err := c.Verify(ctx, tables, capture.VerifyOptions{Wait: wait, AllowIncomplete: allowIncomplete,
			MemoryBytes: cfg.Compaction.MemoryBudgetBytes, Warn: cmd.ErrOrStderr()})
		if err != nil || rep == nil {
			return err
		}
		if err := rep.Write(cmd.OutOrStdout(), format); err != nil {
			return err
		}
		return rep.Err()
	})
	return cmd
}
