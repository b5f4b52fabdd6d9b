package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/snapshot"
)

// firstGeneration names every table's first lineage of files (DESIGN §8).
const firstGeneration = "g0001"

func newInitCmd(configPath *string) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Check the source, create the publication and slot, and take the initial snapshot",
		Args:  cobra.NoArgs,
		RunE:  withSignals(configPath, runInit),
	}
}

func runInit(ctx context.Context, cfg config.Config, log *slog.Logger, cmd *cobra.Command) error {
	out := cmd.OutOrStdout()
	store, err := openSink(ctx, cfg)
	if err != nil {
		return err
	}
	release, err := lockSink(ctx, store, "init")
	if err != nil {
		return err
	}
	defer release()
	if err := probeSink(ctx, store, cfg, log); err != nil {
		return err
	}

	spec, err := sourceConn(ctx, cfg)
	if err != nil {
		return err
	}
	db, err := postgres.Connect(ctx, spec)
	if err != nil {
		return err
	}
	defer db.Close()
	ident, err := db.Identity(ctx)
	if err != nil {
		return err
	}

	// A completed init is reported, never redone.
	m, _, err := manifest.Load(ctx, store)
	switch {
	case err == nil:
		if err := checkIdentity(m, ident); err != nil {
			return err
		}
		fmt.Fprintf(out, "already initialized: %d tables, epoch %d, end LSN %s (manifest %s in %s); nothing changed\n",
			len(m.Tables), m.Epoch, m.EndLSN, manifest.Key, sinkName(cfg))
		return nil
	case !errors.Is(err, cdc.ErrNotInitialized):
		return err
	}

	if err := db.Preflight(ctx, postgres.PreflightTarget{Provider: postgres.Provider(cfg.Source.Postgres.Provider),
		Publication: cfg.Replication.Publication, Slot: cfg.Replication.Slot}); err != nil {
		return err
	}
	include, err := cfg.IncludeIDs()
	if err != nil {
		return usageError{err}
	}
	tables, err := db.DiscoverTables(ctx, cfg.Source.Postgres.Schemas, include, cfg.Tables.Exclude)
	if err != nil {
		return err
	}
	if len(tables) == 0 {
		return usageError{fmt.Errorf("no tables to capture in schemas %v (check tables.include and tables.exclude)", cfg.Source.Postgres.Schemas)}
	}
	if err := applyTypeOverrides(tables, cfg.Types); err != nil {
		return usageError{err}
	}
	warnings, err := postgres.CheckTables(tables)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		log.Warn(w)
	}

	ids := make([]cdc.TableID, len(tables))
	for i, t := range tables {
		ids[i] = t.ID
	}
	// The publication exists before the slot, so the slot's stream covers
	// every captured table from its first change.
	if err := db.EnsurePublication(ctx, cfg.Replication.Publication, ids); err != nil {
		return err
	}
	slot, err := db.Slot(ctx, cfg.Replication.Slot)
	if err != nil {
		return err
	}
	if slot.Exists {
		// No manifest refers to this slot, so nothing depends on it: it is
		// left over from an init that did not finish.
		if slot.Active {
			return fmt.Errorf("replication slot %q exists and is in use by PID %d, but there is no manifest in %s; stop that consumer or choose another slot name", cfg.Replication.Slot, slot.ActivePID, sinkName(cfg))
		}
		log.Warn("dropping a replication slot left by an unfinished init", "slot", cfg.Replication.Slot)
		if err := db.DropSlot(ctx, cfg.Replication.Slot); err != nil {
			return err
		}
	}

	repl, err := postgres.ConnectReplication(ctx, spec)
	if err != nil {
		return err
	}
	// The exported snapshot lives until the next command on this
	// connection: it stays idle until every COPY has imported it.
	defer repl.Close(context.WithoutCancel(ctx))
	lsn, snapName, err := repl.CreateSlot(ctx, cfg.Replication.Slot)
	if err != nil {
		return err
	}
	snapTime := time.Now().UTC()
	log.Info("created replication slot", "slot", cfg.Replication.Slot, "lsn", lsn, "snapshot", snapName, "tables", len(tables))

	bases, err := snapshot.Run(ctx, db, store, tables, snapshot.Options{
		Snapshot: snapName, LSN: lsn, Time: snapTime, Workers: cfg.Init.ParallelWorkers,
		Generation: firstGeneration, SpoolDir: filepath.Join(cfg.State.Path, "spool"), PartRows: snapshotPartRows,
		Encoders: min(2, runtime.GOMAXPROCS(0)),
	}, log)
	if err != nil {
		return err
	}

	m = &manifest.Manifest{
		Source: manifest.Source{
			SystemIdentifier: ident.SystemIdentifier, Timeline: ident.Timeline, Database: ident.Database,
			Slot: cfg.Replication.Slot, Publication: cfg.Replication.Publication,
		},
		Epoch:   0,
		EndLSN:  lsn,
		Tables:  map[string]*manifest.Table{},
		History: []manifest.EpochRecord{{Epoch: 0, EndLSN: lsn, MaxCommitTime: snapTime, FlushedAt: time.Now().UTC()}},
	}
	for _, t := range tables {
		mt, err := manifestTable(t, bases[t.ID.String()], lsn)
		if err != nil {
			return err
		}
		m.Tables[t.ID.String()] = mt
	}
	if _, err := manifest.Create(ctx, store, m, time.Now()); err != nil {
		return err
	}
	var rows int64
	for _, b := range bases {
		rows += b.RowCount
	}
	fmt.Fprintf(out, "initialized: %d tables, %d rows snapshotted at LSN %s into %s; run 'pg-cdc start' to stream\n",
		len(tables), rows, lsn, sinkName(cfg))
	return nil
}

