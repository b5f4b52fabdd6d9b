package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/query"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

func newQueryCmd(app *cli) *cobra.Command {
	var asOf, format string
	var tables bool
	cmd := &cobra.Command{
		Use:   "query [--as-of POINT] [--format table|csv|json] \"SQL\" | query --tables",
		Short: "Run one read-only SQL query over the captured tables, now or at a point in their history",
		Args:  cobra.MaximumNArgs(1),
	}
	cmd.Flags().StringVar(&asOf, "as-of", "", "read the sink as of this point (default: the newest version)")
	formatFlag(cmd, &format, query.FormatTable, query.FormatCSV, query.FormatJSON)
	cmd.Flags().BoolVar(&tables, "tables", false, "list the captured tables, their live rows, schema version and freshness")
	cmd.RunE = app.onReader(func(ctx context.Context, r *query.Reader, _ config.Config, cmd *cobra.Command) error {
		args := cmd.Flags().Args()
		if tables != (len(args) == 0) {
			return commandLine(fmt.Errorf("give either one SQL query or --tables"))
		}
		at, err := r.Resolve(ctx, asOf)
		if err != nil {
			return err
		}
		if tables {
			ts, err := r.Tables(ctx, at)
			if err != nil {
				return err
			}
			return readpath.WriteTables(cmd.OutOrStdout(), ts, format)
		}
		res, err := r.Query(ctx, at, args[0])
		if err != nil {
			return err
		}
		return res.Write(cmd.OutOrStdout(), format)
	})
	return cmd
}
