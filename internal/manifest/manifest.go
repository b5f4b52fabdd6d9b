// Package manifest holds the manifest model (design.md §3), its JSON encoding,
// sink key layout (design.md §2) and the compare-and-swap commit loop.
//
// The manifest is the single source of truth: a file the manifest does not
// reference does not exist for readers. Its JSON field names are a published
// contract: add fields freely, never rename or repurpose one without a new
// FormatVersion.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// FormatVersion is the manifest format this code writes and reads.
const FormatVersion = 1

// Key is the manifest's key relative to the sink root.
const Key = "_pgcdc/manifest.json"

// Freshness is FreshAsOf, or for a manifest written before it the newest
// flush's commit time: the sink holds every transaction the source
// committed up to it. Zero before the first flush or idle advance.
func (m *Manifest) Freshness() time.Time {
	t := m.FreshAsOf
	if n := len(m.History); n > 0 && m.History[n-1].MaxCommitTime.After(t) {
		t = m.History[n-1].MaxCommitTime
	}
	return t
}

// HistoryLimit is how many recent epochs the manifest keeps in History.
const HistoryLimit = 100

// Manifest is the whole manifest document.
type Manifest struct {
	FormatVersion int `json:"format_version"`
	// Version counts the writes of this manifest: every commit writes the
	// version after the one it read, and compare-and-swap makes each
	// unique, so readers (the post-commit Feed, history) order versions by
	// it. A manifest written before the field existed has 0.
	Version uint64  `json:"version,omitempty"`
	Source  Source  `json:"source"`
	Epoch   uint64  `json:"epoch"`
	EndLSN  cdc.LSN `json:"end_lsn"`
	// CommittedAt is when this version of the manifest was written.
	CommittedAt time.Time         `json:"committed_at"`
	Tables      map[string]*Table `json:"tables"`
	History     []EpochRecord     `json:"history"`
	// FreshAsOf is the sink's freshness (design.md §11.7): it holds every
	// transaction the source committed up to this time, by the source's
	// clock. A flush moves it to its newest commit time; an idle advance,
	// with nothing pending, to the time the server reported the WAL end it
	// advanced to, so it keeps moving on an idle source. Zero until the
	// first flush or idle advance (and in manifests written before it).
	FreshAsOf time.Time `json:"fresh_as_of,omitzero"`
	// Garbage lists files that compaction retired from the tables: no
	// reader of this or a later manifest needs them, but a reader holding
	// an older manifest may, so they are deleted only once they have been
	// retired for gc.grace_period (design.md §2).
	Garbage []RetiredFile `json:"garbage,omitempty"`
	// Folds are the ranges of files major compactions retired (fold.go):
	// a few per table, however long it has run, where Garbage would list
	// every file. Garbage still lists what a generation switch retires.
	Folds []Fold `json:"folds,omitempty"`
	// Writer identifies the process whose commit last moved the stream
	// (epoch or end LSN): the lineage of the epochs. A committer that finds
	// another writer here after a conflict has been superseded.
	Writer string `json:"writer,omitempty"`
	// Commit identifies the write that produced this version, so a writer
	// whose response was lost recognises its own write on re-read instead
	// of applying it twice.
	Commit *CommitStamp `json:"commit,omitempty"`

	// encodedBytes is the size of this version as stored, when known: set
	// by Decode and by the committer for what it wrote, never changed after
	// (a version is shared once published).
	encodedBytes int
}

// EncodedBytes is the size of this version as stored (0: not known, a
// manifest built in memory).
func (m *Manifest) EncodedBytes() int { return m.encodedBytes }

// CommitStamp names one manifest write: the writing process and its
// per-process attempt counter.
type CommitStamp struct {
	Writer string `json:"writer"`
	Seq    uint64 `json:"seq"`
}

// RetiredFile is a data file no table references any more.
type RetiredFile struct {
	Path      string    `json:"path"`
	RetiredAt time.Time `json:"retired_at"`
}

// Source names the upstream the manifest was built from.
type Source struct {
	SystemIdentifier string `json:"system_identifier"`
	Timeline         int32  `json:"timeline"`
	Database         string `json:"database"`
	Slot             string `json:"slot"`
	Publication      string `json:"publication"`
}

