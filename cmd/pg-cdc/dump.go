package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/merge"
	"github.com/pg-cdc/pg-cdc/internal/render"
)

func newDumpCmd(configPath *string) *cobra.Command {
	var (
		table  string
		format string
		epoch  int64

		allowIncomplete bool
	)
	cmd := &cobra.Command{
		Use:   "dump --table schema.table",
		Short: "Print a table's merged state (base + deltas, DESIGN §7) from the manifest alone",
		Long: `dump prints the current state of one table as CSV (with a header) or JSON
lines, merged from the files the manifest names: no PostgreSQL connection is
made. --epoch shows the table as of an earlier epoch, as long as compaction
has not folded that epoch into the base. Output rules: docs/types.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(*configPath)
			if err != nil {
				return err
			}
			f, err := render.ParseFormat(format)
			if err != nil {
				return usageError{err}
			}
			ctx := cmd.Context()
			store, err := openSink(ctx, cfg)
			if err != nil {
				return err
			}
			m, _, err := manifest.Load(ctx, store)
			if err != nil {
				return notInitialized(err, cfg)
			}
			if table == "" {
				return usageError{errors.New("--table is required")}
			}
			ids, err := resolveTables(m, []string{table})
			if err != nil {
				return err
			}
			mt := m.Tables[ids[0].String()]
			if _, incomplete := incompleteTables(m, ids); len(incomplete) > 0 {
				if !allowIncomplete {
					return incompleteError(incomplete)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: the snapshot of %s is not complete: this is part of the table only\n", incomplete[0])
			}
			opts := merge.Options{MemoryBytes: cfg.Compaction.MemoryBudgetBytes}
			if cmd.Flags().Changed("epoch") {
				if epoch < 0 || uint64(epoch) > m.Epoch {
					return usageError{fmt.Errorf("--epoch %d: the manifest holds epochs 0 to %d", epoch, m.Epoch)}
				}
				e := uint64(epoch)
				opts.UpToEpoch = &e
			}
			if err := os.MkdirAll(cfg.State.Path, 0o755); err != nil {
				return fmt.Errorf("state directory: %w", err)
			}
			if opts.ScratchDir, err = os.MkdirTemp(cfg.State.Path, "dump-"); err != nil {
				return fmt.Errorf("scratch directory: %w", err)
			}
			defer os.RemoveAll(opts.ScratchDir)
			opts.ScratchDir = filepath.Clean(opts.ScratchDir)
			r, err := merge.Open(ctx, store, mt, opts)
			if err != nil {
				return err
			}
			defer r.Close()
			sv := mt.CurrentSchema()
			rt, err := render.NewTable(sv.Columns)
			if err != nil {
				return err
			}
			buf := bufio.NewWriterSize(cmd.OutOrStdout(), 256<<10)
			w, err := render.NewWriter(buf, rt, f)
			if err != nil {
				return err
			}
			for {
				row, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return err
				}
				if err := w.WriteRow(row); err != nil {
					return err
				}
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return buf.Flush()
		},
	}
	cmd.Flags().StringVar(&table, "table", "", "the table to print (schema.table, as the manifest names it)")
	cmd.Flags().StringVar(&format, "format", "csv", "csv or jsonl")
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "print the table as of this epoch (default: the latest)")
	cmd.Flags().BoolVar(&allowIncomplete, "allow-incomplete", false, "print a table whose snapshot is not complete (part of the table), with a warning, instead of exiting 18")
	return cmd
}
