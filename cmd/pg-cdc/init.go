package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newInitCmd(app *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Check the source, create the publication and slot, and take the initial snapshot",
		Args:  cobra.NoArgs,
		RunE: app.onCapture(true, func(ctx context.Context, c *capture.Capture, cfg config.Config, cmd *cobra.Command) error {
			res, err := c.Init(ctx)
			if err != nil {
				return err
			}
			res.WriteText(cmd.OutOrStdout(), c.Slot, c.SinkName)
			if cfg.Catalog.Type != config.CatalogNone {
				publishAfterInit(ctx, cfg, c.Sink, c.Log)
			}
			return nil
		}),
	}
}
