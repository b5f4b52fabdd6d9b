package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/audit"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/query"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

func newPromoteCmd(app *cli) *cobra.Command {
	var from, to string
	var dryRun, force bool
	cmd := &cobra.Command{
		Use:   "promote [--from staging] [--to main] [--dry-run] [--force]",
		Short: "Move a branch (main) to a point (staging), after showing what its readers would see change",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVar(&from, "from", refs.Staging, "the point to promote")
	cmd.Flags().StringVar(&to, "to", refs.Main, "the branch to move")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the diff and the verdict, move nothing")
	cmd.Flags().BoolVar(&force, "force", false, "promote even when the verdict is breaking")
	cmd.RunE = app.onReader(func(ctx context.Context, r *query.Reader, cfg config.Config, cmd *cobra.Command) error {
		p, err := r.PlanPromotion(ctx, from, to)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		p.WriteText(w)
		if dryRun {
			fmt.Fprintf(w, "dry run: %s not moved\n", to)
			return nil
		}
		rf, err := r.Promote(ctx, p, force, "promote "+audit.CurrentUser())
		if errors.Is(err, refs.ErrNotRecorded) && rf != nil {
			// Moved: only the backup a lost refs file is restored from is
			// missing. Say so; the next promotion writes one again.
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v\n", err)
			err = nil
		}
		if err != nil {
			return err
		}
		b, _ := rf.Branch(to)
		fmt.Fprintf(w, "%s → version %d (epoch %d, end LSN %s)\n", to, b.ManifestVersion, b.Epoch, b.EndLSN)
		if cfg.Promotion.Mode == refs.ModeAuto && to == refs.Main {
			fmt.Fprintln(w, "note: promotion.mode is auto, so main follows every flush: the next one moves it on (set promotion.mode: manual to keep it here)")
		}
		return nil
	})
	return cmd
}
