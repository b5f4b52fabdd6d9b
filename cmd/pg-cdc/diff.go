package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/query"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

func newDiffCmd(app *cli) *cobra.Command {
	var tables []string
	var format string
	cmd := &cobra.Command{
		Use:   "diff FROM TO [--table T]...",
		Short: "Show what changed between two points: keys inserted, deleted and changed, and schema changes, per table",
		Long: `Compare the sink at two points (a branch, a tag raw@<time>, epoch:N,
lsn:X/Y, an RFC 3339 time or a manifest version): per table, the primary
keys inserted, deleted and changed (a table without a primary key: the rows
one point has more of), and its schema changes; then the verdict a
promotion from FROM to TO would get.`,
		Args: cobra.ExactArgs(2),
	}
	cmd.Flags().StringSliceVar(&tables, "table", nil, "only this table (schema.table or its name; repeat or comma-separate)")
	cmd.Flags().StringVar(&format, "format", "text", "output: text or json")
	cmd.RunE = app.onReader(func(ctx context.Context, r *query.Reader, _ config.Config, cmd *cobra.Command) error {
		if format != "text" && format != "json" {
			return commandLine(fmt.Errorf("--format %q: want text or json", format))
		}
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
		w := cmd.OutOrStdout()
		if format == "json" {
			return writeJSON(w, struct {
				From    pointJSON          `json:"from"`
				To      pointJSON          `json:"to"`
				Verdict refs.Verdict       `json:"verdict"`
				Tables  []refs.TableChange `json:"tables"`
			}{pointOf(from), pointOf(to), verdict, nonNil(changes)})
		}
		fmt.Fprintf(w, "from %s\nto   %s\n\n", describe(from), describe(to))
		writeChanges(w, changes)
		fmt.Fprintf(w, "\nverdict: %s\n", verdict)
		return nil
	})
	return cmd
}

// pointJSON is a resolved point in the JSON outputs.
type pointJSON struct {
	Name    string `json:"name"`
	Version uint64 `json:"manifest_version"`
	Epoch   uint64 `json:"epoch"`
	EndLSN  string `json:"end_lsn"`
}

func pointOf(at query.At) pointJSON {
	return pointJSON{Name: at.Name, Version: at.Version(), Epoch: at.Manifest.Epoch, EndLSN: at.Manifest.EndLSN.String()}
}

// describe names a resolved point for the text outputs: what was asked
// and the version (with its bound) that answers it.
func describe(at query.At) string {
	name := at.Name
	if name == "" {
		name = "latest"
	}
	s := fmt.Sprintf("%s: version %d (epoch %d, end LSN %s)", name, at.Version(), at.Manifest.Epoch, at.Manifest.EndLSN)
	switch {
	case at.Bound.LSN != 0:
		s += fmt.Sprintf(", transactions up to LSN %s", at.Bound.LSN)
	case !at.Bound.Time.IsZero():
		s += ", transactions committed up to " + branchTime(at.Bound.Time)
	}
	return s
}

// writeChanges is the per-table table of diff and promote.
func writeChanges(w io.Writer, changes []refs.TableChange) {
	if len(changes) == 0 {
		fmt.Fprintln(w, "no table changed")
		return
	}
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "TABLE\tINSERTED\tDELETED\tCHANGED\tSCHEMA")
	for _, c := range changes {
		schema := "-"
		if len(c.Schema) > 0 {
			schema = strings.Join(c.Schema, "; ")
		}
		if len(c.Breaking) > 0 {
			schema += " (breaking: " + strings.Join(c.Breaking, "; ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", c.Table, c.Inserted, c.Deleted, c.Changed, schema)
	}
	tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
