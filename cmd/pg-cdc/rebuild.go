package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newRebuildCmd(app *cli) *cobra.Command {
	var acceptNewUpstream bool
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Load every table into a new generation from a new slot, validate it, and switch to it",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&acceptNewUpstream, "accept-new-upstream", false,
		"rebuild from a source whose system identifier, timeline or database differs from the manifest's, and record it as the upstream")
	cmd.RunE = app.onCapture(true, func(ctx context.Context, c *capture.Capture, cfg config.Config, cmd *cobra.Command) error {
		r, err := c.Rebuild(ctx, capture.RebuildOptions{AcceptNewUpstream: acceptNewUpstream,
			BreakerThreshold: cfg.Flush.CASBreakerThreshold, BreakerWindow: cfg.Flush.CASBreakerWindow})
		if err != nil {
			return err
		}
		r.WriteText(cmd.OutOrStdout(), cfg.GC.GracePeriod)
		return nil
	})
	return cmd
}
