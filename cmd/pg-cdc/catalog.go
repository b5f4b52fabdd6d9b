package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

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
// when catalog.type is none; close releases the catalog.
func openPublisher(cfg config.Config, log *slog.Logger) (*catalog.Publisher, func() error, error) {
	if cfg.Catalog.Type == config.CatalogNone {
		return nil, func() error { return nil }, nil
	}
	ic := cfg.Catalog.Iceberg
	var (
		ad       catalog.Catalog
		closeCat func() error
		err      error
	)
	switch ic.Type {
	case config.IcebergREST:
		// Opened at first use and again after a failed open: a REST
		// catalog that is down must not stop start (the publisher retries).
		ad, closeCat, err = openIcebergREST(ic.URI, cfg.Storage.Path, ic.Properties)
	default:
		uri := ic.URI
		if uri == "" {
			uri = filepath.Join(cfg.State.Path, "iceberg-catalog.db")
		}
		ad, closeCat, err = openIcebergSQL(uri, cfg.Storage.Path)
	}
	if err != nil {
		return nil, nil, err
	}
	root := cfg.Storage.Path
	p := catalog.New(catalog.Options{Catalog: ad, Prefix: ic.Namespace, Retention: cfg.History.Retention,
		SnapshotMaxAge: ic.SnapshotMaxAge, SnapshotMinKeep: ic.SnapshotMinKeep, Log: log,
		// The tombstones a state table masks, read from the filesystem sink
		// (the only one catalog.type iceberg publishes so far).
		Positions: tombstones(root)})
	return p, closeCat, nil
}

func newCatalogCmd(app *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Show or repair the Apache Iceberg tables the sink is published as (catalog.type iceberg)",
		Long: `The sink's tables published as Apache Iceberg tables over the same Parquet
files (catalog.type: iceberg; docs/catalogs.md). 'pg-cdc start' publishes
every committed version beside the stream; 'sync' publishes the newest now
(after 'init', or to repair), 'status' compares what is published with the
manifest and changes nothing.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newCatalogSyncCmd(app), newCatalogStatusCmd(app))
	return cmd
}

// onCatalog is the RunE of a catalog command: the configuration, the sink's
// manifest (the sink alone: no source needed) and a publisher.
func (app *cli) onCatalog(format *string, fn func(ctx context.Context, p *catalog.Publisher, m *manifest.Manifest, w io.Writer) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if *format != "text" && *format != "json" {
			return commandLine(fmt.Errorf("--format %q: want text or json", *format))
		}
		cfg, err := loadConfig(app.configPath)
		if err != nil {
			return err
		}
		if cfg.Catalog.Type == config.CatalogNone {
			return cdc.Usage(errors.New("catalog.type is not set: nothing is published (set catalog.type: iceberg; docs/catalogs.md)"))
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		sink, err := openSink(ctx, cfg, nil)
		if err != nil {
			return err
		}
		m, _, err := manifest.Load(ctx, sink)
		if err != nil {
			return err
		}
		p, closeCat, err := openPublisher(cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer closeCat()
		return fn(ctx, p, m, cmd.OutOrStdout())
	}
}

func newCatalogSyncCmd(app *cli) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Publish the newest manifest version to the catalog now",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVar(&format, "format", "text", "output: text or json")
	cmd.RunE = app.onCatalog(&format, func(ctx context.Context, p *catalog.Publisher, m *manifest.Manifest, w io.Writer) error {
		st, err := p.Publish(ctx, m)
		if format == "json" {
			if jerr := writeJSON(w, struct {
				ManifestVersion uint64                `json:"manifest_version"`
				Tables          []catalog.TableStatus `json:"tables"`
			}{m.Version, st.Tables}); jerr != nil {
				return jerr
			}
		} else {
			writeCatalogTables(w, m.Version, st.Tables, false)
		}
		if err != nil {
			return fmt.Errorf("catalog sync: %w", err)
		}
		return nil
	})
	return cmd
}

func newCatalogStatusCmd(app *cli) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Compare the published Iceberg tables with the manifest (drift), with each table's metadata location",
		Long: `For every captured table: its Iceberg table, the manifest version it was last
published at, its files, what a sync would still add or remove (drift), and
the current metadata location (for readers that take a path, such as
DuckDB's iceberg_scan or icebird). Exit 0 whether or not there is drift;
--format json for scripts.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&format, "format", "text", "output: text or json")
	cmd.RunE = app.onCatalog(&format, func(ctx context.Context, p *catalog.Publisher, m *manifest.Manifest, w io.Writer) error {
		tables, err := p.Inspect(ctx, m)
		if format == "json" {
			if jerr := writeJSON(w, struct {
				ManifestVersion uint64                `json:"manifest_version"`
				Tables          []catalog.TableStatus `json:"tables"`
			}{m.Version, tables}); jerr != nil {
				return jerr
			}
		} else {
			writeCatalogTables(w, m.Version, tables, true)
		}
		if err != nil {
			return fmt.Errorf("catalog status: %w", err)
		}
		return nil
	})
	return cmd
}

// writeCatalogTables prints one line per Iceberg table.
func writeCatalogTables(w io.Writer, version uint64, tables []catalog.TableStatus, drift bool) {
	tw := newTabWriter(w)
	if drift {
		fmt.Fprintln(tw, "TABLE\tICEBERG\tPUBLISHED\tFILES\tDRIFT\tMETADATA")
	} else {
		fmt.Fprintln(tw, "TABLE\tICEBERG\tPUBLISHED\tFILES\tADDED\tREMOVED")
	}
	for _, t := range tables {
		if t.Err != "" {
			fmt.Fprintf(tw, "%s\t%s\terror: %s\n", t.Table, t.Iceberg, t.Err)
			continue
		}
		if !drift {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", t.Table, t.Iceberg, t.Version, t.Files, t.Added, t.Removed)
			continue
		}
		d := "in sync"
		switch {
		case t.Drift == nil:
		case t.Drift.Missing:
			d = "not created yet"
		case !t.Drift.InSync():
			d = fmt.Sprintf("+%d -%d files", t.Drift.Add, t.Drift.Remove)
			if t.Drift.Schema {
				d += ", schema"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", t.Table, t.Iceberg, t.Version, t.Files, d, t.Metadata)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nmanifest version %d\n", version)
}

// publishAfterInit publishes the sink's first version when a catalog is
// configured (pg-cdc catalog sync after init). A failure is a warning: the
// capture is made, and start publishes at its first version.
func publishAfterInit(ctx context.Context, cfg config.Config, m *manifest.Manifest, log *slog.Logger) {
	p, closeCat, err := openPublisher(cfg, log)
	if err == nil && p != nil {
		defer closeCat()
		_, err = p.Publish(ctx, m)
	}
	if err != nil {
		log.Warn("publishing to the catalog after init failed; pg-cdc start publishes again (or run pg-cdc catalog sync)", "err", err)
	}
}
