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
		Long: `reconcile compares each captured table's columns in the source catalog with
its newest schema version in the manifest and, for the tables that differ,
asks the stream to record the change: it writes a logical decoding message
while the tables' shapes are locked, and 'pg-cdc start' records the new
schema versions when it reads that message, at exactly its position in the
WAL (docs/decisions.md, "Reconcile"). A running start applies it within a
flush interval; a stopped one when it starts. --wait (default 2m) waits for
the manifest to hold the result and reports it; --wait 0 returns after
writing the request. --force sends the tables even when their shape
already matches the manifest. start does the same every
schema.reconcile_interval_sec.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringArrayVar(&tables, "table", nil, "reconcile only this table (schema.table, as the manifest names it); repeatable")
	cmd.Flags().BoolVar(&force, "force", false, "send the tables even when their catalog shape matches the manifest")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the stream to record the request (0: do not wait)")
	cmd.RunE = app.onCapture(true, func(ctx context.Context, c *capture.Capture, _ config.Config, cmd *cobra.Command) error {
		return c.Reconcile(ctx, tables, force, wait, cmd.OutOrStdout())
	})
	return cmd
}
