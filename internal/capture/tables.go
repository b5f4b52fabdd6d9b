package capture

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// Discover finds the tables the capture takes (Selection), keeps those for
// which keep is true (all when keep is nil), applies the type overrides to
// them and logs what postgres.CheckTables warns about. Init, rebuild and
// the search for new tables share it, so a table is captured the same way
// whichever of them finds it. With keep nil, an override naming no column
// of the result is a usage error (a typo would go unnoticed); with keep,
// only the overrides of the kept tables apply, the others name tables
// captured before.
func (c *Capture) Discover(ctx context.Context, db *postgres.DB, keep func(cdc.TableID) bool) ([]*cdc.Table, error) {
	sel := c.Tables
	found, err := db.DiscoverTables(ctx, sel.Schemas, sel.Include, sel.Exclude)
	if err != nil {
		return nil, err
	}
	types := sel.Types
	if keep != nil {
		kept := found[:0]
		for _, t := range found {
			if keep(t.ID) {
				kept = append(kept, t)
			}
		}
		found = kept
		types = overridesFor(found, sel.Types)
	}
	if len(found) == 0 {
		return nil, nil
	}
	if err := ApplyTypeOverrides(found, types); err != nil {
		return nil, cdc.Usage(err)
	}
	warnings, err := postgres.CheckTables(found)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		c.Log.Warn(w)
	}
	return found, nil
}

// schemasText names the schemas the capture watches, for messages.
func (c *Capture) schemasText() string {
	if len(c.Tables.Schemas) == 0 {
		return "every schema but the system ones"
	}
	return strings.Join(c.Tables.Schemas, ", ")
}

// ApplyTypeOverrides sets the representation the types: overrides choose
// on each named column. The snapshot and the manifest (from which the
// stream rebuilds its schemas) both take it from the column, so every file
// of the table has the same types. A key that names no captured column is
// an error: a typo would otherwise be silently ignored.
func ApplyTypeOverrides(tables []*cdc.Table, types map[string]string) error {
	var missing []string
	for _, ref := range slices.Sorted(maps.Keys(types)) {
		schema, table, column, err := cdc.ParseColumnRef(ref)
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

// overridesFor keeps the type overrides that name a column of tables.
func overridesFor(tables []*cdc.Table, types map[string]string) map[string]string {
	out := map[string]string{}
	for _, ref := range slices.Sorted(maps.Keys(types)) {
		schema, table, _, err := cdc.ParseColumnRef(ref)
		if err != nil {
			out[ref] = types[ref] // reported by ApplyTypeOverrides
			continue
		}
		for _, t := range tables {
			if t.ID.Schema == schema && t.ID.Name == table {
				out[ref] = types[ref]
			}
		}
	}
	return out
}

// ManifestTable is t's first manifest entry: schema version 1, generation
// g0001, snapshot complete at lsn with base (nil: none yet).
func ManifestTable(t *cdc.Table, base *manifest.Base, lsn cdc.LSN) (*manifest.Table, error) {
	schema, err := parquetfile.NewSchema(t)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.ID, err)
	}
	pk := t.PrimaryKey
	if pk == nil {
		pk = []string{}
	}
	return &manifest.Table{
		Schema: t.ID.Schema, Name: t.ID.Name, OID: t.OID, Generation: manifest.FirstGeneration,
		PrimaryKey: pk, ReplicaIdentity: string(t.ReplicaIdentity),
		SchemaVersion: 1,
		Schemas:       []manifest.SchemaVersion{{Version: 1, FromEpoch: 0, Columns: schema.ManifestColumns(t)}},
		Snapshot:      manifest.Snapshot{State: manifest.SnapshotComplete, LSN: lsn},
		Base:          base,
		Deltas:        []manifest.Delta{},
	}, nil
}

// Finder finds the tables to capture that the manifest lacks and publishes
// them, through one session's connection: the replicate.TableSource of a
// session, and the search the daemon runs before streaming.
type Finder struct {
	c  *Capture
	db *postgres.DB
}

// Finder returns the capture's Finder on db.
func (c *Capture) Finder(db *postgres.DB) *Finder { return &Finder{c: c, db: db} }

