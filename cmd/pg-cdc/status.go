package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newStatusCmd(app *cli) *cobra.Command {
	var rateWindow time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the slot, the manifest and per-table counts",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().DurationVar(&rateWindow, "wal-rate-window", 2*time.Second,
		"measure the source's WAL rate over this long to forecast when the slot would be invalidated (0: skip)")
	cmd.RunE = app.onCapture(true, func(ctx context.Context, c *capture.Capture, _ config.Config, cmd *cobra.Command) error {
		s, err := c.Status(ctx, rateWindow)
		if err != nil {
			return err
		}
		s.WriteText(cmd.OutOrStdout(), time.Now())
		return nil
	})
	return cmd
}
