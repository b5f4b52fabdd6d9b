package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newResnapshotCmd(app *cli) *cobra.Command {
	var (
		table string
		wait  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "resnapshot --table schema.table",
		Short: "Copy one table again into a new generation while the stream runs",
		Long: `resnapshot records in the manifest a request to copy the table again, into
its next generation (design.md §8.6), and tells a running 'pg-cdc start' (a
logical decoding message makes it re-read the manifest); a stopped one takes
the request up when it starts. start copies the table in primary-key chunks
(backfill.chunk_rows) under the next generation's prefix, writes every change
streamed for the table meanwhile to both generations, and when the copy is
complete switches the table to the new generation in one manifest write,
retiring the old generation's files (deleted by gc after gc.grace_period).
Readers keep reading the current generation, whole, until the switch.
--wait (default 10m) waits for the switch and prints progress; --wait 0
returns once the request is recorded.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&table, "table", "", "the table to copy again (schema.table, as the manifest names it) (required)")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for the switch to the new generation (0: do not wait)")
	cmd.RunE = app.onCapture(true, func(ctx context.Context, c *capture.Capture, _ config.Config, cmd *cobra.Command) error {
		if table == "" {
			return commandLine(errors.New(`required flag "table" not set`))
		}
		return c.Resnapshot(ctx, table, wait, cmd.OutOrStdout())
	})
	return cmd
}
