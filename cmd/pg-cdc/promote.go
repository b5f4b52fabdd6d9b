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
		Long: `Compare the branch --to with the point --from (a branch, a tag raw@<time>,
epoch:N or a version number), print the per-table diff and a verdict —
no_change, safe (rows only), schema_change (additive: a table or column
added, an integer widened) or breaking (a table or column dropped or
renamed, a type changed otherwise, a primary key changed) — and move the
branch, unless --dry-run. A breaking promotion is refused without --force.
With promotion.mode manual, main moves only this way; it may also move back,
to an older tag.`,
		Args: cobra.NoArgs,
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
		current := to + ": does not exist yet"
		if p.ToAt != nil {
			current = describe(*p.ToAt)
		}
		fmt.Fprintf(w, "promote %s\nto      %s\n\n", describe(p.FromAt), current)
		writeChanges(w, p.Changes)
		fmt.Fprintf(w, "\nverdict: %s\n", p.Verdict)
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
