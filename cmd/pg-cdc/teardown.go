package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newTeardownCmd(app *cli) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "teardown",
		Short: "Drop the replication slot and the publication (sink data is never touched)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "really drop the slot and the publication")
	cmd.RunE = app.onCapture(false, func(ctx context.Context, c *capture.Capture, _ config.Config, cmd *cobra.Command) error {
		if !yes {
			return cdc.Usage(fmt.Errorf("teardown drops slot %q and publication %q; WAL since the slot's position is released and cannot be streamed again: re-run with --yes", c.Slot, c.Publication))
		}
		if err := c.Teardown(ctx); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "dropped slot %q and publication %q; the data in %s is untouched\n", c.Slot, c.Publication, c.SinkName)
		return nil
	})
	return cmd
}
