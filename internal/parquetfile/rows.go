package parquetfile

import (
	"fmt"

	"github.com/parquet-go/parquet-go"
)

// Leaf column indexes of the metadata columns in every file this package
// writes, for code that works on parquet.Row values directly (compaction,
// dump, verify). The table's columns follow from FirstDataLeaf, one leaf
// each (an array column's single leaf is its element).
const (
	LeafOp        = leafOp
	LeafLSN       = leafLSN
	LeafSeq       = leafSeq
	LeafXID       = leafXID
	LeafOpTS      = leafOpTS
	LeafUnchanged = leafUnchanged
	FirstDataLeaf = firstDataLeaf
)

// Parquet returns the file schema rows of this table are written with.
func (s *Schema) Parquet() *parquet.Schema { return s.schema }

// ColumnName returns table column i's name.
func (s *Schema) ColumnName(i int) string { return s.cols[i].name }

// IsList reports whether table column i is a LIST (an array column), whose
// leaf holds zero or more values per row.
func (s *Schema) IsList(i int) bool { return s.cols[i].elem != nil }

// UnchangedValue is the __unchanged element naming column name; rep is 0 for
// the list's first element and 1 after.
func UnchangedValue(name []byte, rep int) parquet.Value {
	return parquet.ByteArrayValue(name).Level(rep, unchangedElementDef, leafUnchanged)
}

// EmptyUnchanged is the __unchanged value of a row with no unchanged column.
func EmptyUnchanged() parquet.Value {
	return parquet.NullValue().Level(0, unchangedEmptyDef, leafUnchanged)
}

// NullColumn is table column i's NULL.
func NullColumn(i int) parquet.Value {
	return parquet.NullValue().Level(0, 0, firstDataLeaf+i)
}

// WriteRow appends a row that is already in this schema's leaf layout: a row
// read from a file of the same schema, or assembled from such rows. It is how
// compaction rewrites rows without converting them again; values are copied
// before it returns. Rule counting does not apply (the values were counted
// when they were first written).
func (w *Writer) WriteRow(row parquet.Row) error {
	if w.closed {
		return errClosed
	}
	if w.err != nil {
		return w.err
	}
	if w.probe {
		return fmt.Errorf("write row of %s: a pipelined writer takes rows through Write only", w.schema.table)
	}
	w.batch[0] = row
	_, err := w.pw.WriteRows(w.batch[:])
	w.batch[0] = nil
	if err != nil {
		w.err = wrapWrite(w, err)
		return w.err
	}
	w.rows++
	w.pending += RowBytes(row)
	if w.sinceChk++; w.sinceChk >= sizeCheckRows || w.pending >= sizeCheckBytes {
		w.sinceChk, w.pending = 0, 0
		if w.pw.Size()-w.flushed >= w.budget {
			return w.flush()
		}
	}
	return nil
}

// Size returns the bytes written to the output so far plus the buffered row
// group's compressed size: roughly what the file would hold if closed now.
func (w *Writer) Size() int64 {
	if w.pipe != nil {
		// The encoders commit row groups; rows still in a batch or in an
		// encoder's row group are not counted.
		w.pipe.commitMu.Lock()
		defer w.pipe.commitMu.Unlock()
	}
	return w.pw.Size()
}

// RowBytes is the size of row's byte-array data: what it holds beyond its
// fixed-size values.
func RowBytes(row parquet.Row) int {
	n := 0
	for _, v := range row {
		if k := v.Kind(); k == parquet.ByteArray || k == parquet.FixedLenByteArray {
			n += len(v.ByteArray())
		}
	}
	return n
}

// ColumnValues converts text, one value of table column i in PostgreSQL's
// text form (nil: NULL), into the column's leaf values as a row of this
// schema holds them. Readers use it for a column that a file's schema
// version lacks: its value for rows written before the column existed
// (manifest.Column.MissingValue). A value a documented rule changes is
// returned changed (docs/types.md); malformed text is an error.
func (s *Schema) ColumnValues(i int, text *string) ([]parquet.Value, error) {
	leaf := firstDataLeaf + i
	if text == nil {
		return []parquet.Value{parquet.NullValue().Level(0, 0, leaf)}, nil
	}
	c := &s.cols[i]
	b := []byte(*text)
	if c.elem != nil {
		row, _, _, err := appendList(nil, nil, b, c.elem, leaf)
		if err != nil {
			return nil, newValueError(s.table, c, b, err)
		}
		return row, nil
	}
	v, _, err := c.conv(nil, b)
	if err != nil {
		if _, ok := err.(*ruleApplied); !ok {
			return nil, newValueError(s.table, c, b, err)
		}
		if v.IsNull() {
			return []parquet.Value{parquet.NullValue().Level(0, 0, leaf)}, nil
		}
	}
	// The value may reference b, which nothing else holds.
	return []parquet.Value{v.Level(0, 1, leaf)}, nil
}
