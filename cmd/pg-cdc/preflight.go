package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newPreflightCmd(app *cli) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check that the source and the sink are ready for pg-cdc, with the fix for each problem",
		Args:  cobra.NoArgs,
	}
	formatFlag(cmd, &format, "text", "json")
	cmd.RunE = app.onCapture(false, func(ctx context.Context, c *capture.Capture, cfg config.Config, cmd *cobra.Command) error {
		sink := capture.PreflightSink{Open: func(ctx context.Context) (capture.Sink, error) { return openSink(ctx, cfg, nil) }}
		if cfg.Storage.Type == config.StorageFilesystem {
			sink.Path = cfg.Storage.Path
		}
		rep, err := c.Preflight(ctx, sink)
		if err != nil {
			return err
		}
		if err := rep.Write(cmd.OutOrStdout(), format); err != nil {
			return err
		}
		return rep.Err()
	})
	return cmd
}
