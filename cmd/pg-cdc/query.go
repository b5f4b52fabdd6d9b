package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

func newQueryCmd(app *cli) *cobra.Command {
	var asOf, format string
	var tables bool
	cmd := &cobra.Command{
		Use:   "query [--as-of POINT] [--format table|csv|json] \"SQL\" | query --tables",
		Short: "Run one read-only SQL query over the captured tables, now or at a point in their history",
		Long: `Run one SQL query (DuckDB's dialect) over the sink, without the source.
Every captured table reads as its current state under its PostgreSQL name
(public.orders, or orders where no other schema has one), its change rows
under changes.<schema>.<table>. --as-of reads the sink as it was: epoch:N,
lsn:X/Y (every transaction committed at or before that LSN), an RFC 3339
time (every transaction committed at or before it), a branch (main,
staging), a tag (raw@<time>) or a manifest version number.

The query runs in a sandbox: one statement, a query, reading only the
sink's files; the query section of the configuration bounds its memory,
threads, time and result.`,
		Args: cobra.MaximumNArgs(1),
	}
	cmd.Flags().StringVar(&asOf, "as-of", "", "read the sink as of this point (default: the newest version)")
	cmd.Flags().StringVar(&format, "format", query.FormatTable, "output: table, csv or json")
	cmd.Flags().BoolVar(&tables, "tables", false, "list the captured tables, their live rows, schema version and freshness")
	cmd.RunE = app.onReader(func(ctx context.Context, r *query.Reader, _ config.Config, cmd *cobra.Command) error {
		args := cmd.Flags().Args()
		if tables != (len(args) == 0) {
			return commandLine(fmt.Errorf("give either one SQL query or --tables"))
		}
		if !query.ValidFormat(format) {
			return commandLine(fmt.Errorf("--format %q: want table, csv or json", format))
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
			return writeTables(cmd.OutOrStdout(), ts, format)
		}
		res, err := r.Query(ctx, at, args[0])
		if err != nil {
			return err
		}
		return res.Write(cmd.OutOrStdout(), format)
	})
	return cmd
}

// writeTables writes query --tables.
func writeTables(w io.Writer, ts []query.Table, format string) error {
	if format == query.FormatJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Tables []query.Table `json:"tables"`
		}{ts})
	}
	res := &query.Result{Columns: []query.Column{{Name: "table", Type: "VARCHAR"}, {Name: "rows", Type: "BIGINT"},
		{Name: "schema_version", Type: "INTEGER"}, {Name: "snapshot", Type: "VARCHAR"}, {Name: "fresh_as_of", Type: "TIMESTAMP WITH TIME ZONE"}}}
	aliased := slices.ContainsFunc(ts, func(t query.Table) bool { return t.View != "" })
	if aliased {
		// Tables whose names differ only in case are read by aliases.
		res.Columns = append(res.Columns, query.Column{Name: "query_as", Type: "VARCHAR"})
	}
	for _, t := range ts {
		var fresh any
		if !t.FreshAsOf.IsZero() {
			fresh = t.FreshAsOf
		}
		row := []any{t.Name, t.Rows, int32(t.SchemaVersion), t.Snapshot, fresh}
		if aliased {
			row = append(row, t.View)
		}
		res.Rows = append(res.Rows, row)
	}
	return res.Write(w, format)
}

// branchTime formats a time for the tables of refs and promote.
func branchTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// newTabWriter aligns the text tables of the read commands.
func newTabWriter(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 2, 4, 2, ' ', 0) }
