package flush

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/spool"
)

// Epoch buffers the committed transactions of one flush, one spooled delta
// file per table.
type Epoch struct {
	Number uint64
	dir    string
	schema func(*cdc.Table) (*parquetfile.Schema, error)

	tables map[segment]*tableDelta
	order  []segment // first-write order, for stable logs
	// schemas are the schema versions the stream made in this epoch, to be
	// committed with its deltas.
	schemas []NewSchema
	labels  []LabelUpdate
	// also are edits other components commit with this epoch's deltas, in
	// the same manifest write (backfill progress).
	also []func(*manifest.Manifest) error

	pending       Pending
	inTxn         bool
	endLSN        cdc.LSN
	maxCommitTime time.Time
}

// segment names the rows of one table written under one schema version: a
// delta file of its own, since a file has one schema.
type segment struct {
	id      cdc.TableID
	version int
	// gen is the generation the rows are for when it is not the table's
	// current one: a resnapshot's next generation (WriteTo). Empty: the
	// current generation.
	gen string
}

// NewSchema is a schema version of a table that starts in this epoch.
type NewSchema struct {
	Table   cdc.TableID
	Version int
	Columns []manifest.Column
}

type tableDelta struct {
	table  *cdc.Table
	file   *spool.File
	minLSN cdc.LSN
	maxLSN cdc.LSN
	// unrecovered counts, per column, unchanged TOAST values that could not
	// be filled in after a key change (see replicate's recoverUnchanged).
	unrecovered map[string]int64
}

// NewEpoch starts an empty epoch whose spool files go under dir. schema
// returns the Parquet schema of a table (the caller caches it).
func NewEpoch(number uint64, dir string, schema func(*cdc.Table) (*parquetfile.Schema, error)) *Epoch {
	return &Epoch{
		Number: number,
		dir:    filepath.Join(dir, fmt.Sprintf("epoch-%08d", number)),
		schema: schema,
		tables: map[segment]*tableDelta{},
	}
}

// AddSchema records that table's schema version starts in this epoch; the
// flush commits it with the epoch's deltas, in the same manifest write.
func (e *Epoch) AddSchema(table cdc.TableID, columns []manifest.Column, version int) {
	e.schemas = append(e.schemas, NewSchema{Table: table, Version: version, Columns: columns})
}

// Also records an edit of the manifest to be applied in the same write as
// the epoch's deltas, after them: a backfill's progress lands exactly with
// the rows it copied. fn must be monotonic (see manifest.Committer.Commit):
// after a conflict it is applied again to the re-read manifest.
func (e *Epoch) Also(fn func(*manifest.Manifest) error) { e.also = append(e.also, fn) }

// Schemas returns the schema versions that start in this epoch.
func (e *Epoch) Schemas() []NewSchema { return e.schemas }

// LabelUpdate is an enum column's labels as the catalog lists them now.
type LabelUpdate struct {
	Table   cdc.TableID
	Version int
	FieldID int
	Labels  []string
}

// UpdateEnumLabels records that the enum column with field id of table's
// schema version has these labels now (a label was added): the flush
// writes them into that version in place, only ever growing.
func (e *Epoch) UpdateEnumLabels(table cdc.TableID, version, fieldID int, labels []string) {
	e.labels = append(e.labels, LabelUpdate{Table: table, Version: version, FieldID: fieldID, Labels: append([]string(nil), labels...)})
}

// Write adds one change row of the open transaction.
func (e *Epoch) Write(meta cdc.RowMeta, c *cdc.Change) error {
	return e.write(segment{id: c.Table.ID, version: c.Table.SchemaVersion}, meta, c)
}

// WriteTo adds one row for generation gen of the table, which is not its
// current generation: the next one a resnapshot is building (the
// manifest's Table.Resnapshot). The flush writes it under gen's prefix and
// lists it in the resnapshot's deltas, in the same manifest write.
func (e *Epoch) WriteTo(gen string, meta cdc.RowMeta, c *cdc.Change) error {
	return e.write(segment{id: c.Table.ID, version: c.Table.SchemaVersion, gen: gen}, meta, c)
}

func (e *Epoch) write(seg segment, meta cdc.RowMeta, c *cdc.Change) error {
	td := e.tables[seg]
	if td == nil {
		s, err := e.schema(c.Table)
		if err != nil {
			return err
		}
		// Pipelined: the stream's loop decodes the next messages while
		// this file's rows are compressed (parquetfile's pipeline).
		f, err := spool.CreatePipelined(e.dir, s)
		if err != nil {
			return err
		}
		td = &tableDelta{table: c.Table, file: f, minLSN: meta.LSN}
		e.tables[seg] = td
		e.order = append(e.order, seg)
	}
	if err := td.file.Write(meta, c.Values); err != nil {
		return fmt.Errorf("table %s: %w", c.Table.ID, err)
	}
	td.minLSN = min(td.minLSN, meta.LSN)
	td.maxLSN = max(td.maxLSN, meta.LSN)
	e.inTxn = true
	e.pending.Rows++
	e.pending.Bytes += int64(c.Size())
	return nil
}

// CountUnrecovered records that the row just written for t left column
// listed in __unchanged with no earlier version of its key to take it from.
// The count lands in the delta's manifest entry.
func (e *Epoch) CountUnrecovered(t *cdc.Table, column string) {
	td := e.tables[segment{id: t.ID, version: t.SchemaVersion}]
	if td == nil {
		return // nothing was written for t: nothing to count against
	}
	if td.unrecovered == nil {
		td.unrecovered = map[string]int64{}
	}
	td.unrecovered[column]++
}

// CommitTxn marks the end of the transaction whose rows were just written. A
// transaction with no rows for captured tables still advances the end LSN,
// so that confirming it does not wait for the next captured change.
func (e *Epoch) CommitTxn(m cdc.TxnMeta, now time.Time) {
	if e.pending.Txns == 0 {
		e.pending.Since = now
	}
	e.pending.Txns++
	e.inTxn = false
	e.endLSN = max(e.endLSN, m.EndLSN)
	if m.CommitTime.After(e.maxCommitTime) {
		e.maxCommitTime = m.CommitTime
	}
}

// Pending returns what the epoch holds.
func (e *Epoch) Pending() Pending { return e.pending }

// Empty reports whether the epoch holds no transaction and no open rows.
//
// A schema version recorded in an epoch without a transaction (its
// Relation came in a streamed transaction that aborted) does not make it
// non-empty: a new session learns it again from the next Relation message.
func (e *Epoch) Empty() bool { return e.pending.Txns == 0 && !e.inTxn }

// EndLSN is the end LSN of the last transaction the epoch holds.
func (e *Epoch) EndLSN() cdc.LSN { return e.endLSN }

// Discard removes the epoch's spool files; used when a run ends without
// flushing (the transactions will be replayed from the slot).
func (e *Epoch) Discard() {
	for _, td := range e.tables {
		_ = td.file.Remove()
	}
	e.tables = map[segment]*tableDelta{}
}
