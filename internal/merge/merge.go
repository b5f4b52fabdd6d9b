// Package merge computes a table's current state from the files its manifest
// entry names, by the rules of design.md §7, in bounded memory. It is shared by
// compaction (which writes the result as a new base), dump (which prints it)
// and verify (which compares it, as of a source snapshot, with the source).
//
// Rules, applied per primary key to its versions in (__lsn, __seq) order:
//
//   - a T row removes every version, of every key, older than itself; a
//     base that folded one records it (manifest.Base.Truncate), and it keeps
//     applying to the deltas after that base;
//   - the newest version wins; a D winner means the key is deleted (it is
//     returned as a tombstone only when asked for);
//   - a column an I or U version lists in __unchanged takes its value from
//     the newest older I or U version of the key that sent it, since the
//     key's last D (a D's values are not values: under REPLICA IDENTITY
//     DEFAULT it holds the key only, and a row that follows a delete of its
//     key is a new row); when no such version sent it, the column stays
//     NULL and stays listed in __unchanged, so the loss stays visible;
//   - replayed duplicates (same key and (__lsn, __seq)) count once;
//   - a base's row is the fold of its key's versions up to its own: older
//     versions (replays of deltas it folded) add nothing to it, and it
//     counts rather than a replayed copy of its own version, whose
//     unchanged columns it has filled.
//
// A table without a primary key is insert-only: every I row not removed by a
// T is kept, once per (__lsn, __seq).
//
// Memory: input rows go through an external sort (package extsort) bounded
// by Options.MemoryBytes; folding holds one key's newest values. A base that
// compaction wrote is already in merge order (manifest.Base.SortedBy): it is
// not sorted again but read beside the sorted deltas, file after file, and
// its order is checked as it is read.
package merge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/extsort"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// DefaultMemoryBytes is the sort buffer used when Options leave it zero.
const DefaultMemoryBytes = 64 << 20

// Options select what is merged and how.
type Options struct {
	// ScratchDir holds downloaded inputs and sort runs while the merge runs;
	// it is created if missing. Required.
	ScratchDir string
	// MemoryBytes bounds the rows buffered before a sorted run is spilled.
	MemoryBytes int64
	// UpToEpoch, when set, merges only the base and the deltas of epochs up
	// to it: the table as of that epoch. It fails when compaction already
	// folded later epochs into the base.
	UpToEpoch *uint64
	// Visible, when set, keeps only versions whose source transaction it
	// accepts (by __xid): the table as of a source snapshot.
	Visible func(xid int64) bool
	// Tombstones returns keys whose winner is a delete as their D row.
	Tombstones bool
}

// Stats describe what a merge read and produced.
type Stats struct {
	Files     int   // input files
	Versions  int64 // input rows other than truncate markers
	Filtered  int64 // versions Visible rejected
	Truncates int64 // truncate markers
	Runs      int   // sorted runs spilled to disk
	MaxLSN    int64 // newest __lsn of the inputs
	MaxOpTS   int64 // newest __op_ts of the inputs, µs since the epoch
	Live      int64 // rows returned as live
	Deleted   int64 // keys whose winner is a delete
}

// Reader returns a table's merged rows in Order, one per live key (and per
// deleted key when Options.Tombstones is set).
type Reader struct {
	table  *cdc.Table
	schema *parquetfile.Schema
	order  Order
	names  map[string]int // column name → table column index

	sorter *extsort.Sorter
	it     *extsort.Iterator
	base   *baseStream // the sorted base read beside the sort, or nil

	baseFiles map[string]bool // the base's file keys
	// fills are, per file key, the values of the columns its schema
	// version lacks (versions.go).
	fills map[string]map[int][]parquet.Value
	// reads are, per file key, the schema a file whose version named
	// columns otherwise is read with, and renames what its rows list in
	// __unchanged (versions.go).
	reads              map[string]*parquet.Schema
	renames            map[string]map[string]string
	truncated          bool
	truncLSN, truncSeq int64
	tombstones         bool
	insertOnly         bool

	// pend is the next group's first version, or nil: the iterator's own
	// row, which stays valid until the iterator's next Next, and that is
	// only called once pend is folded.
	pend  parquet.Row
	eof   bool
	state foldState
	out   parquet.Row
	stats Stats
}