// Table is one captured table.
type Table struct {
	Schema          string          `json:"schema"`
	Name            string          `json:"name"`
	OID             uint32          `json:"oid"`
	Generation      string          `json:"generation"`
	PrimaryKey      []string        `json:"primary_key"`
	ReplicaIdentity string          `json:"replica_identity"`
	SchemaVersion   int             `json:"schema_version"`
	Schemas         []SchemaVersion `json:"schemas"`
	Snapshot        Snapshot        `json:"snapshot"`
	Base            *Base           `json:"base"`
	Deltas          []Delta         `json:"deltas"`
	// Resnapshot is a re-copy of the table into its next generation
	// (pg-cdc resnapshot), while readers keep reading this one; absent when
	// none is asked for or running. Readers ignore it.
	Resnapshot *Resnapshot `json:"resnapshot,omitempty"`
	// Partitions are a partitioned table's leaf partitions (their OIDs,
	// sorted) as the streamer last saw them; absent for other tables. A
	// set that changed in a way no row change shows (a partition attached
	// with rows, detached, dropped) makes a resnapshot (design.md §8).
	Partitions []uint32 `json:"partitions,omitempty"`
}

// Resnapshot is a table's next generation being built by a backfill
// (design.md §8): its chunks, and a copy of every change streamed for the table
// since the streamer took the request up, are written under Generation's
// prefix and listed in Deltas. When the backfill is complete, one manifest
// write makes it the table's generation (base none, these deltas) and
// retires the current generation's files.
type Resnapshot struct {
	Generation  string    `json:"generation"`
	RequestedAt time.Time `json:"requested_at"`
	// Snapshot is the backfill's progress (state pending until the
	// streamer takes the request up).
	Snapshot Snapshot `json:"snapshot"`
	Deltas   []Delta  `json:"deltas"`
}

// SchemaVersion is the column list in force from an epoch on.
type SchemaVersion struct {
	Version   int      `json:"version"`
	FromEpoch uint64   `json:"from_epoch"`
	Columns   []Column `json:"columns"`
}

// Column is one column of a schema version.
type Column struct {
	Name        string `json:"name"`
	PGType      string `json:"pg_type"`
	ParquetType string `json:"parquet_type"`
	Nullable    bool   `json:"nullable"`
	FieldID     int    `json:"field_id"`
	TypeOID     uint32 `json:"type_oid"`
	TypeMod     int32  `json:"type_mod"`
	// BaseTypeOID and BaseTypeMod are the type a domain resolves to; absent
	// when the column is not a domain.
	BaseTypeOID uint32 `json:"base_type_oid,omitempty"`
	BaseTypeMod int32  `json:"base_type_mod,omitempty"`
	// ElementTypeOID is an array column's element type (domains resolved).
	ElementTypeOID uint32 `json:"element_type_oid,omitempty"`
	// EnumLabels are an enum column's (or enum array's) labels in sort order.
	EnumLabels []string `json:"enum_labels,omitempty"`
	// Representation is a per-column override from the config's types:
	// section ("string"); absent for the default mapping. The stream
	// rebuilds its schema from these fields, so it writes exactly the types
	// the snapshot wrote.
	Representation string `json:"representation,omitempty"`
	// AttNum is the column's pg_attribute.attnum (a rename keeps it).
	// Absent in manifests written before schema evolution: for the columns
	// of a table's first schema version it equals FieldID, which init took
	// from attnum.
	AttNum int `json:"attnum,omitempty"`
	// MissingValue is, in PostgreSQL's text form, the value that rows
	// written before the column existed read: the ADD COLUMN's DEFAULT,
	// which PostgreSQL applied to existing rows without rewriting them or
	// writing WAL (pg_attribute.attmissingval). Absent: NULL. Readers of the
	// merged state use it for every row of a file whose schema version does
	// not have this column's field id.
	MissingValue *string `json:"missing_value,omitempty"`
}

