package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/query"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

func newDiffCmd(app *cli) *cobra.Command {
	var tables []string
	var format string
	cmd := &cobra.Command{
		Use:   "diff FROM TO [--table T]...",
		Short: "Show what changed between two points: keys inserted, deleted and changed, and schema changes, per table",
		Args:  cobra.ExactArgs(2),
	}
	cmd.Flags().StringSliceVar(&tables, "table", nil, "only this table (schema.table or its name; repeat or comma-separate)")
	formatFlag(cmd, &format, "text", "json")
	cmd.RunE = app.onReader(func(ctx context.Context, r *query.Reader, _ config.Config, cmd *cobra.Command) error {
		args := cmd.Flags().Args()
		from, err := r.Resolve(ctx, args[0])
		if err != nil {
			return err
		}
		to, err := r.Resolve(ctx, args[1])
		if err != nil {
			return err
		}
		verdict, changes, err := r.Compare(ctx, from, to, tables)
		if err != nil {
			return err
		}
		d := readpath.Diff{From: from, To: to, Verdict: verdict, Tables: changes}
		if format == "json" {
			return d.WriteJSON(cmd.OutOrStdout())
		}
		d.WriteText(cmd.OutOrStdout())
		return nil
	})
	return cmd
}
