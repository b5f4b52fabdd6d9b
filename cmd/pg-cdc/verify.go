package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
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
		Long: `verify reads every table (or those of --table) in a REPEATABLE READ snapshot
of the source, commits a watermark after it and waits until the manifest has
passed the watermark, then compares each table with the sink's state as of that
snapshot (per key, the newest version whose transaction the snapshot sees). No
quiescing: writes may go on. It prints counts per table and the key ranges that
differ, and exits 19 when anything differs. 'pg-cdc start' must be running, so
the watermark reaches the manifest. See docs/operations.md#verify.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringArrayVar(&tables, "table", nil, "verify only this table (schema.table, as the manifest names it); repeatable")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long the manifest may take to pass the watermark")
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	cmd.Flags().BoolVar(&allowIncomplete, "allow-incomplete", false, "skip tables whose snapshot is not complete (listed as not compared) instead of exiting 18")
	cmd.RunE = app.onCapture(true, func(ctx context.Context, c *capture.Capture, cfg config.Config, cmd *cobra.Command) error {
		if format != "text" && format != "json" {
			return cdc.Usage(fmt.Errorf("--format %q: want text or json", format))
		}
		rep, err := c.Verify(ctx, tables, capture.VerifyOptions{Wait: wait, AllowIncomplete: allowIncomplete,
			MemoryBytes: cfg.Compaction.MemoryBudgetBytes, Warn: cmd.ErrOrStderr()})
		if err != nil || rep == nil {
			return err
		}
		if format == "json" {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return err
			}
		} else {
			rep.WriteText(cmd.OutOrStdout())
		}
		return rep.Err()
	})
	return cmd
}
