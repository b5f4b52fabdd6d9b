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
	"golang.org/x/sync/errgroup"

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

	spec, db, ident, err := openSource(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()

	// A completed init is reported, never redone; an interrupted one is
	// reported with what is left, which start completes.
	m, _, err := manifest.Load(ctx, store)
	switch {
	case err == nil:
		if err := checkIdentity(m, ident); err != nil {
			return err
		}
		if len(unfinishedTables(m)) > 0 {
			return resumeInit(ctx, out, db, store, m, cfg, log)
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
	tables, err := capturedTables(ctx, db, cfg, nil, log)
	if err != nil {
		return err
	}
	if len(tables) == 0 {
		return usageError{fmt.Errorf("no tables to capture in schemas %v (check tables.include and tables.exclude)", cfg.Source.Postgres.Schemas)}
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

	// The manifest comes first, with every table pending: from here on it
	// refers to the slot, so a rerun keeps the slot, and each table's base is
	// committed the moment it is copied (DESIGN §5, "Interrupted initial
	// snapshot"). Its end LSN is the consistent point, where start streams
	// from whatever the snapshot finished.
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
		mt, err := pendingTable(ctx, db, t, snapTime)
		if err != nil {
			return err
		}
		m.Tables[t.ID.String()] = mt
	}
	committer, err := manifest.Create(ctx, store, m, time.Now())
	if err != nil {
		return err
	}
	rec := snapshot.NewRecorder(committer, lsn)
	progress := &snapshot.Progress{}
	var bases map[string]*manifest.Base
	g, gctx := errgroup.WithContext(ctx)
	watchCtx, stopWatch := context.WithCancel(gctx)
	g.Go(func() error { return rec.Watch(watchCtx, progress, initProgressInterval) })
	g.Go(func() error {
		defer stopWatch()
		var err error
		bases, err = snapshot.Run(gctx, db, store, tables, snapshot.Options{
			Snapshot: snapName, LSN: lsn, Time: snapTime, Workers: cfg.Init.ParallelWorkers,
			Generation: firstGeneration, SpoolDir: filepath.Join(cfg.State.Path, "spool"), PartRows: snapshotPartRows,
			Encoders: min(2, runtime.GOMAXPROCS(0)),
			Done:     rec.TableDone, Progress: progress,
		}, log)
		return err
	})
	if err := g.Wait(); err != nil {
		done := len(m.Tables) - len(unfinishedTables(committer.Current()))
		return fmt.Errorf("initial snapshot stopped with %d of %d tables complete, which the manifest keeps (run 'pg-cdc init' again to see what is left, then 'pg-cdc start' to complete it): %w",
			done, len(m.Tables), err)
	}
	var rows int64
	for _, b := range bases {
		rows += b.RowCount
	}
	fmt.Fprintf(out, "initialized: %d tables, %d rows snapshotted at LSN %s into %s; run 'pg-cdc start' to stream\n",
		len(tables), rows, lsn, sinkName(cfg))
	return nil
}

// initProgressInterval is how often init commits the rows copied so far of
// the tables it is copying, for status.
const initProgressInterval = 5 * time.Second

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

// pendingTable is t as init first records it: its schema, snapshot pending
// with the planner's row estimate, no base.
func pendingTable(ctx context.Context, db *postgres.DB, t *cdc.Table, started time.Time) (*manifest.Table, error) {
	mt, err := manifestTable(t, nil, 0)
	if err != nil {
		return nil, err
	}
	estimate, err := db.EstimateRows(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	mt.Snapshot = manifest.Snapshot{State: manifest.SnapshotPending, RowsEstimate: estimate, StartedAt: &started}
	return mt, nil
}

// unfinishedTables lists, sorted, the tables whose snapshot is not complete.
func unfinishedTables(m *manifest.Manifest) []string {
	var out []string
	for key, t := range m.Tables {
		if !t.Snapshot.Complete() {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
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
