package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

func newPreflightCmd(app *cli) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check that the source and the sink are ready for pg-cdc, with the fix for each problem",
		Long: `preflight runs every check init and start depend on, changes nothing on
the source, and prints one line per check (✓ passed, ! warning, ✗ failed),
each problem followed by the exact fix for the provider it runs on
(source.postgres.provider: self-managed, rds or aurora; auto detects it).

Source: server version, wal_level, replication privilege, CREATE on the
database, free replication slots and WAL senders, a replication connection,
the captured tables' names, replica identity and SELECT privilege, the
publication and the slot. Sink: the conditional-write probe (it writes and
deletes one object under _pgcdc/probe/) and the manifest. A filesystem sink
whose directory does not exist yet is not created: its parent must be
writable, and init creates it.

Exit 0 when nothing failed (warnings allowed), 2 when a check failed.
See docs/preflight.md.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	cmd.RunE = app.onCapture(false, func(ctx context.Context, c *capture.Capture, cfg config.Config, cmd *cobra.Command) error {
		if format != "text" && format != "json" {
			return cdc.Usage(fmt.Errorf("--format %q: want text or json", format))
		}
		sink := capture.PreflightSink{Open: func(ctx context.Context) (capture.Sink, error) { return openSink(ctx, cfg, nil) }}
		if cfg.Storage.Type == config.StorageFilesystem {
			sink.Path = cfg.Storage.Path
		}
		rep, err := c.Preflight(ctx, sink)
		if err != nil {
			return err
		}
		if err := rep.Write(cmd.OutOrStdout(), format); err != nil {
			return err
		}
		return rep.Err()
	})
	return cmd
}
