package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

func newRefsCmd(app *cli) *cobra.Command {
	var tags int
	var format string
	cmd := &cobra.Command{
		Use:   "refs [--tags N]",
		Short: "List the branches, the newest tags and the history window",
		Long: `List the branches (staging follows every flush; main follows it in
promotion.mode auto, moves with pg-cdc promote in manual), the newest tags
raw@<flush time> — one per flush the history retains, usable wherever a
point is (query --as-of, diff, promote --from) — and the oldest and newest
versions the history holds.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().IntVar(&tags, "tags", 10, "list this many of the newest tags (0: none)")
	cmd.Flags().StringVar(&format, "format", "text", "output: text or json")
	cmd.RunE = app.onReader(func(ctx context.Context, r *query.Reader, cfg config.Config, cmd *cobra.Command) error {
		if format != "text" && format != "json" {
			return commandLine(fmt.Errorf("--format %q: want text or json", format))
		}
		if tags < 0 {
			return commandLine(fmt.Errorf("--tags %d: want 0 or more", tags))
		}
		l, err := r.Refs(ctx, tags)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if format == "json" {
			return writeJSON(w, l)
		}
		tw := newTabWriter(w)
		fmt.Fprintln(tw, "BRANCH\tVERSION\tEPOCH\tEND LSN\tNEWEST COMMIT\tMOVED\tBY")
		for _, name := range slices.Sorted(maps.Keys(l.Branches)) {
			b := l.Branches[name]
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", name, b.ManifestVersion, b.Epoch, b.EndLSN, branchTime(b.MaxCommitTime), branchTime(b.UpdatedAt), b.By)
		}
		tw.Flush()
		if len(l.Branches) == 0 {
			fmt.Fprintln(w, "no branches yet: pg-cdc start writes them after its first flush")
		}
		fmt.Fprintf(w, "\npromotion.mode: %s\n", cfg.Promotion.Mode)
		if len(l.Tags) > 0 {
			fmt.Fprintln(w)
			tw = newTabWriter(w)
			fmt.Fprintln(tw, "TAG\tEPOCH\tEND LSN\tNEWEST COMMIT")
			for _, t := range l.Tags {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", t.Name, t.Epoch, t.EndLSN, branchTime(t.MaxCommitTime))
			}
			tw.Flush()
		}
		fmt.Fprintf(w, "\nhistory: versions %d to %d (committed %s to %s; history.retention %s)\n",
			l.Oldest.Version, l.Newest.Version, branchTime(l.Oldest.CommittedAt), branchTime(l.Newest.CommittedAt), cfg.History.Retention)
		return nil
	})
	return cmd
}
