package capture

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/failpoint"
	"github.com/pg-cdc/pg-cdc/internal/generation"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/snapshot"
)

// rebuildSamples is how many rows per table rebuild compares value by value
// with the source before it switches.
const rebuildSamples = 16

// RebuildOptions tune Rebuild.
type RebuildOptions struct {
	// AcceptNewUpstream rebuilds from a source whose identity differs from
	// the manifest's, and records it as the upstream.
	AcceptNewUpstream bool
	// BreakerThreshold conflicts with another streamer within
	// BreakerWindow stop the switch (exit 13).
	BreakerThreshold int
	BreakerWindow    time.Duration
}

// RebuildResult is what Rebuild did, for the operator.
type RebuildResult struct {
	Slot, SlotWas string // the slot and what it was ("missing", ...)
	Generation    string
	LSN           cdc.LSN // the new slot's consistent point
	Epoch         uint64  // the switch's epoch
	Tables, Files int
	Rows, Sampled int64
	Retired       int      // files of the previous generations now garbage
	Uncompared    []string // tables rewritten after the snapshot: counted, not compared
	NewUpstream   *postgres.Identity
	Took          time.Duration
}

// rebuildTable is one table of a rebuild: the source's description, the
// manifest entry it replaces (nil for a table new to the manifest), and the
// new base with its check.
type rebuildTable struct {
	source *cdc.Table
	prev   *manifest.Table
	base   *manifest.Base
	check  generation.Check
}

