package capture

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/snapshot"
)

// initProgressInterval is how often init commits the rows copied so far of
// the tables it is copying, for status.
const initProgressInterval = 5 * time.Second

// snapshotPartRows bounds a base file's size for big tables.
const snapshotPartRows = 4_000_000

// InitResult is what Init found or did; exactly one of its parts is set.
type InitResult struct {
	// Already is the manifest of a complete capture: nothing changed.
	Already *manifest.Manifest
	// Pending are the tables the configuration covers that Already does
	// not capture yet (a table added to tables.include, or created in a
	// captured schema): pg-cdc start backfills them, not init.
	Pending []cdc.TableID
	// Resumed is what an interrupted init left, which start completes.
	Resumed *Resume
	// Snapshot is the initial snapshot taken.
	Snapshot *InitSnapshot
}

// InitSnapshot describes an initial snapshot.
type InitSnapshot struct {
	Tables int
	Rows   int64
	LSN    cdc.LSN
}

// Init initializes the capture (design.md §5.1): preflight, publication,
// slot with an exported snapshot, the manifest with every table pending,
// then every table copied under the snapshot and committed as soon as its
// base is uploaded. A complete capture is reported, never redone; an
// interrupted one is reported with what is left (design.md §5.3).
func (c *Capture) Init(ctx context.Context) (*InitResult, error) {
	release, err := c.LockSink(ctx, "init")
	if err != nil {
		return nil, err
	}
	defer release()
	if err := c.ProbeSink(ctx); err != nil {
		return nil, err
	}
	db, ident, err := c.openSource(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	m, _, err := manifest.Load(ctx, c.Sink)
	switch {
	case err == nil:
		if err := CheckIdentity(m, ident); err != nil {
			return nil, err
		}
		if len(Unfinished(m)) > 0 {
			r, err := c.resume(ctx, db, m)
			return &InitResult{Resumed: r}, err
		}
		res := &InitResult{Already: m}
		fresh, err := c.Discover(ctx, db, func(id cdc.TableID) bool { return m.Tables[id.String()] == nil })
		if err != nil {
			// Only what init says about it: start finds (or refuses) them itself.
			c.Log.Warn("looking for tables the configuration covers that are not captured yet", "err", err)
		}
		for _, t := range fresh {
			res.Pending = append(res.Pending, t.ID)
		}
		return res, nil
	case !errors.Is(err, cdc.ErrNotInitialized):
		return nil, err
	}
	tables, err := c.prepareInit(ctx, db)
	if err != nil {
		return nil, err
	}
	snap, err := c.initialSnapshot(ctx, db, ident, tables)
	return &InitResult{Snapshot: snap}, err
}

// openSource opens the source and reads its identity.
func (c *Capture) openSource(ctx context.Context) (*postgres.DB, postgres.Identity, error) {
	db, err := postgres.Connect(ctx, c.Source)
	if err != nil {
		return nil, postgres.Identity{}, err
	}
	ident, err := db.Identity(ctx)
	if err != nil {
		db.Close()
		return nil, postgres.Identity{}, err
	}
	return db, ident, nil
}

// ConnectUpstream opens the source and checks that it is the one m was
// built from (design.md §1.2): a command must not act on another database
// that happens to answer at the same address.
func (c *Capture) ConnectUpstream(ctx context.Context, m *manifest.Manifest) (*postgres.DB, error) {
	db, ident, err := c.openSource(ctx)
	if err != nil {
		return nil, err
	}
	if err := CheckIdentity(m, ident); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// prepareInit checks the source, discovers the tables and makes the
// publication exist before the slot, so the slot's stream covers every
// captured table from its first change. A slot no manifest refers to is
// left over from an init that did not finish, and is dropped.
//
// Finding no table is not an error: setting the capture up before the
// application creates its schema is an ordinary order. Init then creates
// the publication with no table, the slot and a manifest with no table,
// and start captures each table as it appears in the captured schemas
// (published, then backfilled while streaming, as any table found after
// init). A tables.include that names a table which does not exist is still
// refused by Discover (a usage error): the list is explicit, a missing name
// is far more often a typo than a table to come, and start's discovery
// refuses it the same way. Whatever the reason, a non-empty tables.include
// that yields no table is a usage error: start would never find one either.
func (c *Capture) prepareInit(ctx context.Context, db *postgres.DB) ([]*cdc.Table, error) {
	if err := db.Preflight(ctx, postgres.PreflightTarget{Provider: c.Provider, Publication: c.Publication, Slot: c.Slot}); err != nil {
		return nil, err
	}
	tables, err := c.Discover(ctx, db, nil)
	if err != nil {
		return nil, err
	}
	if len(tables) == 0 && len(c.Tables.Include) > 0 {
		// An explicit list that yields nothing can never capture a table:
		// start takes only the listed ones. (Discover already refuses a
		// listed name that is missing or not a table; this keeps the
		// usage error whatever else would leave the list empty.)
		return nil, cdc.Usage(fmt.Errorf("no tables to capture: none of the tables tables.include lists (%s) is captured (check tables.include and tables.exclude)", tableList(c.Tables.Include)))
	}
	if len(tables) == 0 {
		c.Log.Warn("no tables to capture yet: init creates the publication, the slot and a manifest with none; start captures each table created in the captured schemas from its first row",
			"schemas", c.schemasText())
	}
	ids := make([]cdc.TableID, len(tables))
	for i, t := range tables {
		ids[i] = t.ID
	}
	if err := db.EnsurePublication(ctx, c.Publication, ids); err != nil {
		return nil, err
	}
	slot, err := db.Slot(ctx, c.Slot)
	if err != nil {
		return nil, err
	}
	if slot.Exists {
		if slot.Active {
			return nil, fmt.Errorf("replication slot %q exists and is in use by PID %d, but there is no manifest in %s; stop that consumer or choose another slot name", c.Slot, slot.ActivePID, c.SinkName)
		}
		c.Log.Warn("dropping a replication slot left by an unfinished init", "slot", c.Slot)
		if err := db.DropSlot(ctx, c.Slot); err != nil {
			return nil, err
		}
	}
	return tables, nil
}

// initialSnapshot creates the slot, writes the manifest with every table
// pending and copies the tables under the slot's exported snapshot.
//
// The manifest comes first: from then on it refers to the slot, so a rerun
// keeps the slot, and each table's base is committed the moment it is
// copied (design.md §5.3). Its end LSN is the consistent point, where start
// streams from whatever the snapshot finished.
func (c *Capture) initialSnapshot(ctx context.Context, db *postgres.DB, ident postgres.Identity, tables []*cdc.Table) (*InitSnapshot, error) {
	repl, err := postgres.ConnectReplication(ctx, c.Source)
	if err != nil {
		return nil, err
	}
	// The exported snapshot lives until the next command on this
	// connection: it stays idle until every COPY has imported it.
	defer repl.Close(context.WithoutCancel(ctx))
	lsn, snapName, err := repl.CreateSlot(ctx, c.Slot)
	if err != nil {
		return nil, err
	}
	snapTime := time.Now().UTC()
	c.Log.Info("created replication slot", "slot", c.Slot, "lsn", lsn, "snapshot", snapName, "tables", len(tables))
	m, err := c.pendingManifest(ctx, db, ident, tables, lsn, snapTime)
	if err != nil {
		return nil, err
	}
	committer, err := manifest.Create(ctx, c.Sink, m, time.Now())
	if err != nil {
		return nil, err
	}
	committer.SetLogger(c.Log)
	rec := snapshot.NewRecorder(committer, lsn)
	progress := &snapshot.Progress{}
	var bases map[string]*manifest.Base
	g, gctx := errgroup.WithContext(ctx)
	watchCtx, stopWatch := context.WithCancel(gctx)
	g.Go(func() error { return rec.Watch(watchCtx, progress, initProgressInterval) })
	g.Go(func() error {
		defer stopWatch()
		var err error
		bases, err = snapshot.Run(gctx, db, c.Sink, tables, c.snapshotOptions(snapName, lsn, snapTime, manifest.FirstGeneration, rec.TableDone, progress), c.Log)
		return err
	})
	if err := g.Wait(); err != nil {
		done := len(m.Tables) - len(Unfinished(committer.Current()))
		return nil, fmt.Errorf("initial snapshot stopped with %d of %d tables complete, which the manifest keeps (run 'pg-cdc init' again to see what is left, then 'pg-cdc start' to complete it): %w",
			done, len(m.Tables), err)
	}
	res := &InitSnapshot{Tables: len(tables), LSN: lsn}
	for _, b := range bases {
		res.Rows += b.RowCount
	}
	return res, nil
}

// snapshotOptions are the options of a snapshot under the exported
// snapshot snapName into generation gen.
func (c *Capture) snapshotOptions(snapName string, lsn cdc.LSN, at time.Time, gen string, done func(context.Context, *cdc.Table, *manifest.Base) error, progress *snapshot.Progress) snapshot.Options {
	return snapshot.Options{
		Snapshot: snapName, LSN: lsn, Time: at, Workers: c.Workers,
		Generation: gen, SpoolDir: filepath.Join(c.StateDir, "spool"), PartRows: snapshotPartRows,
		Encoders: min(2, runtime.GOMAXPROCS(0)),
		Done:     done, Progress: progress,
	}
}

// pendingManifest is the first manifest: the source, epoch 0 at the
// consistent point, every table pending with the planner's row estimate.
func (c *Capture) pendingManifest(ctx context.Context, db *postgres.DB, ident postgres.Identity, tables []*cdc.Table, lsn cdc.LSN, started time.Time) (*manifest.Manifest, error) {
	m := &manifest.Manifest{
		Source: manifest.Source{
			SystemIdentifier: ident.SystemIdentifier, Timeline: ident.Timeline, Database: ident.Database,
			Slot: c.Slot, Publication: c.Publication,
		},
		Epoch:   0,
		EndLSN:  lsn,
		Tables:  map[string]*manifest.Table{},
		History: []manifest.EpochRecord{{Epoch: 0, EndLSN: lsn, MaxCommitTime: started, FlushedAt: time.Now().UTC()}},
	}
	for _, t := range tables {
		mt, err := ManifestTable(t, nil, 0)
		if err != nil {
			return nil, err
		}
		estimate, err := db.EstimateRows(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		mt.Snapshot = manifest.Snapshot{State: manifest.SnapshotPending, RowsEstimate: estimate, StartedAt: &started}
		m.Tables[t.ID.String()] = mt
	}
	return m, nil
}

// Resume is what an interrupted init left: the manifest (the finished
// tables' bases at the consistent point) and, per table whose copy was
// lost, the rows it had read.
type Resume struct {
	Manifest *manifest.Manifest
	Lost     map[string]int64
}

// resume answers an init run again after one that stopped before every
// table was copied (killed, or failed). It cannot continue the copy itself:
// the exported snapshot the finished tables were read in died with the
// first process's replication connection, and a new snapshot would be
// taken at another point than the slot's consistent point. What it keeps:
// the manifest and the slot, which the manifest refers to and which holds
// every change since that point. start streams from there and completes the
// unfinished tables as backfills, by primary-key chunks whose placement
// against the stream is decided by visibility (design.md §5.2), so nothing
// is copied twice or missed.
//
// The only write is a reset of the rows-copied count of a pending table
// whose copy was lost: its backfill starts from the beginning.
func (c *Capture) resume(ctx context.Context, db *postgres.DB, m *manifest.Manifest) (*Resume, error) {
	slot, err := db.Slot(ctx, c.Slot)
	if err != nil {
		return nil, err
	}
	// A lost slot or one confirmed past the manifest ends here as it would
	// in start; a slot still active is the killed init's walsender, which
	// PostgreSQL ends when it notices.
	if err := CheckSlot(c.Slot, slot, m); err != nil && !IsSlotBusy(err) {
		return nil, err
	}
	lost := map[string]int64{}
	for _, key := range Unfinished(m) {
		if s := m.Tables[key].Snapshot; s.State == manifest.SnapshotPending && len(s.LastKey) == 0 && s.RowsCopied > 0 {
			lost[key] = s.RowsCopied
		}
	}
	if len(lost) > 0 {
		mc, err := manifest.Open(ctx, c.Sink, manifest.Breaker{})
		if err != nil {
			return nil, err
		}
		mc.SetLogger(c.Log)
		if m, err = mc.Commit(ctx, func(m *manifest.Manifest) error {
			for key := range lost {
				if t := m.Tables[key]; t != nil && t.Snapshot.State == manifest.SnapshotPending && len(t.Snapshot.LastKey) == 0 {
					t.Snapshot.RowsCopied = 0
				}
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("reset the progress of the interrupted copies: %w", err)
		}
	}
	unfinished := Unfinished(m)
	c.Log.Info("init was interrupted; keeping the manifest and the slot", "slot", c.Slot, "lsn", m.EndLSN,
		"complete", len(m.Tables)-len(unfinished), "unfinished", len(unfinished))
	return &Resume{Manifest: m, Lost: lost}, nil
}

// tableList names ids for messages.
func tableList(ids []cdc.TableID) string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id.String()
	}
	return strings.Join(names, ", ")
}
