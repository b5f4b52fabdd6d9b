package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newDumpCmd(app *cli) *cobra.Command {
	var (
		table, format   string
		epoch           int64
		allowIncomplete bool
	)
	cmd := &cobra.Command{
		Use:   "dump --table schema.table",
		Short: "Print a table's merged state (base + deltas, design.md §7) from the manifest alone",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVar(&table, "table", "", "the table to print (schema.table, as the manifest names it)")
	formatFlag(cmd, &format, "csv", "jsonl")
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "print the table as of this epoch (default: the latest)")
	cmd.Flags().BoolVar(&allowIncomplete, "allow-incomplete", false, "print a table whose snapshot is not complete (part of the table), with a warning, instead of exiting 18")
	cmd.RunE = app.onCapture(true, func(ctx context.Context, c *capture.Capture, cfg config.Config, cmd *cobra.Command) error {
		if table == "" {
			return cdc.Usage(errors.New("--table is required"))
		}
		o := capture.DumpOptions{Format: format, AllowIncomplete: allowIncomplete,
			MemoryBytes: cfg.Compaction.MemoryBudgetBytes, Warn: cmd.ErrOrStderr()}
		if cmd.Flags().Changed("epoch") {
			if epoch < 0 {
				return cdc.Usage(fmt.Errorf("--epoch %d: epochs start at 0", epoch))
			}
			e := uint64(epoch)
			o.UpToEpoch = &e
		}
		return c.Dump(ctx, table, o, cmd.OutOrStdout())
	})
	return cmd
}