// Open reads mt's files from store and prepares the merge. The caller must
// Close the reader.
func Open(ctx context.Context, store blob.Store, mt *manifest.Table, opts Options) (*Reader, error) {
	if opts.ScratchDir == "" {
		return nil, errors.New("merge: no scratch directory")
	}
	table, err := mt.SourceTable()
	if err != nil {
		return nil, fmt.Errorf("merge %s: %w", mt.ID(), err)
	}
	schema, err := parquetfile.NewSchema(table)
	if err != nil {
		return nil, fmt.Errorf("merge %s: %w", mt.ID(), err)
	}
	baseFiles, deltaFiles, err := inputs(mt, opts.UpToEpoch)
	if err != nil {
		return nil, err
	}
	var keyCols []int
	for _, k := range table.PrimaryKey {
		i := table.ColumnIndex(k)
		if i < 0 {
			return nil, fmt.Errorf("merge %s: key column %q is not in schema version %d", table.ID, k, mt.SchemaVersion)
		}
		keyCols = append(keyCols, i)
	}
	if err := os.MkdirAll(opts.ScratchDir, 0o755); err != nil {
		return nil, fmt.Errorf("merge %s: scratch directory: %w", table.ID, err)
	}
	r := &Reader{
		table:      table,
		schema:     schema,
		order:      NewOrder(keyCols),
		names:      make(map[string]int, len(table.Columns)),
		tombstones: opts.Tombstones,
		insertOnly: len(keyCols) == 0,
		baseFiles:  make(map[string]bool, len(baseFiles)),
	}
	for _, f := range baseFiles {
		r.baseFiles[f] = true
	}
	if r.fills, err = versionFills(mt, schema, mt.CurrentSchema()); err != nil {
		return nil, err
	}
	if r.reads, err = readSchemas(mt, table); err != nil {
		return nil, err
	}
	if r.renames, err = unchangedRenames(mt, mt.CurrentSchema()); err != nil {
		return nil, err
	}
	for i, c := range table.Columns {
		r.names[c.Name] = i
	}
	r.state.init(schema)
	if mt.Base != nil && mt.Base.Truncate != nil {
		r.truncated, r.truncLSN, r.truncSeq = true, int64(mt.Base.Truncate.LSN), mt.Base.Truncate.Seq
	}
	budget := opts.MemoryBytes
	if budget <= 0 {
		budget = DefaultMemoryBytes
	}
	r.sorter = extsort.New(schema.Parquet(), r.order.Compare, opts.ScratchDir, budget)
	sortFiles := append(baseFiles, deltaFiles...)
	if opts.Visible == nil && baseInOrder(mt.Base, table.PrimaryKey) {
		// The stream's statistics come from the files' footers, which hold
		// every row's; with a Visible filter they must count only the rows
		// it keeps, so the base is then sorted like any input.
		if r.base, err = openBase(ctx, store, r, baseFiles, opts.ScratchDir); err != nil {
			r.Close()
			return nil, err
		}
		if r.base != nil {
			sortFiles = deltaFiles
		}
	}
	for _, f := range sortFiles {
		if err := r.load(ctx, store, f, opts); err != nil {
			r.Close()
			return nil, err
		}
	}
	r.stats.Files = len(baseFiles) + len(deltaFiles)
	r.stats.Runs = r.sorter.Runs()
	if r.base != nil {
		r.it, err = r.sorter.SortedWith(r.base)
	} else {
		r.it, err = r.sorter.Sorted()
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("merge %s: %w", table.ID, err)
	}
	return r, nil
}