// snapshotPartRows bounds a base file's size for big tables.
const snapshotPartRows = 4_000_000

func manifestTable(t *cdc.Table, base *manifest.Base, lsn cdc.LSN) (*manifest.Table, error) {
	schema, err := parquetfile.NewSchema(t)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.ID, err)
	}
	cols := schema.ManifestColumns(t)
	pk := t.PrimaryKey
	if pk == nil {
		pk = []string{}
	}
	return &manifest.Table{
		Schema: t.ID.Schema, Name: t.ID.Name, OID: t.OID, Generation: firstGeneration,
		PrimaryKey: pk, ReplicaIdentity: string(t.ReplicaIdentity),
		SchemaVersion: 1,
		Schemas:       []manifest.SchemaVersion{{Version: 1, FromEpoch: 0, Columns: cols}},
		Snapshot:      manifest.Snapshot{State: manifest.SnapshotComplete, LSN: lsn},
		Base:          base,
		Deltas:        []manifest.Delta{},
	}, nil
}

// checkIdentity refuses a database that is not the one the manifest was
// built from (DESIGN §1).
func checkIdentity(m *manifest.Manifest, id postgres.Identity) error {
	src := m.Source
	if src.SystemIdentifier != id.SystemIdentifier || src.Database != id.Database || src.Timeline != id.Timeline {
		return &cdc.Error{
			Class: cdc.ErrUpstreamMismatch,
			Msg: fmt.Sprintf("the source is system %s timeline %d database %q, the manifest was built from system %s timeline %d database %q",
				id.SystemIdentifier, id.Timeline, id.Database, src.SystemIdentifier, src.Timeline, src.Database),
			Hint: "point source.postgres.url at the original database, or use a new storage path for this one",
		}
	}
	return nil
}

// applyTypeOverrides sets the representation the config's types: section
// chooses on each named column. The snapshot and the manifest (from which
// the stream rebuilds its schemas) both take it from the column, so every
// file of the table has the same types. A key that names no captured
// column is an error: a typo would otherwise be silently ignored.
func applyTypeOverrides(tables []*cdc.Table, types map[string]string) error {
	var missing []string
	for _, ref := range slices.Sorted(maps.Keys(types)) {
		schema, table, column, err := config.ParseColumnRef(ref)
		if err != nil {
			return fmt.Errorf("types: %w", err)
		}
		found := false
		for _, t := range tables {
			if t.ID.Schema != schema || t.ID.Name != table {
				continue
			}
			if i := t.ColumnIndex(column); i >= 0 {
				t.Columns[i].Repr = types[ref]
				found = true
			}
		}
		if !found {
			missing = append(missing, ref)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("types: %s names no captured column (check the schema, table and column names, and tables.include/exclude)", strings.Join(missing, ", "))
	}
	return nil
}
