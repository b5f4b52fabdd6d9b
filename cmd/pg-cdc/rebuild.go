package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newRebuildCmd(app *cli) *cobra.Command {
	var acceptNewUpstream bool
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Load every table into a new generation from a new slot, validate it, and switch to it",
		Long: `rebuild recovers from a lost slot (dropped, invalidated, or confirmed past
the manifest: exit codes 10 and 11), or rebuilds on request (design.md §8.5).

It holds the sink's writer lock, so no 'pg-cdc start' runs meanwhile (and it
refuses while one does, or while the slot is in use). It drops the slot
named by replication.slot and creates it again with an exported snapshot,
copies every table under that snapshot into the next generation's prefix
(beside the current files), reads the new files back and compares them with
the source (row counts, and sampled rows value by value), then switches
every table to the new generation with one conditional manifest write:
readers see the old generation, whole, until that write, and the new one,
whole, after it. The old generation's files become garbage, deleted by
compaction's gc after gc.grace_period.

The new generation holds the source as of the new slot's consistent point;
'pg-cdc start' streams from there (it catches up).

A source whose system identifier, timeline or database differs from the
manifest's (exit 12) is rebuilt only with --accept-new-upstream.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&acceptNewUpstream, "accept-new-upstream", false,
		"rebuild from a source whose system identifier, timeline or database differs from the manifest's, and record it as the upstream")
	cmd.RunE = app.onCapture(true, func(ctx context.Context, c *capture.Capture, cfg config.Config, cmd *cobra.Command) error {
		r, err := c.Rebuild(ctx, capture.RebuildOptions{AcceptNewUpstream: acceptNewUpstream,
			BreakerThreshold: cfg.Flush.CASBreakerThreshold, BreakerWindow: cfg.Flush.CASBreakerWindow})
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "rebuilt: slot %q was %s; %d tables, %d rows in %d files copied at LSN %s into generation %s and validated (row counts, %d rows compared with the source); manifest epoch %d; %d files of the previous generations wait for gc (gc.grace_period %s); took %s\n",
			r.Slot, r.SlotWas, r.Tables, r.Rows, r.Files, r.LSN, r.Generation, r.Sampled, r.Epoch, r.Retired, cfg.GC.GracePeriod, r.Took.Round(time.Millisecond))
		if len(r.Uncompared) > 0 {
			fmt.Fprintf(out, "not compared with the source (truncated or rewritten after the snapshot; the stream applies it): %s\n", strings.Join(r.Uncompared, ", "))
		}
		if id := r.NewUpstream; id != nil {
			fmt.Fprintf(out, "the manifest's upstream is now system %s timeline %d database %q\n", id.SystemIdentifier, id.Timeline, id.Database)
		}
		fmt.Fprintln(out, "run 'pg-cdc start' to stream from the new slot")
		return nil
	})
	return cmd
}