// inputs lists the files to merge: the base's, then the deltas'.
func inputs(mt *manifest.Table, upTo *uint64) (base, deltas []string, err error) {
	if b := mt.Base; b != nil {
		if upTo != nil && b.Epoch > *upTo {
			return nil, nil, fmt.Errorf("table %s: epoch %d was folded into the base of epoch %d by compaction; the oldest state the manifest holds is as of epoch %d",
				mt.ID(), *upTo, b.Epoch, b.Epoch)
		}
		for _, f := range b.Files {
			base = append(base, f.Path)
		}
	}
	for _, d := range mt.Deltas {
		if upTo != nil && d.Epoch > *upTo {
			if d.First() <= *upTo {
				return nil, nil, fmt.Errorf("table %s: epoch %d was merged with epochs %d to %d by a minor compaction; ask for the state as of an LSN or a time instead (--as-of), or for epoch %d",
					mt.ID(), *upTo, d.First(), d.Epoch, d.Epoch)
			}
			continue
		}
		for _, f := range d.Files {
			deltas = append(deltas, f.Path)
		}
	}
	return base, deltas, nil
}

// load downloads one file to the scratch directory and adds its versions to
// the sort.
func (r *Reader) load(ctx context.Context, store blob.Store, key string, opts Options) error {
	local, err := blob.Download(ctx, store, key, opts.ScratchDir, "in-*.parquet")
	if err != nil {
		return fmt.Errorf("merge %s: %w", r.table.ID, err)
	}
	defer os.Remove(local)
	f, pr, err := r.openLocal(local, key)
	if err != nil {
		return err
	}
	defer f.Close()
	defer pr.Close()
	batch := make([]parquet.Row, 256)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := pr.ReadRows(batch)
		fills, renames := r.fills[key], r.renames[key]
		for _, row := range batch[:n] {
			if fills != nil {
				row = fillRow(row, fills)
			}
			if renames != nil {
				renameUnchanged(row, renames)
			}
			if err := r.add(row, key, opts); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("merge %s: read %s: %w", r.table.ID, key, err)
		}
		if n == 0 {
			return nil
		}
	}
}

func (r *Reader) add(row parquet.Row, key string, opts Options) error {
	keep, err := r.admit(row, key, opts)
	if err != nil || !keep {
		return err
	}
	if err := r.sorter.Add(row); err != nil {
		return fmt.Errorf("merge %s: %w", r.table.ID, err)
	}
	return nil
}

// admit checks one input row, counts it, and reports whether it is a
// version to merge (truncate markers and rows Visible rejects are not). It
// marks a base's versions for the fold (markBase).
func (r *Reader) admit(row parquet.Row, key string, opts Options) (bool, error) {
	if len(row) < parquetfile.FirstDataLeaf {
		return false, fmt.Errorf("merge %s: file %s holds a row of %d values", r.table.ID, key, len(row))
	}
	if opts.Visible != nil && !opts.Visible(row[parquetfile.LeafXID].Int64()) {
		r.stats.Filtered++
		return false, nil
	}
	lsn, seq := row[parquetfile.LeafLSN].Int64(), row[parquetfile.LeafSeq].Int64()
	r.stats.MaxLSN = max(r.stats.MaxLSN, lsn)
	r.stats.MaxOpTS = max(r.stats.MaxOpTS, row[parquetfile.LeafOpTS].Int64())
	switch op := opOf(row); op {
	case cdc.OpTruncate:
		r.stats.Truncates++
		if !r.truncated || lsn > r.truncLSN || (lsn == r.truncLSN && seq > r.truncSeq) {
			r.truncated, r.truncLSN, r.truncSeq = true, lsn, seq
		}
		return false, nil
	case cdc.OpInsert, cdc.OpUpdate, cdc.OpDelete:
		if r.insertOnly && op != cdc.OpInsert {
			return false, fmt.Errorf("merge %s: the table has no primary key but file %s holds a %c row at LSN %s: only insert-only tables can be merged without a key",
				r.table.ID, key, op, cdc.LSN(lsn))
		}
	default:
		return false, fmt.Errorf("merge %s: file %s holds a row with __op %q", r.table.ID, key, row[parquetfile.LeafOp].ByteArray())
	}
	if r.baseFiles[key] {
		markBase(row)
	}
	r.stats.Versions++
	return true, nil
}

