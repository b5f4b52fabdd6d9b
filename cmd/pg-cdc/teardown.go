package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newTeardownCmd(configPath *string) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "teardown",
		Short: "Drop the replication slot and the publication (sink data is never touched)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(*configPath)
			if err != nil {
				return err
			}
			if !yes {
				return usageError{fmt.Errorf("teardown drops slot %q and publication %q; WAL since the slot's position is released and cannot be streamed again: re-run with --yes", cfg.Replication.Slot, cfg.Replication.Publication)}
			}
			ctx := cmd.Context()
			db, err := connectSource(ctx, cfg)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := db.DropSlot(ctx, cfg.Replication.Slot); err != nil {
				return err
			}
			if err := db.DropPublication(ctx, cfg.Replication.Publication); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "dropped slot %q and publication %q; the data in %s is untouched\n",
				cfg.Replication.Slot, cfg.Replication.Publication, sinkName(cfg))
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "really drop the slot and the publication")
	return cmd
}