// Rebuild recovers from a lost slot, or rebuilds on request (design.md
// §8.5): with the sink's writer lock held, it drops the slot and creates
// it again with an exported snapshot, copies every table into the next
// generation beside the current files, validates them against the source,
// and switches every table in one manifest write. Readers see the old
// generation, whole, until that write, and the new one after it.
func (c *Capture) Rebuild(ctx context.Context, opts RebuildOptions) (*RebuildResult, error) {
	started := time.Now()
	release, err := c.LockSink(ctx, "rebuild")
	if err != nil {
		return nil, err
	}
	defer release()
	if err := c.ProbeSink(ctx); err != nil {
		return nil, err
	}
	committer, err := manifest.Open(ctx, c.Sink, manifest.Breaker{Threshold: opts.BreakerThreshold, Window: opts.BreakerWindow})
	if err != nil {
		return nil, c.NotInitialized(err)
	}
	committer.SetLogger(c.Log)
	m := committer.Current()
	if err := c.CheckOwner(m); err != nil {
		return nil, err
	}
	db, ident, err := c.openSource(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	res := &RebuildResult{Slot: c.Slot}
	if err := c.rebuildUpstream(m, ident, opts.AcceptNewUpstream); err != nil {
		return nil, err
	} else if opts.AcceptNewUpstream && CheckIdentity(m, ident) != nil {
		res.NewUpstream = &ident
	}
	tables, gen, err := c.planRebuild(ctx, db, m, res)
	if err != nil {
		return nil, err
	}
	lsn, snapTime, err := c.copyGeneration(ctx, db, tables, gen)
	if err != nil {
		return nil, err
	}
	// Everything is loaded and checked; readers still see the old
	// generation (the e2e tests pause here to look).
	failpoint.Inject("rebuild/before-switch")
	if err := c.switchGeneration(ctx, committer, tables, gen, lsn, snapTime, ident, res); err != nil {
		return nil, err
	}
	res.Took = time.Since(started)
	return res, nil
}

// rebuildUpstream refuses a source that is not the manifest's upstream
// unless accept says to take it.
func (c *Capture) rebuildUpstream(m *manifest.Manifest, ident postgres.Identity, accept bool) error {
	err := CheckIdentity(m, ident)
	if err == nil {
		return nil
	}
	if !accept {
		var ce *cdc.Error
		if errors.As(err, &ce) {
			ce.Hint = "if this database is meant to replace the one the manifest was built from, run 'pg-cdc rebuild --accept-new-upstream'; otherwise point source.postgres.url at the original database"
		}
		return err
	}
	c.Log.Warn("rebuilding from another upstream than the manifest's, as --accept-new-upstream asks",
		"system_identifier", ident.SystemIdentifier, "timeline", ident.Timeline, "database", ident.Database,
		"manifest_system_identifier", m.Source.SystemIdentifier, "manifest_timeline", m.Source.Timeline, "manifest_database", m.Source.Database)
	return nil
}

// planRebuild checks the slot is not in use, pairs the captured tables
// with their manifest entries (field ids carried over), picks the
// generation, makes the publication cover them and drops the old slot.
func (c *Capture) planRebuild(ctx context.Context, db *postgres.DB, m *manifest.Manifest, res *RebuildResult) ([]*rebuildTable, string, error) {
	slot, err := db.Slot(ctx, c.Slot)
	if err != nil {
		return nil, "", err
	}
	if slot.Active {
		// Dropping it would fail anyway; say why first.
		return nil, "", &cdc.Error{Class: cdc.ErrSinkLocked,
			Msg:  fmt.Sprintf("replication slot %q is in use by PID %d", c.Slot, slot.ActivePID),
			Hint: "a 'pg-cdc start' (or another consumer) is streaming from it: stop it, then run 'pg-cdc rebuild' again"}
	}
	res.SlotWas = SlotState(slot, m)
	tables, err := c.rebuildTables(ctx, db, m)
	if err != nil {
		return nil, "", err
	}
	gen, err := RebuildGeneration(m)
	if err != nil {
		return nil, "", err
	}
	ids := make([]cdc.TableID, len(tables))
	for i, t := range tables {
		ids[i] = t.source.ID
		generation.CarryFieldIDs(t.prev, t.source, res.NewUpstream == nil)
	}
	// The publication exists before the slot, so the new slot's stream
	// covers every table from its first change.
	if err := db.EnsurePublication(ctx, c.Publication, ids); err != nil {
		return nil, "", err
	}
	if slot.Exists {
		// PostgreSQL refuses to drop a slot a process acquired since the
		// check above, so a consumer that just started is never cut off.
		c.Log.Warn("dropping the replication slot to create it again", "slot", c.Slot, "state", res.SlotWas)
		if err := db.DropSlot(ctx, c.Slot); err != nil {
			return nil, "", err
		}
	}
	return tables, gen, nil
}

// copyGeneration creates the slot with an exported snapshot, copies every
// table under it into generation gen and validates each against the
// source, returning the consistent point and the snapshot's time.
func (c *Capture) copyGeneration(ctx context.Context, db *postgres.DB, tables []*rebuildTable, gen string) (cdc.LSN, time.Time, error) {
	repl, err := postgres.ConnectReplication(ctx, c.Source)
	if err != nil {
		return 0, time.Time{}, err
	}
	// The exported snapshot lives until the next command on this
	// connection: it stays idle until every COPY and the validation have
	// imported it.
	defer repl.Close(context.WithoutCancel(ctx))
	lsn, snapName, err := repl.CreateSlot(ctx, c.Slot)
	if err != nil {
		return 0, time.Time{}, err
	}
	snapTime := time.Now().UTC()
	c.Log.Info("created replication slot for a rebuild", "slot", c.Slot, "lsn", lsn, "snapshot", snapName,
		"generation", gen, "tables", len(tables))
	failpoint.Inject("rebuild/after-slot")
	sources := make([]*cdc.Table, len(tables))
	for i, t := range tables {
		sources[i] = t.source
	}
	bases, err := snapshot.Run(ctx, db, c.Sink, sources, c.snapshotOptions(snapName, lsn, snapTime, gen, nil, nil), c.Log)
	if err != nil {
		return 0, time.Time{}, err
	}
	// Copied, not validated yet (a test truncates a table here).
	failpoint.Inject("rebuild/after-copy")
	for _, t := range tables {
		if t.base = bases[t.source.ID.String()]; t.base == nil {
			return 0, time.Time{}, fmt.Errorf("rebuild: the snapshot returned no base for table %s", t.source.ID)
		}
		if t.check, err = generation.Validate(ctx, db, c.Sink, t.source, t.base, snapName, rebuildSamples, filepath.Join(c.StateDir, "rebuild")); err != nil {
			return 0, time.Time{}, err
		}
		c.logCheck(t, gen)
	}
	return lsn, snapTime, nil
}

func (c *Capture) logCheck(t *rebuildTable, gen string) {
	if t.check.Rewritten {
		c.Log.Warn("the table was truncated or rewritten after the snapshot: its new files were read back and counted, but the source can no longer show what the snapshot held, so it was not compared; start applies that change from the stream",
			"table", t.source.ID.String(), "generation", gen, "rows", t.check.Rows, "files", t.check.Files)
		return
	}
	c.Log.Info("validated the new generation", "table", t.source.ID.String(), "generation", gen,
		"rows", t.check.Rows, "files", t.check.Files, "sampled", t.check.Sampled)
}

// switchGeneration writes the one manifest write of a rebuild and the
// generation's record, and fills in res.
func (c *Capture) switchGeneration(ctx context.Context, committer *manifest.Committer, tables []*rebuildTable, gen string, lsn cdc.LSN, snapTime time.Time, ident postgres.Identity, res *RebuildResult) error {
	now := time.Now()
	sw := rebuildSwitch{generation: gen, lsn: lsn, snapTime: snapTime, now: now, tables: tables,
		source: manifest.Source{
			SystemIdentifier: ident.SystemIdentifier, Timeline: ident.Timeline, Database: ident.Database,
			Slot: c.Slot, Publication: c.Publication,
		}}
	switched, err := committer.Commit(ctx, sw.apply)
	if err != nil {
		return fmt.Errorf("rebuild: switch to generation %s: %w", gen, err)
	}
	c.Log.Info("switched to the new generation", "generation", gen, "epoch", switched.Epoch, "lsn", lsn, "slot", c.Slot)
	rec := generation.Record{Generation: gen, Command: "rebuild", Reason: "slot " + res.SlotWas, SwitchedAt: now.UTC(),
		Epoch: switched.Epoch, ConsistentPoint: lsn, Source: switched.Source, Previous: map[string]string{}, Tables: map[string]generation.RecordTable{}}
	res.Generation, res.LSN, res.Epoch, res.Tables, res.Retired = gen, lsn, switched.Epoch, len(tables), retiredAt(switched, now)
	for _, t := range tables {
		key := t.source.ID.String()
		if t.prev != nil {
			rec.Previous[key] = t.prev.Generation
		}
		rec.Tables[key] = generation.RecordTable{Rows: t.check.Rows, Files: t.check.Files, Sampled: t.check.Sampled, Rewritten: t.check.Rewritten}
		res.Rows += t.check.Rows
		res.Files += t.check.Files
		res.Sampled += int64(t.check.Sampled)
		if t.check.Rewritten {
			res.Uncompared = append(res.Uncompared, key)
		}
	}
	// The switch is done and the manifest is the truth: a record that
	// cannot be written is reported, not a failed rebuild.
	if err := generation.WriteRecord(ctx, c.Sink, rec); err != nil {
		c.Log.Warn("the generation record was not written; the rebuild itself is complete", "generation", gen, "err", err)
	}
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

// rebuildTables discovers the tables the capture takes, as init does, and
// pairs each with its manifest entry (none is no error, as for init). A table of the manifest that the
// source no longer has (or the capture no longer takes) is refused rather
// than dropped from the sink: removing a table's data is not rebuild's
// decision.
func (c *Capture) rebuildTables(ctx context.Context, db *postgres.DB, m *manifest.Manifest) ([]*rebuildTable, error) {
	found, err := c.Discover(ctx, db, nil)
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
		return nil, cdc.Usage(fmt.Errorf("the manifest holds %s, which the source does not have or the configuration does not capture; rebuild would leave them behind (restore them, or keep their data with 'pg-cdc dump' and use a new storage path)",
			strings.Join(missing, ", ")))
	}
	// No table at all (a capture initialized before its tables exist):
	// the rebuild is a new slot and epoch, and start captures the tables
	// as they appear.
	return tables, nil
}

// RebuildGeneration is the generation every table moves to: the one after
// the newest any table has or is building (a re-snapshot under way), so
// that all tables share it after a rebuild and no file of another lineage
// shares its prefix.
func RebuildGeneration(m *manifest.Manifest) (string, error) {
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

// retiredAt counts the garbage entries retired at now: the files the
// switch retired.
func retiredAt(m *manifest.Manifest, now time.Time) int {
	n := 0
	for _, g := range m.Garbage {
		if g.RetiredAt.Equal(now.UTC()) {
			n++
		}
	}
	return n
}
