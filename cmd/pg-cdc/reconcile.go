package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newReconcileCmd(app *cli) *cobra.Command {
	var (
		tables []string
		force  bool
		wait   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Record schema changes that no row change has announced yet",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringArrayVar(&tables, "table", nil, "reconcile only this table (schema.table, as the manifest names it); repeatable")
	cmd.Flags().BoolVar(&force, "force", false, "send the tables even when their catalog shape matches the manifest")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the stream to record the request (0: do not wait)")
	cmd.RunE = app.onCapture(true, func(ctx context.Context, c *capture.Capture, _ config.Config, cmd *cobra.Command) error {
		return c.Reconcile(ctx, tables, force, wait, cmd.OutOrStdout())
	})
	return cmd
}
