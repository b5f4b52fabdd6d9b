package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/catalog"
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
	cmd.RunE = app.onCapture(true, func(ctx context.Context, c *capture.Capture, cfg config.Config, cmd *cobra.Command) error {
		s, err := c.Status(ctx, rateWindow)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		s.WriteText(w, time.Now())
		if cfg.Catalog.Type != config.CatalogNone && s.Manifest != nil {
			// What the catalog holds against this manifest: a failure to
			// read it is shown, not fatal (the capture's status stands).
			p, closeCat, err := openPublisher(cfg, c.Sink, c.Log)
			if err == nil {
				defer closeCat()
				var rep catalog.Report
				rep, err = p.Drift(ctx, s.Manifest)
				fmt.Fprintln(w, "\ncatalog (Iceberg):")
				rep.WriteText(w)
			}
			if err != nil {
				fmt.Fprintf(w, "catalog: %v\n", err)
			}
		}
		if s.SourceErr != nil {
			return fmt.Errorf("status: the source is unreachable: %w", s.SourceErr)
		}
		return nil
	})
	return cmd
}
