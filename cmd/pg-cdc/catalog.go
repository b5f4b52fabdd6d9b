package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// keepRetired is how long garbage collection keeps a retired file beyond
// gc.grace_period and history.retention: a published Iceberg snapshot may
// name it until it expires (design.md §12).
func keepRetired(cfg config.Config) time.Duration {
	if cfg.Catalog.Type == config.CatalogNone {
		return 0
	}
	return catalog.Retention(cfg.History.Retention, cfg.Catalog.Iceberg.SnapshotMaxAge)
}

// openPublisher opens the configured catalog and a publisher on it, or nil
// when catalog.type is none; close releases the catalog. The publisher
// reads sink's history (a changelog behind a major compaction).
func openPublisher(cfg config.Config, sink blob.Store, log *slog.Logger) (*catalog.Publisher, func() error, error) {
	if cfg.Catalog.Type == config.CatalogNone {
		return nil, func() error { return nil }, nil
	}
	ic := cfg.Catalog.Iceberg
	uri := ic.URI
	if uri == "" && ic.Type == config.IcebergSQL {
		uri = filepath.Join(cfg.State.Path, "iceberg-catalog.db")
	}
	ad, closeCat, err := openIceberg(ic.Type, uri, cfg.Storage, sink, ic.Properties)
	if err != nil {
		return nil, nil, err
	}
	p := catalog.New(catalog.Options{Catalog: ad, Prefix: ic.Namespace, Retention: cfg.History.Retention,
		SnapshotMaxAge: ic.SnapshotMaxAge, SnapshotMinKeep: ic.SnapshotMinKeep, CommitInterval: ic.CommitInterval, Log: log,
		// The tombstones a state table masks, read through the sink's store.
		Positions: tombstones(sink), History: history(sink)})
	return p, closeCat, nil
}

// history is sink's history, or nil without a sink (the publisher then
// says it cannot read what a major compaction folded, never guesses).
func history(sink blob.Store) *manifest.History {
	if sink == nil {
		return nil
	}
	return manifest.NewHistory(sink)
}

func newCatalogCmd(app *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Show or repair the Apache Iceberg tables the sink is published as (catalog.type iceberg)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(
		app.catalogCommand("sync", "Publish the newest manifest version to the catalog now", (*catalog.Publisher).Sync),
		app.catalogCommand("status", "Compare the published Iceberg tables with the manifest (drift), with each table's metadata location",
			(*catalog.Publisher).Drift),
	)
	return cmd
}

// catalogCommand is a catalog subcommand: with the configuration, the
// sink's manifest (the sink alone: no source needed) and a publisher, act
// makes a report, which is printed even when act failed part way.
func (app *cli) catalogCommand(use, short string, act func(*catalog.Publisher, context.Context, *manifest.Manifest) (catalog.Report, error)) *cobra.Command {
	var format string
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	formatFlag(cmd, &format, "text", "json")
	cmd.RunE = app.onSink(func(ctx context.Context, cfg config.Config, sink capture.Sink, cmd *cobra.Command) error {
		if cfg.Catalog.Type == config.CatalogNone {
			return cdc.Usage(errors.New("catalog.type is not set: nothing is published (set catalog.type: iceberg; docs/catalogs.md)"))
		}
		m, _, err := manifest.Load(ctx, sink)
		if err != nil {
			return err
		}
		p, closeCat, err := openPublisher(cfg, sink, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer closeCat()
		rep, err := act(p, ctx, m)
		if format == "json" {
			if werr := rep.WriteJSON(cmd.OutOrStdout()); werr != nil {
				return werr
			}
		} else {
			rep.WriteText(cmd.OutOrStdout())
		}
		if err != nil {
			return fmt.Errorf("catalog %s: %w", use, err)
		}
		return nil
	})
	return cmd
}

// publishAfterInit publishes the sink's first version (pg-cdc catalog sync
// after init). A failure is a warning: the capture is made, and start
// publishes at its first version.
func publishAfterInit(ctx context.Context, cfg config.Config, sink capture.Sink, log *slog.Logger) {
	p, closeCat, err := openPublisher(cfg, sink, log)
	if err == nil {
		defer closeCat()
		var m *manifest.Manifest
		if m, _, err = manifest.Load(ctx, sink); err == nil {
			_, err = p.Publish(ctx, m)
		}
	}
	if err != nil {
		log.Warn("publishing to the catalog after init failed; pg-cdc start publishes again (or run pg-cdc catalog sync)", "err", err)
	}
}
