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
		Args:  cobra.NoArgs,
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
