package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/pgoutput"
)

// ColumnDescriber reads what a Relation message does not say about its
// columns, from the source's catalog. The postgres adapter implements it.
type ColumnDescriber interface {
	// DescribeColumns returns the named columns of the relation with OID
	// rel as the catalog has them now, in the order of names: types
	// resolved (domain base, array element, enum labels), AttNum, and
	// Missing, the value rows that existed before the column was added read
	// (pg_attribute.attmissingval; nil: NULL). A name the relation no
	// longer has comes back with AttNum 0.
	DescribeColumns(ctx context.Context, rel uint32, names []string) ([]cdc.Column, error)
}

// binder owns a session's schema state: which table and schema version
// each relation id means, every schema version's Parquet schema, the
// versions a streamed transaction made before its commit, and the enum
// labels seen. The loop asks it to bind what the stream describes
// (Relation messages, reconcile requests) and records the new versions it
// returns with the open epoch; the binder itself writes nothing.
//
// It belongs to the loop's goroutine.
type binder struct {
	log     *slog.Logger
	columns ColumnDescriber // nil: added columns are an unsupported change
	// manifest is the committer's current manifest (read on the loop's
	// goroutine, which owns it); replayEnd its end LSN at the start:
	// transactions up to it are replays.
	manifest  func() *manifest.Manifest
	replayEnd cdc.LSN

	byName map[string]*cdc.Table // captured tables by "schema.table", newest version
	byRel  map[uint32]*binding   // relation id → table version, once checked
	// uncaptured are the Relation messages of tables the manifest lacks,
	// by relation id, with the error a change of theirs is: a partition
	// of a captured root is described beside the root (PostgreSQL 15's
	// pgoutput sends the partition's Relation after the root's under
	// publish_via_partition_root) while its rows arrive as the root's.
	uncaptured map[uint32]error
	schemas    map[versionKey]*parquetfile.Schema
	// versions caches older schema versions bound during a replay;
	// fieldHigh is each table's highest field id so far.
	versions  map[versionKey]*cdc.Table
	fieldHigh map[cdc.TableID]*int
	// pending are the schema versions streamed transactions made, by
	// top-level xid, recorded when the transaction commits.
	pending map[uint32][]pendingVersion
	enums   map[*cdc.Table]*enumColumns // enum.go
}

// versionKey names one schema version of a table.
type versionKey struct {
	id      cdc.TableID
	version int
}

type binding struct {
	table *cdc.Table
	keys  []int // column indexes of the primary key
}

// at says where in the stream a description arrives.
type at struct {
	// streamTop is the streamed transaction it arrives inside, or 0.
	streamTop uint32
	// replaying: inside (or before) a transaction the manifest holds.
	replaying bool
}

// newBinder binds the tables of m, the manifest the session starts from.
func newBinder(m *manifest.Manifest, current func() *manifest.Manifest, columns ColumnDescriber, log *slog.Logger) (*binder, error) {
	b := &binder{
		log: log, columns: columns, manifest: current, replayEnd: m.EndLSN,
		byName:     map[string]*cdc.Table{},
		byRel:      map[uint32]*binding{},
		uncaptured: map[uint32]error{},
		schemas:    map[versionKey]*parquetfile.Schema{},
		versions:   map[versionKey]*cdc.Table{},
		fieldHigh:  map[cdc.TableID]*int{},
		pending:    map[uint32][]pendingVersion{},
		enums:      map[*cdc.Table]*enumColumns{},
	}
	for key, mt := range m.Tables {
		t, err := mt.SourceTable()
		if err != nil {
			return nil, err
		}
		b.byName[key] = t
	}
	return b, nil
}

// table returns the newest version of a captured table, or nil.
func (b *binder) table(key string) *cdc.Table { return b.byName[key] }

// add makes a table found while streaming known. A Relation message that
// described it before it was captured binds it now, as it was described
// from the catalog when it was found (pgoutput does not send a relation
// twice unless it changes).
func (b *binder) add(t *cdc.Table) {
	b.byName[t.ID.String()] = t
	if _, ok := b.uncaptured[t.OID]; ok {
		delete(b.uncaptured, t.OID)
		b.byRel[t.OID] = newBinding(t)
	}
}

// schema returns t's Parquet schema, built once per version.
func (b *binder) schema(t *cdc.Table) (*parquetfile.Schema, error) {
	key := versionKey{t.ID, t.SchemaVersion}
	if sc, ok := b.schemas[key]; ok {
		return sc, nil
	}
	sc, err := parquetfile.NewSchema(t)
	if err != nil {
		return nil, fmt.Errorf("table %s: parquet schema: %w", t.ID, err)
	}
	if err := b.checkRecordedTypes(t, sc); err != nil {
		return nil, err
	}
	// A value a documented type rule changed lands and is counted in the
	// delta's manifest entry; the first of each column is logged.
	sc.SetReporter(func(a parquetfile.Adjustment) {
		b.log.Warn("value written by a type rule", "table", a.Table.String(), "column", a.Column,
			"rule", string(a.Rule), "key", a.Key, "value", a.Value, "detail", a.String())
	})
	b.schemas[key] = sc
	return sc, nil
}