// openLocal opens a downloaded input file for reading rows in the merge's
// schema.
func (r *Reader) openLocal(local, key string) (*os.File, *parquet.Reader, error) {
	f, err := os.Open(local)
	if err != nil {
		return nil, nil, fmt.Errorf("merge %s: %w", r.table.ID, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("merge %s: %w", r.table.ID, err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("merge %s: file %s: %w", r.table.ID, key, err)
	}
	if rs := r.reads[key]; rs != nil {
		// Renamed columns: read under the file's names, in the newest
		// layout.
		return f, parquet.NewReader(pf, rs), nil
	}
	if parquet.EqualNodes(pf.Schema(), r.schema.Parquet()) {
		return f, parquet.NewReader(pf), nil
	}
	// Written under another schema version: parquet-go maps columns by
	// name, and those the file lacks read as NULL.
	return f, parquet.NewReader(pf, r.schema.Parquet()), nil
}

// Schema returns the Parquet layout of the merged rows (the table's current
// schema version).
func (r *Reader) Schema() *parquetfile.Schema { return r.schema }

// Table returns the table as its current schema version describes it.
func (r *Reader) Table() *cdc.Table { return r.table }

// Order returns the order rows come in.
func (r *Reader) Order() Order { return r.order }

// Truncate returns the newest truncate marker seen (in the inputs, or folded
// into the base), which every reader of a base written from this merge must
// keep applying.
func (r *Reader) Truncate() *manifest.Position {
	if !r.truncated {
		return nil
	}
	return &manifest.Position{LSN: cdc.LSN(r.truncLSN), Seq: r.truncSeq}
}

// Stats returns what was read so far; Live and Deleted are final after Next
// returned io.EOF.
func (r *Reader) Stats() Stats { return r.stats }

// Next returns the next merged row, or io.EOF. The row is valid until the
// next call. Its __unchanged lists only columns whose value no version held.
func (r *Reader) Next() (parquet.Row, error) {
	for {
		if r.pend == nil {
			if r.eof {
				return nil, io.EOF
			}
			row, err := r.it.Next()
			if errors.Is(err, io.EOF) {
				r.eof = true
				return nil, io.EOF
			}
			if err != nil {
				return nil, fmt.Errorf("merge %s: %w", r.table.ID, err)
			}
			r.pend = row
		}
		r.state.reset(r.pend, r.order)
		r.apply(r.pend)
		r.pend = nil
		for {
			row, err := r.it.Next()
			if errors.Is(err, io.EOF) {
				r.eof = true
				break
			}
			if err != nil {
				return nil, fmt.Errorf("merge %s: %w", r.table.ID, err)
			}
			if r.sameGroup(row) {
				r.apply(row)
				continue
			}
			r.pend = row
			break
		}
		out, deleted := r.state.result(r.out[:0])
		switch {
		case out == nil:
			// Every version was older than a truncate.
		case deleted:
			r.stats.Deleted++
			if r.tombstones {
				r.out = out
				return out, nil
			}
		default:
			r.stats.Live++
			r.out = out
			return out, nil
		}
	}
}

// sameGroup reports whether row belongs to the group being folded: the same
// key, or without a key the same (__lsn, __seq).
func (r *Reader) sameGroup(row parquet.Row) bool {
	if r.insertOnly {
		return CompareVersion(row, r.state.key) == 0
	}
	return r.order.CompareKey(row, r.state.key) == 0
}

// apply folds one version into the group's state.
func (r *Reader) apply(row parquet.Row) {
	lsn, seq := row[parquetfile.LeafLSN].Int64(), row[parquetfile.LeafSeq].Int64()
	if r.truncated && (lsn < r.truncLSN || (lsn == r.truncLSN && seq < r.truncSeq)) {
		return // removed by the newest truncate
	}
	r.state.apply(row, r.names, r.order)
}

// Close releases the reader and removes its scratch files.
func (r *Reader) Close() error {
	if r.it != nil {
		r.it.Close()
	}
	var errs []error
	if r.base != nil {
		errs = append(errs, r.base.close())
	}
	if r.sorter != nil {
		errs = append(errs, r.sorter.Close())
	}
	return errors.Join(errs...)
}

// opOf returns a row's __op.
func opOf(row parquet.Row) cdc.Op {
	b := row[parquetfile.LeafOp].ByteArray()
	if len(b) != 1 {
		return 0
	}
	return cdc.Op(b[0])
}
