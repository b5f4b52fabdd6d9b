package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/failpoint"
	"github.com/pg-cdc/pg-cdc/internal/generation"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/snapshot"
)

// rebuildCommand is what the hints of the slot checks tell the operator to
// run.
const rebuildCommand = "pg-cdc rebuild"

// rebuildSamples is how many rows per table rebuild compares value by value
// with the source before it switches.
const rebuildSamples = 16

func newRebuildCmd(configPath *string) *cobra.Command {
	var acceptNewUpstream bool
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Load every table into a new generation from a new slot, validate it, and switch to it",
		Long: `rebuild recovers from a lost slot (dropped, invalidated, or confirmed past
the manifest: exit codes 10 and 11), or rebuilds on request (DESIGN §8).

It holds the sink's writer lock, so no 'pg-cdc start' runs meanwhile (and it
refuses while one does, or while the slot is in use). It drops the slot
named by replication.slot and creates it again with an exported snapshot,
copies every table under that snapshot into the next generation's prefix
(beside the current files), reads the new files back and compares them with
the source (row counts, and sampled rows value by value), then switches
every table to the new generation with one conditional manifest write:
readers see the old generation, whole, until that write, and the new one,
whole, after it. The old generation's files become garbage, deleted by
compaction's gc after gc.grace_period.

The new generation holds the source as of the new slot's consistent point;
'pg-cdc start' streams from there (it catches up).

A source whose system identifier, timeline or database differs from the
manifest's (exit 12) is rebuilt only with --accept-new-upstream.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&acceptNewUpstream, "accept-new-upstream", false,
		"rebuild from a source whose system identifier, timeline or database differs from the manifest's, and record it as the upstream")
	cmd.RunE = withSignals(configPath, func(ctx context.Context, cfg config.Config, log *slog.Logger, cmd *cobra.Command) error {
		return runRebuild(ctx, cfg, log, cmd, acceptNewUpstream)
	})
	return cmd
}

// rebuildTable is one table of a rebuild: the source's description, the
// manifest entry it replaces (nil for a table new to the manifest), and the
// new base.
type rebuildTable struct {
	source *cdc.Table
	prev   *manifest.Table
	base   *manifest.Base
	check  generation.Check
}

func runRebuild(ctx context.Context, cfg config.Config, log *slog.Logger, cmd *cobra.Command, acceptNewUpstream bool) error {
	started := time.Now()
	out := cmd.OutOrStdout()
	store, err := openSink(ctx, cfg)
	if err != nil {
		return err
	}
	release, err := lockSink(ctx, store, "rebuild")
	if err != nil {
		return err
	}
	defer release()
	if err := probeSink(ctx, store, cfg, log); err != nil {
		return err
	}
	committer, err := manifest.Open(ctx, store, manifest.Breaker{
		Threshold: cfg.Flush.CASBreakerThreshold,
		Window:    cfg.Flush.CASBreakerWindow,
	})
	if err != nil {
		return notInitialized(err, cfg)
	}
	m := committer.Current()
	if err := checkOwner(m, cfg); err != nil {
		return err
	}

	spec, db, ident, err := openSource(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	newUpstream := false
	if err := checkIdentity(m, ident); err != nil {
		if !acceptNewUpstream {
			var ce *cdc.Error
			if errors.As(err, &ce) {
				ce.Hint = "if this database is meant to replace the one the manifest was built from, run 'pg-cdc rebuild --accept-new-upstream'; otherwise point source.postgres.url at the original database"
			}
			return err
		}
		newUpstream = true
		log.Warn("rebuilding from another upstream than the manifest's, as --accept-new-upstream asks",
			"system_identifier", ident.SystemIdentifier, "timeline", ident.Timeline, "database", ident.Database,
			"manifest_system_identifier", m.Source.SystemIdentifier, "manifest_timeline", m.Source.Timeline, "manifest_database", m.Source.Database)
	}

	slotName := cfg.Replication.Slot
	slot, err := db.Slot(ctx, slotName)
	if err != nil {
		return err
	}
	if slot.Active {
		// Dropping it would fail anyway; say why first.
		return &cdc.Error{Class: cdc.ErrSinkLocked,
			Msg:  fmt.Sprintf("replication slot %q is in use by PID %d", slotName, slot.ActivePID),
			Hint: "a 'pg-cdc start' (or another consumer) is streaming from it: stop it, then run 'pg-cdc rebuild' again"}
	}
	reason := slotState(slot, m)

	tables, err := rebuildTables(ctx, db, cfg, m, log)
	if err != nil {
		return err
	}
	gen, err := rebuildGeneration(m)
	if err != nil {
		return err
	}
	ids := make([]cdc.TableID, len(tables))
	for i, t := range tables {
		ids[i] = t.source.ID
		generation.CarryFieldIDs(t.prev, t.source, !newUpstream)
	}
	// The publication exists before the slot, so the new slot's stream
	// covers every table from its first change.
	if err := db.EnsurePublication(ctx, cfg.Replication.Publication, ids); err != nil {
		return err
	}
	if slot.Exists {
		// PostgreSQL refuses to drop a slot a process acquired since the
		// check above, so a consumer that just started is never cut off.
		log.Warn("dropping the replication slot to create it again", "slot", slotName, "state", reason)
		if err := db.DropSlot(ctx, slotName); err != nil {
			return err
		}
	}
	repl, err := postgres.ConnectReplication(ctx, spec)
	if err != nil {
		return err
	}
	// The exported snapshot lives until the next command on this
	// connection: it stays idle until every COPY and the validation have
	// imported it.
	defer repl.Close(context.WithoutCancel(ctx))
	lsn, snapName, err := repl.CreateSlot(ctx, slotName)
	if err != nil {
		return err
	}
	snapTime := time.Now().UTC()
	log.Info("created replication slot for a rebuild", "slot", slotName, "lsn", lsn, "snapshot", snapName,
		"generation", gen, "tables", len(tables))
	failpoint.Inject("rebuild/after-slot")

	sources := make([]*cdc.Table, len(tables))
	for i, t := range tables {
		sources[i] = t.source
	}
	bases, err := snapshot.Run(ctx, db, store, sources, snapshot.Options{
		Snapshot: snapName, LSN: lsn, Time: snapTime, Workers: cfg.Init.ParallelWorkers,
		Generation: gen, SpoolDir: filepath.Join(cfg.State.Path, "spool"), PartRows: snapshotPartRows,
		Encoders: min(2, runtime.GOMAXPROCS(0)),
	}, log)
	if err != nil {
		return err
	}
	// Copied, not validated yet (a test truncates a table here).
	failpoint.Inject("rebuild/after-copy")
	for _, t := range tables {
		t.base = bases[t.source.ID.String()]
		if t.base == nil {
			return fmt.Errorf("rebuild: the snapshot returned no base for table %s", t.source.ID)
		}
		t.check, err = generation.Validate(ctx, db, store, t.source, t.base, snapName, rebuildSamples,
			filepath.Join(cfg.State.Path, "rebuild"))
		if err != nil {
			return err
		}
		if t.check.Rewritten {
			log.Warn("the table was truncated or rewritten after the snapshot: its new files were read back and counted, but the source can no longer show what the snapshot held, so it was not compared; start applies that change from the stream",
				"table", t.source.ID.String(), "generation", gen, "rows", t.check.Rows, "files", t.check.Files)
			continue
		}
		log.Info("validated the new generation", "table", t.source.ID.String(), "generation", gen,
			"rows", t.check.Rows, "files", t.check.Files, "sampled", t.check.Sampled)
	}
	// Everything is loaded and checked; readers still see the old
	// generation (the e2e tests pause here to look).
	failpoint.Inject("rebuild/before-switch")

	now := time.Now()
	sw := rebuildSwitch{generation: gen, lsn: lsn, snapTime: snapTime, now: now, tables: tables,
		source: manifest.Source{
			SystemIdentifier: ident.SystemIdentifier, Timeline: ident.Timeline, Database: ident.Database,
			Slot: slotName, Publication: cfg.Replication.Publication,
		}}
	switched, err := committer.Commit(ctx, sw.apply)
	if err != nil {
		return fmt.Errorf("rebuild: switch to generation %s: %w", gen, err)
	}
	log.Info("switched to the new generation", "generation", gen, "epoch", switched.Epoch, "lsn", lsn, "slot", slotName)
	rec := generation.Record{Generation: gen, Command: "rebuild", Reason: "slot " + reason, SwitchedAt: now.UTC(),
		Epoch: switched.Epoch, ConsistentPoint: lsn, Source: switched.Source, Previous: map[string]string{}, Tables: map[string]generation.RecordTable{}}
	for _, t := range tables {
		key := t.source.ID.String()
		if t.prev != nil {
			rec.Previous[key] = t.prev.Generation
		}
		rec.Tables[key] = generation.RecordTable{Rows: t.check.Rows, Files: t.check.Files, Sampled: t.check.Sampled, Rewritten: t.check.Rewritten}
	}
	// The switch is done and the manifest is the truth: a record that
	// cannot be written is reported, not a failed rebuild.
	if err := generation.WriteRecord(ctx, store, rec); err != nil {
		log.Warn("the generation record was not written; the rebuild itself is complete", "generation", gen, "err", err)
	}

	var rows, sampled int64
	var files int
	var uncompared []string
	for _, t := range tables {
		rows += t.check.Rows
		files += t.check.Files
		sampled += int64(t.check.Sampled)
		if t.check.Rewritten {
			uncompared = append(uncompared, t.source.ID.String())
		}
	}
	fmt.Fprintf(out, "rebuilt: slot %q was %s; %d tables, %d rows in %d files copied at LSN %s into generation %s and validated (row counts, %d rows compared with the source); manifest epoch %d; %d files of the previous generations wait for gc (gc.grace_period %s); took %s\n",
		slotName, reason, len(tables), rows, files, lsn, gen, sampled, switched.Epoch, retiredSince(switched, now), cfg.GC.GracePeriod, time.Since(started).Round(time.Millisecond))
	if len(uncompared) > 0 {
		fmt.Fprintf(out, "not compared with the source (truncated or rewritten after the snapshot; the stream applies it): %s\n", strings.Join(uncompared, ", "))
	}
	if newUpstream {
		fmt.Fprintf(out, "the manifest's upstream is now system %s timeline %d database %q\n", ident.SystemIdentifier, ident.Timeline, ident.Database)
	}
	fmt.Fprintln(out, "run 'pg-cdc start' to stream from the new slot")
	return nil
}

// rebuildSwitch is the one manifest write of a rebuild.
type rebuildSwitch struct {
	generation string
	lsn        cdc.LSN // the new slot's consistent point
	snapTime   time.Time
	now        time.Time
	source     manifest.Source
	tables     []*rebuildTable
}

// apply switches every table of m to the new generation: the epoch plus
// one (with its history record), the end LSN at the consistent point, the
// source as found, and the files of the old generations (and of a
// re-snapshot under way) retired. It reads each table's entry from m, the
// manifest as the commit found it: a compaction may have replaced a base
// since the rebuild began, and its files are retired all the same.
func (sw rebuildSwitch) apply(m *manifest.Manifest) error {
	m.Epoch++
	m.EndLSN = sw.lsn
	m.Source = sw.source
	for _, t := range sw.tables {
		prev := m.Tables[t.source.ID.String()]
		nt, err := generation.Table(prev, t.source, sw.generation, t.base, sw.lsn, m.Epoch)
		if err != nil {
			return fmt.Errorf("rebuild table %s: %w", t.source.ID, err)
		}
		if prev != nil && prev.Resnapshot != nil {
			// The rebuild supersedes a re-snapshot under way.
			for _, d := range prev.Resnapshot.Deltas {
				m.Retire(d.Files, sw.now)
			}
		}
		if err := m.SwitchGeneration(nt, sw.now); err != nil {
			return err
		}
	}
	m.AppendHistory(manifest.EpochRecord{Epoch: m.Epoch, EndLSN: sw.lsn, MaxCommitTime: sw.snapTime, FlushedAt: sw.now.UTC()})
	return nil
}

// slotState describes the slot rebuild replaces, for the log and summary.
func slotState(slot postgres.SlotInfo, m *manifest.Manifest) string {
	switch {
	case !slot.Exists:
		return "missing"
	case slot.WALStatus == "lost":
		return "invalidated (wal_status lost)"
	case slot.ConfirmedFlushLSN > m.EndLSN:
		return fmt.Sprintf("confirmed at %s, past the manifest's end LSN %s", slot.ConfirmedFlushLSN, m.EndLSN)
	default:
		return "healthy (rebuilt on request)"
	}
}

// rebuildTables discovers the tables the configuration captures, as init
// does, and pairs each with its manifest entry. A table of the manifest
// that the source no longer has (or the configuration no longer captures)
// is refused rather than dropped from the sink: removing a table's data is
// not rebuild's decision.
func rebuildTables(ctx context.Context, db *postgres.DB, cfg config.Config, m *manifest.Manifest, log *slog.Logger) ([]*rebuildTable, error) {
	found, err := capturedTables(ctx, db, cfg, nil, log)
	if err != nil {
		return nil, err
	}
	var tables []*rebuildTable
	seen := map[string]bool{}
	for _, t := range found {
		tables = append(tables, &rebuildTable{source: t, prev: m.Tables[t.ID.String()]})
		seen[t.ID.String()] = true
	}
	var missing []string
	for key := range m.Tables {
		if !seen[key] {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, usageError{fmt.Errorf("the manifest holds %s, which the source does not have or the configuration does not capture; rebuild would leave them behind (restore them, or keep their data with 'pg-cdc dump' and use a new storage path)",
			strings.Join(missing, ", "))}
	}
	if len(tables) == 0 {
		return nil, usageError{fmt.Errorf("no tables to capture in schemas %v (check tables.include and tables.exclude)", cfg.Source.Postgres.Schemas)}
	}
	return tables, nil
}

// rebuildGeneration is the generation every table moves to: the one after
// the newest any table has or is building (a re-snapshot under way), so
// that all tables share it after a rebuild and no file of another lineage
// shares its prefix.
func rebuildGeneration(m *manifest.Manifest) (string, error) {
	newest := manifest.FirstGeneration
	for key, t := range m.Tables {
		gens := []string{t.Generation}
		if t.Resnapshot != nil {
			gens = append(gens, t.Resnapshot.Generation)
		}
		for _, g := range gens {
			if _, err := manifest.NextGeneration(g); err != nil {
				return "", fmt.Errorf("table %s: %w", key, err)
			}
			if manifest.GenerationAfter(g, newest) {
				newest = g
			}
		}
	}
	return manifest.NextGeneration(newest)
}

// retiredSince counts the garbage entries retired at now: the files the
// switch retired.
func retiredSince(m *manifest.Manifest, now time.Time) int {
	n := 0
	for _, g := range m.Garbage {
		if g.RetiredAt.Equal(now.UTC()) {
			n++
		}
	}
	return n
}
