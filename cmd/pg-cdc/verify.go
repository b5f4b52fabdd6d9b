package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/verify"
)

func newVerifyCmd(configPath *string) *cobra.Command {
	var (
		tables []string
		wait   time.Duration
		format string

		allowIncomplete bool
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Compare the source with the sink as of one source snapshot; exit 19 when they differ",
		Long: `verify reads every table (or those of --table) in a REPEATABLE READ snapshot
of the source, commits a watermark after it and waits until the manifest has
passed the watermark, then compares each table with the sink's state as of that
snapshot (per key, the newest version whose transaction the snapshot sees). No
quiescing: writes may go on. It prints counts per table and the key ranges that
differ, and exits 19 when anything differs. 'pg-cdc start' must be running, so
the watermark reaches the manifest. See docs/operations.md#verify.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringArrayVar(&tables, "table", nil, "verify only this table (schema.table, as the manifest names it); repeatable")
	cmd.Flags().DurationVar(&wait, "wait", verify.DefaultWait, "how long the manifest may take to pass the watermark")
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	cmd.Flags().BoolVar(&allowIncomplete, "allow-incomplete", false, "skip tables whose snapshot is not complete (listed as not compared) instead of exiting 18")
	cmd.RunE = withSignals(configPath, func(ctx context.Context, cfg config.Config, log *slog.Logger, cmd *cobra.Command) error {
		if format != "text" && format != "json" {
			return usageError{fmt.Errorf("--format %q: want text or json", format)}
		}
		store, err := openSink(ctx, cfg)
		if err != nil {
			return err
		}
		m, _, err := manifest.Load(ctx, store)
		if err != nil {
			return notInitialized(err, cfg)
		}
		ids, err := resolveTables(m, tables)
		if err != nil {
			return err
		}
		ids, incomplete := incompleteTables(m, ids)
		if len(incomplete) > 0 {
			if !allowIncomplete {
				return incompleteError(incomplete)
			}
			for _, t := range incomplete {
				fmt.Fprintf(cmd.ErrOrStderr(), "not compared: the snapshot of %s is not complete\n", t)
			}
			if len(ids) == 0 {
				return nil
			}
		}
		// Comparing with another database would report every row as a
		// difference: refuse it as start does (exit 12).
		db, err := connectUpstream(ctx, cfg, m)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := os.MkdirAll(cfg.State.Path, 0o755); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
		scratch, err := os.MkdirTemp(cfg.State.Path, "verify-")
		if err != nil {
			return fmt.Errorf("scratch directory: %w", err)
		}
		defer os.RemoveAll(scratch)
		rep, err := verify.Run(ctx, verifySource{db}, store, ids, verify.Options{
			ScratchDir:  filepath.Clean(scratch),
			MemoryBytes: cfg.Compaction.MemoryBudgetBytes,
			Wait:        wait,
			Log:         log,
		})
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if format == "json" {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return err
			}
		} else {
			printVerify(out, rep)
		}
		return differences(rep)
	})
	return cmd
}

// verifySource adapts the source adapter to verify's port.
type verifySource struct{ db *postgres.DB }

func (s verifySource) BeginSnapshot(ctx context.Context, tables []cdc.TableID, lockTimeout time.Duration) (verify.Snapshot, error) {
	tx, err := s.db.BeginSnapshot(ctx, tables, lockTimeout)
	if err != nil {
		return nil, err
	}
	return tx, nil
}

func (s verifySource) EmitMessage(ctx context.Context, prefix, content string) (cdc.LSN, error) {
	return s.db.EmitMessage(ctx, prefix, content)
}

// differences is the command's result: nil when every table is equal,
// cdc.ErrDifferences (exit 19) naming the tables otherwise.
func differences(rep *verify.Report) error {
	var names []string
	for _, t := range rep.Tables {
		if !t.Equal {
			names = append(names, t.Table)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &cdc.Error{Class: cdc.ErrDifferences,
		Msg:  fmt.Sprintf("%d of %d tables differ: %s", len(names), len(rep.Tables), strings.Join(names, ", ")),
		Hint: "the report lists the differing key ranges; see docs/operations.md#verify for what to do"}
}

// printVerify writes the human-readable report.
func printVerify(out io.Writer, rep *verify.Report) {
	if len(rep.Tables) == 0 {
		fmt.Fprintln(out, "no tables to verify")
		return
	}
	first := rep.Tables[0]
	fmt.Fprintf(out, "as of source snapshot %s; watermark %s passed by manifest epoch %d (end LSN %s)\n",
		first.Snapshot, first.Watermark, first.Epoch, first.EndLSN)
	equal := 0
	for _, t := range rep.Tables {
		how := ""
		if t.Multiset {
			how = " (no primary key: compared as multisets of whole rows)"
		}
		if t.Newer > 0 {
			how += fmt.Sprintf("; %d sink versions newer than the snapshot ignored", t.Newer)
		}
		if t.Snapshot != first.Snapshot {
			how += fmt.Sprintf(" (as of snapshot %s, watermark %s)", t.Snapshot, t.Watermark)
		}
		if t.Equal {
			equal++
			fmt.Fprintf(out, "%s: equal: %d rows in the source, %d in the sink%s\n", t.Table, t.SourceRows, t.SinkRows, how)
			printVerifyAdjusted(out, t)
			continue
		}
		fmt.Fprintf(out, "%s: DIFFERENT: %d rows in the source, %d in the sink: %d matching, %d missing in the sink, %d extra in the sink, %d with different values%s\n",
			t.Table, t.SourceRows, t.SinkRows, t.Matching, t.Missing, t.Extra, t.Changed, how)
		if len(t.Columns) > 0 {
			fmt.Fprintf(out, "  columns that differ: %s\n", countList(t.Columns))
		}
		if t.Unrecovered > 0 {
			fmt.Fprintf(out, "  %d of the differing values are unchanged TOAST values the sink never received (counted in 'pg-cdc status')\n", t.Unrecovered)
		}
		fmt.Fprintf(out, "  key ranges that differ (key %s):\n", strings.Join(t.Key, ", "))
		for _, r := range t.Ranges {
			span := r.First
			if r.Last != r.First {
				span += " .. " + r.Last
			}
			fmt.Fprintf(out, "    %s: %s\n", span, rangeCounts(r))
		}
		if t.MoreRanges > 0 {
			fmt.Fprintf(out, "    … and %d more ranges\n", t.MoreRanges)
		}
		if len(t.Examples) > 0 {
			fmt.Fprintf(out, "  values that differ (first %d):\n", len(t.Examples))
			for _, e := range t.Examples {
				note := ""
				if e.Unrecovered {
					note = " (unchanged TOAST, never received)"
				}
				fmt.Fprintf(out, "    %s %s: source %s, sink %s%s\n", e.Key, e.Column, e.Source, e.Sink, note)
			}
		}
		printVerifyAdjusted(out, t)
	}
	fmt.Fprintf(out, "%d tables: %d equal, %d different\n", len(rep.Tables), equal, len(rep.Tables)-equal)
}

func printVerifyAdjusted(out io.Writer, t verify.TableResult) {
	if len(t.Adjusted) > 0 {
		fmt.Fprintf(out, "  source values a type rule changed, compared as the sink stores them (docs/types.md): %s\n", countList(t.Adjusted))
	}
}

func rangeCounts(r verify.Range) string {
	noun := "keys"
	if r.Keys == 1 {
		noun = "key"
	}
	var parts []string
	for _, p := range []struct {
		n    int64
		what string
	}{{r.Missing, "missing in the sink"}, {r.Extra, "extra in the sink"}, {r.Changed, "with different values"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return fmt.Sprintf("%d %s (%s)", r.Keys, noun, strings.Join(parts, ", "))
}

// countList prints "a (2), b (1)" in name order.
func countList(m map[string]int64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s (%d)", n, m[n])
	}
	return strings.Join(parts, ", ")
}
