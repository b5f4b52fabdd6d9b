package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
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
			out := cmd.OutOrStdout()
			switch {
			case res.Already != nil:
				m := res.Already
				fmt.Fprintf(out, "already initialized: %d tables, epoch %d, end LSN %s (manifest %s in %s); nothing changed\n",
					len(m.Tables), m.Epoch, m.EndLSN, manifest.Key, c.SinkName)
			case res.Resumed != nil:
				res.Resumed.WriteText(out, c.Slot)
			default:
				fmt.Fprintf(out, "initialized: %d tables, %d rows snapshotted at LSN %s into %s; run 'pg-cdc start' to stream\n",
					res.Snapshot.Tables, res.Snapshot.Rows, res.Snapshot.LSN, c.SinkName)
			}
			if cfg.Catalog.Type != config.CatalogNone {
				// catalog sync after init: the snapshot is published at once.
				if m, _, err := manifest.Load(ctx, c.Sink); err != nil {
					c.Log.Warn("reading the manifest to publish it to the catalog", "err", err)
				} else {
					publishAfterInit(ctx, cfg, m, c.Log)
				}
			}
			return nil
		}),
	}
}
