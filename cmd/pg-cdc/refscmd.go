package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/query"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

func newRefsCmd(app *cli) *cobra.Command {
	var tags int
	var format string
	cmd := &cobra.Command{
		Use:   "refs [--tags N]",
		Short: "List the branches, the newest tags and the history window",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().IntVar(&tags, "tags", 10, "list this many of the newest tags (0: none)")
	formatFlag(cmd, &format, "text", "json")
	cmd.RunE = app.onReader(func(ctx context.Context, r *query.Reader, cfg config.Config, cmd *cobra.Command) error {
		if tags < 0 {
			return commandLine(fmt.Errorf("--tags %d: want 0 or more", tags))
		}
		l, err := r.Refs(ctx, tags)
		if err != nil {
			return err
		}
		if format == "json" {
			return readpath.WriteJSON(cmd.OutOrStdout(), l)
		}
		l.WriteText(cmd.OutOrStdout(), cfg.Promotion.Mode, cfg.History.Retention)
		return nil
	})
	return cmd
}