// Snapshot records the progress of a table's snapshot: the initial one
// (init), or a backfill while streaming (a table added later, a resumed
// init, a resnapshot; design.md §5). Until State is complete the merged state of
// the table is partial, and readers say so.
type Snapshot struct {
	State string  `json:"state"` // "pending", "backfilling", "complete"
	LSN   cdc.LSN `json:"lsn"`
	// LastKey is the primary key of the last row a backfill has copied, in
	// PostgreSQL's text form, one element per primary-key column: the next
	// chunk starts after it. Absent before the first chunk (the backfill
	// starts at the beginning of the table). It is committed in the same
	// manifest write as the epoch that holds the chunk's rows, so a crash
	// loses at most the chunk in flight.
	LastKey []string `json:"last_key,omitempty"`
	// RowsCopied and Chunks count what the backfill has copied so far.
	RowsCopied int64 `json:"rows_copied,omitempty"`
	Chunks     int64 `json:"chunks,omitempty"`
	// RowsEstimate is pg_class.reltuples when the backfill started: an
	// estimate for progress reports, never a check.
	RowsEstimate int64 `json:"rows_estimate,omitempty"`
	// StartedAt is when the backfill started; CompletedAt when its last
	// chunk was committed.
	StartedAt   *time.Time `json:"started_at,omitempty"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
}

// Snapshot states. A table whose state is not complete is backfilled by
// start (from LastKey when set, else from the beginning); compaction skips
// it until it is complete.
const (
	SnapshotPending     = "pending"
	SnapshotBackfilling = "backfilling"
	SnapshotComplete    = "complete"
)

// Complete reports whether the table's snapshot is complete. An empty state
// (a manifest written before states were recorded) counts as complete.
func (s Snapshot) Complete() bool { return s.State == SnapshotComplete || s.State == "" }

// Base is the table's compacted or snapshotted state.
type Base struct {
	Epoch    uint64  `json:"epoch"`
	MaxLSN   cdc.LSN `json:"max_lsn"`
	RowCount int64   `json:"row_count"`
	Files    []File  `json:"files"`
	// Adjusted counts, per column, the values of these files that a
	// documented type rule changed (docs/types.md); absent when none. After
	// a compaction it is the sum over everything folded into the base, so
	// the count never goes down.
	Adjusted map[string]int64 `json:"adjusted,omitempty"`
	// Tombstones is how many of RowCount are delete markers (__op D) that
	// compaction keeps for compaction.tombstone_ttl.
	Tombstones int64 `json:"tombstones,omitempty"`
	// SortedBy names the columns the files are sorted by, in order (the
	// primary key, then __lsn and __seq); absent for a snapshot base, which
	// is in the source's heap order.
	SortedBy []string `json:"sorted_by,omitempty"`
	// SchemaVersion is the schema version the files were written with; 0
	// for a snapshot base (the table's first version).
	SchemaVersion int `json:"schema_version,omitempty"`
	// UnrecoveredTOAST counts, per column, rows of these files that still
	// list the column in __unchanged (see Delta.UnrecoveredTOAST).
	UnrecoveredTOAST map[string]int64 `json:"unrecovered_toast,omitempty"`
	// Truncate is the newest truncate marker compaction folded: the files no
	// longer hold it, so readers must still drop any version older than it
	// (a replayed delta, say) as the marker would have. Absent when none.
	Truncate *Position `json:"truncate,omitempty"`
	// CompactedAt is when compaction wrote this base; absent for a snapshot.
	CompactedAt *time.Time `json:"compacted_at,omitempty"`
}

// Position is a row's order token (__lsn, __seq).
type Position struct {
	LSN cdc.LSN `json:"lsn"`
	Seq int64   `json:"seq"`
}

// Delta is the change rows one epoch wrote for the table, or, once a minor
// compaction merged consecutive deltas, those of epochs FromEpoch to Epoch.
type Delta struct {
	Epoch uint64 `json:"epoch"`
	// FromEpoch is the first epoch a merged delta holds (absent: Epoch
	// alone). A merged delta holds exactly the change rows of the deltas
	// it replaced, in their order.
	FromEpoch uint64 `json:"from_epoch,omitempty"`
	// Level counts the minor compactions the rows went through: 0 for a
	// flush's delta, one more than its inputs' for a merged one.
	Level int `json:"level,omitempty"`
	// MergedAt is when a minor compaction wrote a merged delta; absent
	// for a flush's. It is also when the files of the deltas it replaced
	// were retired: those are not listed in Garbage (design.md §7.5).
	MergedAt      *time.Time `json:"merged_at,omitempty"`
	MinLSN        cdc.LSN    `json:"min_lsn"`
	MaxLSN        cdc.LSN    `json:"max_lsn"`
	Rows          int64      `json:"rows"`
	SchemaVersion int        `json:"schema_version"`
	Files         []File     `json:"files"`
	// Adjusted counts, per column, the values of these files that a
	// documented type rule changed (docs/types.md); absent when none.
	Adjusted map[string]int64 `json:"adjusted,omitempty"`
	// UnrecoveredTOAST counts, per column, rows of these files that list
	// the column in __unchanged although no earlier version of their key
	// holds it: a key-changing UPDATE left a TOASTed value unchanged and the
	// row was gone from the source before it could be read back.
	UnrecoveredTOAST map[string]int64 `json:"unrecovered_toast,omitempty"`
}

// First is the first epoch the delta holds.
func (d Delta) First() uint64 {
	if d.FromEpoch != 0 {
		return d.FromEpoch
	}
	return d.Epoch
}

// Bytes is the size of the delta's files.
func (d Delta) Bytes() int64 {
	var n int64
	for _, f := range d.Files {
		n += f.Bytes
	}
	return n
}

// DeltaFiles counts the table's delta files and their bytes: what every
// read merges beside the base, and what a major compaction would fold.
func (t *Table) DeltaFiles() (files int, bytes int64) {
	for _, d := range t.Deltas {
		files += len(d.Files)
		bytes += d.Bytes()
	}
	return files, bytes
}

// LastMerged is when a minor compaction wrote the newest merged delta the
// table holds; zero when it holds none.
func (t *Table) LastMerged() time.Time {
	var at time.Time
	for _, d := range t.Deltas {
		if d.MergedAt != nil && d.MergedAt.After(at) {
			at = *d.MergedAt
		}
	}
	return at
}

// File is one Parquet file, by key relative to the sink root.
type File struct {
	Path  string `json:"path"`
	Rows  int64  `json:"rows"`
	Bytes int64  `json:"bytes"`
}

// EpochRecord is one entry of the recent history.
type EpochRecord struct {
	Epoch         uint64    `json:"epoch"`
	EndLSN        cdc.LSN   `json:"end_lsn"`
	MaxCommitTime time.Time `json:"max_commit_time"`
	FlushedAt     time.Time `json:"flushed_at"`
}

// AppendHistory records rec as the newest entry of the recent history and
// keeps only the HistoryLimit newest. A trimmed history is a fresh copy: it
// shares no backing array with the longer slice it replaces, so the dropped
// records are not kept alive and an earlier holder of History sees no
// change. Every writer that adds an epoch (the flush, a rebuild) records it
// here.
func (m *Manifest) AppendHistory(rec EpochRecord) {
	m.History = append(m.History, rec)
	if n := len(m.History); n > HistoryLimit {
		m.History = append([]EpochRecord(nil), m.History[n-HistoryLimit:]...)
	}
}

// Decode parses and validates a manifest. Unknown fields are accepted (a
// newer writer may add fields); a different format version is refused.
func Decode(data []byte) (*Manifest, error) {
	var probe struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	if probe.FormatVersion == nil {
		return nil, fmt.Errorf("decode manifest: no format_version")
	}
	if *probe.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("decode manifest: format_version %d is not supported (this build reads %d)", *probe.FormatVersion, FormatVersion)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	if m.Tables == nil {
		m.Tables = map[string]*Table{}
	}
	for key, t := range m.Tables {
		if t == nil {
			return nil, fmt.Errorf("decode manifest: table %q is null", key)
		}
		if want := (cdc.TableID{Schema: t.Schema, Name: t.Name}).String(); want != key {
			return nil, fmt.Errorf("decode manifest: table key %q does not match its schema and name %q", key, want)
		}
	}
	m.encodedBytes = len(data)
	return &m, nil
}

// Encode renders the manifest as indented JSON with a stable key order
// (struct fields in declaration order, map keys sorted).
func (m *Manifest) Encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return buf.Bytes(), nil
}

// Clone returns a deep copy, so a mutation that fails leaves the original
// untouched.
func (m *Manifest) Clone() *Manifest {
	data, err := m.Encode()
	if err != nil {
		panic(fmt.Sprintf("manifest: clone: %v", err)) // cannot happen: the model has no unencodable fields
	}
	c, err := Decode(data)
	if err != nil {
		panic(fmt.Sprintf("manifest: clone: %v", err))
	}
	return c
}

// CurrentSchema returns the table's schema version in force.
func (t *Table) CurrentSchema() *SchemaVersion {
	for i := range t.Schemas {
		if t.Schemas[i].Version == t.SchemaVersion {
			return &t.Schemas[i]
		}
	}
	return nil
}

// SchemaAt returns the schema version numbered v, or nil. Version 0 (a
// snapshot base's) is the table's first version.
func (t *Table) SchemaAt(v int) *SchemaVersion {
	if v == 0 && len(t.Schemas) > 0 {
		return &t.Schemas[0]
	}
	for i := range t.Schemas {
		if t.Schemas[i].Version == v {
			return &t.Schemas[i]
		}
	}
	return nil
}

// MaxFieldID is the highest field id any schema version of the table gave a
// column: a new column takes the next one, so ids are never reused.
func (t *Table) MaxFieldID() int {
	n := 0
	for _, sv := range t.Schemas {
		for _, c := range sv.Columns {
			n = max(n, c.FieldID)
		}
	}
	return n
}

// AdjustedTotals sums, per column, the values a documented type rule
// changed (docs/types.md) over the base and every delta: the counts of
// everything the table's files hold. It is nil when there are none.
func (t *Table) AdjustedTotals() map[string]int64 {
	var out map[string]int64
	add := func(m map[string]int64) {
		for k, v := range m {
			if out == nil {
				out = map[string]int64{}
			}
			out[k] += v
		}
	}
	if t.Base != nil {
		add(t.Base.Adjusted)
	}
	for _, d := range t.Deltas {
		add(d.Adjusted)
	}
	return out
}

// ID returns the table's id.
func (t *Table) ID() cdc.TableID { return cdc.TableID{Schema: t.Schema, Name: t.Name} }

// SourceTable returns the table as the capture code sees it: the columns of
// its current schema version.
func (t *Table) SourceTable() (*cdc.Table, error) {
	return t.SourceTableAt(t.SchemaVersion)
}

// SourceTableAt returns the table as schema version v describes it.
func (t *Table) SourceTableAt(v int) (*cdc.Table, error) {
	sv := t.SchemaAt(v)
	if sv == nil {
		return nil, fmt.Errorf("table %s: schema version %d is not in the manifest", t.ID(), v)
	}
	ct := &cdc.Table{
		ID:              t.ID(),
		OID:             t.OID,
		PrimaryKey:      append([]string(nil), t.PrimaryKey...),
		ReplicaIdentity: cdc.ReplicaIdentity(t.ReplicaIdentity),
		SchemaVersion:   sv.Version,
	}
	for _, c := range sv.Columns {
		ct.Columns = append(ct.Columns, c.SourceColumn(sv.Version == t.Schemas[0].Version))
	}
	return ct, nil
}

// SourceColumn returns the column as the capture code sees it. first says
// whether it belongs to the table's first schema version, whose attnums an
// older manifest may not record (they equal the field ids there).
func (c Column) SourceColumn(first bool) cdc.Column {
	out := cdc.Column{
		Name: c.Name, TypeOID: c.TypeOID, TypeMod: c.TypeMod, PGType: c.PGType,
		NotNull: !c.Nullable, FieldID: c.FieldID,
		BaseTypeOID: c.BaseTypeOID, BaseTypeMod: c.BaseTypeMod, ElemTypeOID: c.ElementTypeOID,
		EnumLabels: append([]string(nil), c.EnumLabels...), Repr: c.Representation,
		AttNum: c.AttNum,
	}
	if out.AttNum == 0 && first {
		out.AttNum = c.FieldID
	}
	if c.MissingValue != nil {
		v := *c.MissingValue
		out.Missing = &v
	}
	return out
}