// NewTables returns, as the manifest is to record them (snapshot
// backfilling, no base), the tables the capture takes for which known is
// false. A table without a primary key is refused: a backfill places rows
// by key.
func (f *Finder) NewTables(ctx context.Context, known func(cdc.TableID) bool) ([]*manifest.Table, error) {
	fresh, err := f.c.Discover(ctx, f.db, func(id cdc.TableID) bool { return !known(id) })
	if err != nil || len(fresh) == 0 {
		return nil, err
	}
	var out []*manifest.Table
	for _, t := range fresh {
		if len(t.PrimaryKey) == 0 {
			return nil, &cdc.Error{
				Class: cdc.ErrSchemaChanged,
				Msg:   fmt.Sprintf("table %s has no primary key: a table captured after init is backfilled by primary key, and it has none", t.ID),
				Hint:  fmt.Sprintf("add a primary key to it (ALTER TABLE %s ADD PRIMARY KEY (...)), or leave it out with tables.exclude; REPLICA IDENTITY FULL is not enough", t.ID),
			}
		}
		mt, err := ManifestTable(t, nil, 0)
		if err != nil {
			return nil, err
		}
		now := time.Now().UTC()
		mt.Snapshot = manifest.Snapshot{State: manifest.SnapshotBackfilling, StartedAt: &now}
		out = append(out, mt)
	}
	return out, nil
}

// EnsurePublication makes the publication publish ids (sorted), adding
// those it lacks.
func (f *Finder) EnsurePublication(ctx context.Context, ids []cdc.TableID) error {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b cdc.TableID) int { return strings.Compare(a.String(), b.String()) })
	return f.db.EnsurePublication(ctx, f.c.Publication, ids)
}

// Publish adds the tables to the publication and waits for the
// transactions older than that change to end.
func (f *Finder) Publish(ctx context.Context, ids []cdc.TableID) error {
	if err := f.EnsurePublication(ctx, ids); err != nil {
		return err
	}
	return f.WaitInFlight(ctx)
}

// WaitInFlight waits for the transactions open now to end.
func (f *Finder) WaitInFlight(ctx context.Context) error {
	return f.db.WaitInFlight(ctx, 100*time.Millisecond, func(xmin, until cdc.XID) {
		f.c.Log.Info("backfill waits for transactions older than the publication change to end", "xmin", uint64(xmin), "until", uint64(until))
	})
}

// SortedTables returns the manifest's table keys in order.
func SortedTables(m *manifest.Manifest) []string {
	return slices.Sorted(maps.Keys(m.Tables))
}

// Unfinished lists, sorted, the tables whose snapshot is not complete.
func Unfinished(m *manifest.Manifest) []string {
	var out []string
	for _, key := range SortedTables(m) {
		if !m.Tables[key].Snapshot.Complete() {
			out = append(out, key)
		}
	}
	return out
}

// SnapshotProgress words the rows a table's snapshot has copied so far
// against the estimate: "120000 / ~1000000 (12%)", "120000 / ?", or "-".
func SnapshotProgress(s manifest.Snapshot) string {
	switch {
	case s.RowsEstimate > 0:
		return fmt.Sprintf("%d / ~%d (%d%%)", s.RowsCopied, s.RowsEstimate, min(100, s.RowsCopied*100/s.RowsEstimate))
	case s.RowsCopied > 0:
		return fmt.Sprintf("%d / ?", s.RowsCopied)
	default:
		return "-"
	}
}

// SnapshotColumn is a table's snapshot as status shows it: the state and,
// while it is not complete, the rows copied so far.
func SnapshotColumn(s manifest.Snapshot) string {
	if s.Complete() {
		return s.State
	}
	return s.State + " " + SnapshotProgress(s)
}

// Incomplete splits ids into the tables whose snapshot is complete and a
// description of each of the others ("public.t3 (backfilling 250 / ~1000
// (25%))"). Until a table's snapshot is complete its merged state is
// partial (design.md §5: readers are told), so dump and verify refuse it
// rather than report part of a table as the whole.
func Incomplete(m *manifest.Manifest, ids []cdc.TableID) (complete []cdc.TableID, incomplete []string) {
	for _, id := range ids {
		t := m.Tables[id.String()]
		if t == nil || t.Snapshot.Complete() {
			complete = append(complete, id)
			continue
		}
		incomplete = append(incomplete, fmt.Sprintf("%s (%s)", id, SnapshotColumn(t.Snapshot)))
	}
	return complete, incomplete
}

// IncompleteError is the refusal: exit 18, the class of "not initialized",
// since these tables are not initialized yet in the sink.
func IncompleteError(incomplete []string) error {
	noun := "table's snapshot is"
	if len(incomplete) > 1 {
		noun = "tables' snapshots are"
	}
	return &cdc.Error{
		Class: cdc.ErrNotInitialized,
		Msg:   fmt.Sprintf("the %s not complete, so the sink holds part of them only: %s", noun, strings.Join(incomplete, ", ")),
		Hint:  "'pg-cdc start' completes them as backfills ('pg-cdc status' shows progress); --allow-incomplete reads them anyway",
	}
}