// relation checks a Relation message against the table's current schema
// version and remembers which table the relation id means. A Relation that
// adds, drops, renames or (readably) retypes columns makes the next schema
// version (nextVersion), returned for the open epoch to commit with its
// deltas (nil inside a streamed transaction, which records it at its
// commit): rows from here on are written under it. One that describes an
// older version inside a replayed transaction binds that version. Other
// changes (a type change readers cannot cast, a dropped or renamed key
// column) and a table that is not captured, or was re-created, are hard
// errors: writing rows under the wrong columns would corrupt the table
// silently.
func (b *binder) relation(ctx context.Context, r *pgoutput.Relation, pos at) (*cdc.Table, error) {
	id := cdc.TableID{Schema: r.Namespace, Name: r.Name}
	t := b.byName[id.String()]
	if t == nil {
		// Not an error yet: a partition of a captured root is described
		// too, and its rows arrive as the root's. A change that names this
		// relation is the error (lookup).
		b.uncaptured[r.RelID] = &cdc.Error{
			Class: cdc.ErrSchemaChanged,
			Msg:   fmt.Sprintf("table %s is published but not captured (it is not in the manifest)", id),
			Hint:  "to capture it, add it to the configuration (tables.include, or a schema of source.postgres.schemas): start records and backfills it; otherwise remove it from the publication",
		}
		delete(b.byRel, r.RelID)
		return nil, nil
	}
	if r.RelID != t.OID {
		return nil, &cdc.Error{
			Class: cdc.ErrSchemaChanged,
			Msg:   fmt.Sprintf("table %s has OID %d, the manifest has %d (the table was dropped and re-created)", id, r.RelID, t.OID),
			Hint:  "a re-created table is a new table; rebuild the capture with teardown and init",
		}
	}
	if d, err := diffRelation(t, r); err == nil && d.same() {
		b.byRel[r.RelID] = newBinding(t)
		return nil, nil
	}
	if old := b.replayedVersion(id, r, pos); old != nil {
		// A transaction the manifest already holds, replayed with the
		// schema it was written under: not a change.
		b.byRel[r.RelID] = newBinding(old)
		return nil, nil
	}
	nt, change, err := b.nextVersion(ctx, b.columns, t, r)
	var u unsupported
	if errors.As(err, &u) {
		return nil, unsupportedChange(id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("table %s: schema change: %w", id, err)
	}
	return b.adopt(t, nt, change, "relation", pos)
}

// adopt makes nt, the schema version that follows t, the table's current
// one and binds it to the relation id. It returns nt for the open epoch to
// record, or nil inside a streamed transaction that has not committed: the
// catalog, read from another session, cannot see its DDL yet, so an added
// column's value for earlier rows is unknown; the version is recorded, its
// added columns described again, at the commit (committed). source says
// what announced it, for the log.
func (b *binder) adopt(t, nt *cdc.Table, change, source string, pos at) (*cdc.Table, error) {
	if _, err := b.schema(nt); err != nil {
		return nil, err
	}
	b.byName[nt.ID.String()] = nt
	b.byRel[nt.OID] = newBinding(nt)
	b.log.Info("schema change: new schema version", "table", nt.ID.String(), "schema_version", nt.SchemaVersion, "change", change, "source", source)
	if pos.streamTop != 0 {
		b.pending[pos.streamTop] = append(b.pending[pos.streamTop], pendingVersion{table: nt, prevMaxField: maxFieldID(t)})
		return nil, nil
	}
	return nt, nil
}

func unsupportedChange(id cdc.TableID, err error) error {
	return &cdc.Error{
		Class: cdc.ErrSchemaChanged,
		Msg:   fmt.Sprintf("table %s: %v", id, err),
		Hint:  "this schema change is not followed by this version (docs/decisions.md, schema evolution); rebuild the capture with teardown and init",
	}
}

func newBinding(t *cdc.Table) *binding {
	b := &binding{table: t}
	for _, k := range t.PrimaryKey {
		b.keys = append(b.keys, t.ColumnIndex(k))
	}
	return b
}

// lookup returns what relID was bound to.
func (b *binder) lookup(relID uint32) (*binding, error) {
	bd := b.byRel[relID]
	if err := b.uncaptured[relID]; bd == nil && err != nil {
		return nil, err
	}
	if bd == nil {
		return nil, fmt.Errorf("protocol: DML for relation OID %d before its Relation message", relID)
	}
	return bd, nil
}

// committed returns, described now that it has committed, the schema
// versions streamed transaction xid made, for its epoch to record.
func (b *binder) committed(ctx context.Context, xid uint32) ([]*cdc.Table, error) {
	pvs := b.pending[xid]
	delete(b.pending, xid)
	out := make([]*cdc.Table, 0, len(pvs))
	for _, pv := range pvs {
		if err := b.describeAdded(ctx, pv); err != nil {
			return nil, err
		}
		out = append(out, pv.table)
	}
	return out, nil
}

// aborted forgets the versions of an aborted streamed transaction (sub is
// the aborted subtransaction; a top-level abort when it is 0 or xid).
func (b *binder) aborted(xid, sub uint32) {
	if sub == 0 || sub == xid {
		delete(b.pending, xid)
	}
}

// nextVersion returns the schema version that follows t for Relation r
// (renames recognised through the catalog cat, then added, dropped and
// retyped columns), and a description of the change for the log.
func (b *binder) nextVersion(ctx context.Context, cat ColumnDescriber, t *cdc.Table, r *pgoutput.Relation) (*cdc.Table, string, error) {
	base, renamed, err := renames(ctx, cat, t, r)
	if err != nil {
		return nil, "", err
	}
	d, err := diffRelation(base, r)
	if err != nil {
		return nil, "", err
	}
	nt, err := evolve(ctx, cat, base, r, d, b.fieldHighOf(t))
	if err != nil {
		return nil, "", err
	}
	return nt, describeChange(base, nt, d, renamed), nil
}

// fieldHighOf returns the highest field id t's table ever used, counting
// versions this session made that are not committed yet, so a new column's
// id is never one an earlier column had.
func (b *binder) fieldHighOf(t *cdc.Table) *int {
	h, ok := b.fieldHigh[t.ID]
	if !ok {
		h = new(int)
		if mt := b.manifest().Tables[t.ID.String()]; mt != nil {
			*h = mt.MaxFieldID()
		}
		b.fieldHigh[t.ID] = h
	}
	for _, c := range t.Columns {
		*h = max(*h, c.FieldID)
	}
	return h
}

// replayedVersion returns the manifest's schema version of id whose columns
// are exactly r's, when r arrives inside a transaction the manifest already
// holds (a replay after a crash between the manifest commit and the
// confirmation: pgoutput describes the relation as it was then). Outside a
// replay a Relation equal to an older version is a new change (a column
// dropped and added again) and nil is returned.
func (b *binder) replayedVersion(id cdc.TableID, r *pgoutput.Relation, pos at) *cdc.Table {
	if !pos.replaying {
		return nil
	}
	mt := b.manifest().Tables[id.String()]
	if mt == nil {
		return nil
	}
	for i := len(mt.Schemas) - 1; i >= 0; i-- {
		v := mt.Schemas[i].Version
		t, err := mt.SourceTableAt(v)
		if err != nil {
			continue
		}
		if d, err := diffRelation(t, r); err == nil && d.same() && len(t.Columns) == len(r.Columns) {
			if cached := b.versions[versionKey{id, v}]; cached != nil {
				return cached
			}
			b.versions[versionKey{id, v}] = t
			return t
		}
	}
	return nil
}

// manifestColumns describes nt's columns as its manifest schema version
// lists them.
func (b *binder) manifestColumns(nt *cdc.Table) []manifest.Column {
	sc := b.schemas[versionKey{nt.ID, nt.SchemaVersion}]
	return sc.ManifestColumns(nt)
}

// pendingVersion is a schema version that a streamed transaction's
// Relation made before the transaction committed.
type pendingVersion struct {
	table        *cdc.Table
	prevMaxField int // columns with a higher field id were added by it
}

func maxFieldID(t *cdc.Table) int {
	n := 0
	for _, c := range t.Columns {
		n = max(n, c.FieldID)
	}
	return n
}

// describeAdded reads, now that its transaction has committed, what the
// catalog could not show while it was open: the added columns' attnum,
// type name and the value earlier rows read. Only what leaves the Parquet
// schema unchanged is filled in; a column whose type needs details the
// stream did not carry (a domain, an array, an enum) is refused.
func (b *binder) describeAdded(ctx context.Context, pv pendingVersion) error {
	var names []string
	var idx []int
	for i, c := range pv.table.Columns {
		if c.FieldID > pv.prevMaxField && c.AttNum == 0 {
			names = append(names, c.Name)
			idx = append(idx, i)
		}
	}
	if len(names) == 0 {
		return nil
	}
	if b.columns == nil {
		return unsupportedChange(pv.table.ID, unsupportedf("no catalog connection to describe the added columns"))
	}
	described, err := b.columns.DescribeColumns(ctx, pv.table.OID, names)
	if err != nil {
		return fmt.Errorf("table %s: describe added columns: %w", pv.table.ID, err)
	}
	for k, i := range idx {
		if k >= len(described) {
			break
		}
		d, c := described[k], &pv.table.Columns[i]
		if d.AttNum == 0 || d.TypeOID != c.TypeOID || d.TypeMod != c.TypeMod {
			continue // changed again since: the later Relation brings it
		}
		if d.VolatileDefault {
			return unsupportedChange(pv.table.ID, unsupportedf("column %q was added with a volatile default: its values for earlier rows were never streamed (resnapshot the table)", d.Name))
		}
		if d.BaseTypeOID != 0 || d.ElemTypeOID != 0 || len(d.EnumLabels) > 0 {
			return unsupportedChange(pv.table.ID, unsupportedf("column %q (%s) was added inside a streamed transaction; its type needs catalog details the stream does not carry", d.Name, d.PGType))
		}
		c.AttNum, c.PGType, c.Missing = d.AttNum, d.PGType, d.Missing
	}
	return nil
}
