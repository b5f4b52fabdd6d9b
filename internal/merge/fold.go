package merge

import (
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/extsort"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// foldState holds one key's state while its versions are applied oldest
// first: the newest sent value of every column and the winning version.
// Its buffers are reused from key to key.
type foldState struct {
	schema *parquetfile.Schema
	names  [][]byte // column names, for __unchanged

	key    parquet.Row // the group's first version's metadata and key, for comparisons
	keyBuf parquet.Row
	keyA   extsort.Arena
	leaves []int // the key leaves in leaf order, as rows hold them
	seen   bool  // a version was applied
	prevL  int64 // (__lsn, __seq) of the last applied version
	prevS  int64
	prevB  bool // the last applied version is a base's row
	winner cdc.Op

	meta     [parquetfile.LeafUnchanged]parquet.Value // winner's __op … __op_ts
	opByte   [1]byte
	unsent   []int             // winner's __unchanged columns
	cols     [][]parquet.Value // newest sent values per column
	colBytes [][]byte          // bytes cols reference
	have     []bool            // cols[i] holds a sent value
	tomb     parquet.Row       // the winning D version
	tombA    extsort.Arena
}

func (s *foldState) init(schema *parquetfile.Schema) {
	n := schema.NumColumns()
	s.schema = schema
	s.names = make([][]byte, n)
	for i := range n {
		s.names[i] = []byte(schema.ColumnName(i))
	}
	s.cols = make([][]parquet.Value, n)
	s.colBytes = make([][]byte, n)
	s.have = make([]bool, n)
}

// reset starts a new group whose first version is first.
func (s *foldState) reset(first parquet.Row, o Order) {
	// Comparisons read the metadata leaves (one value each, at the front:
	// (__lsn, __seq) for a table without a key) and the key leaves: only
	// those are copied, not the whole row.
	if s.leaves == nil {
		s.leaves = slices.Sorted(slices.Values(o.keyLeaves))
	}
	s.keyBuf = append(s.keyBuf[:0], first[:parquetfile.LeafUnchanged]...)
	for _, leaf := range s.leaves {
		s.keyBuf = append(s.keyBuf, leafValues(first, leaf)...)
	}
	s.keyA.Reset()
	s.key = s.keyA.Clone(s.keyBuf)
	s.seen = false
	s.winner = 0
	s.unsent = s.unsent[:0]
	clear(s.have)
}

// apply folds row, the next version of the key in (__lsn, __seq) order.
//
// A base's row (see markBase) is not a change like the others: it is the
// fold of every version of its key up to its own, its unchanged columns
// already filled and the ones it still lists lost for good. So it starts
// over: older versions, which can only be replays of what the base folded,
// add nothing to it (their values may predate a delete the base no longer
// holds). And when a replay holds the change a base row came from, the two
// share (__lsn, __seq), and which comes first is the sort's business (a
// base sorted with the deltas takes any place among equal rows): the base's
// row is the one that counts, whichever it is.
func (s *foldState) apply(row parquet.Row, names map[string]int, _ Order) {
	lsn, seq := row[parquetfile.LeafLSN].Int64(), row[parquetfile.LeafSeq].Int64()
	op, base := foldOp(row)
	if s.seen && lsn == s.prevL && seq == s.prevS && (!base || s.prevB) {
		return // a replayed duplicate
	}
	s.seen, s.prevL, s.prevS, s.prevB = true, lsn, seq, base
	if base {
		clear(s.have)
	}
	s.winner = op
	s.opByte[0] = byte(op)
	s.meta[parquetfile.LeafOp] = parquet.ByteArrayValue(s.opByte[:]).Level(0, 0, parquetfile.LeafOp)
	for leaf := parquetfile.LeafLSN; leaf < parquetfile.LeafUnchanged; leaf++ {
		s.meta[leaf] = row[leaf]
	}
	if op == cdc.OpDelete {
		s.tombA.Reset()
		s.tomb = s.tombA.Clone(row)
		s.tomb[parquetfile.LeafOp] = opValue(op)
		// The row is gone: a later version of this key that leaves a value
		// unchanged is a key change into it (the only way PostgreSQL sends
		// an UPDATE of a key that was deleted), and the deleted row's values
		// are not its values.
		clear(s.have)
		return
	}
	s.unsent = s.unsent[:0]
	for _, v := range leafValues(row, parquetfile.LeafUnchanged) {
		if v.IsNull() {
			continue // the empty list
		}
		if i, ok := names[string(v.ByteArray())]; ok {
			s.unsent = append(s.unsent, i)
		}
	}
	for i := range s.cols {
		if containsInt(s.unsent, i) {
			continue
		}
		s.cols[i], s.colBytes[i] = copyValues(s.cols[i][:0], s.colBytes[i][:0], leafValues(row, parquetfile.FirstDataLeaf+i))
		s.have[i] = true
	}
}

// A base's rows go through the sort with their __op byte in lower case, so
// that the fold can tell them from the deltas' whatever their order among
// equal versions; the merge never returns a marked row. opBytes backs the one-byte values, so marking allocates nothing.
var opBytes = func() (b [256][1]byte) {
	for i := range b {
		b[i][0] = byte(i)
	}
	return b
}()

const baseMark = 'a' - 'A'

func opValue(op cdc.Op) parquet.Value {
	return parquet.ByteArrayValue(opBytes[byte(op)][:]).Level(0, 0, parquetfile.LeafOp)
}

// markBase marks row, an I, U or D row of a base.
func markBase(row parquet.Row) {
	row[parquetfile.LeafOp] = opValue(opOf(row) + baseMark)
}

// foldOp returns a version's __op and whether markBase marked it.
func foldOp(row parquet.Row) (op cdc.Op, base bool) {
	op = opOf(row)
	if op >= 'a' && op <= 'z' {
		return op - baseMark, true
	}
	return op, false
}

// result appends the group's outcome to dst: the merged row, or the winning
// delete (deleted true), or nil when no version was applied.
func (s *foldState) result(dst parquet.Row) (row parquet.Row, deleted bool) {
	if !s.seen {
		return nil, false
	}
	if s.winner == cdc.OpDelete {
		return append(dst, s.tomb...), true
	}
	dst = append(dst, s.meta[:]...)
	rep := 0
	for _, i := range s.unsent {
		if !s.have[i] {
			dst = append(dst, parquetfile.UnchangedValue(s.names[i], rep))
			rep = 1
		}
	}
	if rep == 0 {
		dst = append(dst, parquetfile.EmptyUnchanged())
	}
	for i := range s.cols {
		if s.have[i] {
			dst = append(dst, s.cols[i]...)
		} else {
			dst = append(dst, parquetfile.NullColumn(i))
		}
	}
	return dst, false
}

// copyValues copies src into dst, its byte arrays into buf, and returns both.
// buf is sized first, so the values never point into a buffer that a later
// append moved.
func copyValues(dst []parquet.Value, buf []byte, src []parquet.Value) ([]parquet.Value, []byte) {
	need := 0
	for _, v := range src {
		if k := v.Kind(); k == parquet.ByteArray || k == parquet.FixedLenByteArray {
			need += len(v.ByteArray())
		}
	}
	if cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	for _, v := range src {
		k := v.Kind()
		if k != parquet.ByteArray && k != parquet.FixedLenByteArray {
			dst = append(dst, v)
			continue
		}
		b := v.ByteArray()
		off := len(buf)
		buf = append(buf, b...)
		var nv parquet.Value
		if k == parquet.FixedLenByteArray {
			nv = parquet.FixedLenByteArrayValue(buf[off:len(buf):len(buf)])
		} else {
			nv = parquet.ByteArrayValue(buf[off:len(buf):len(buf)])
		}
		dst = append(dst, nv.Level(v.RepetitionLevel(), v.DefinitionLevel(), v.Column()))
	}
	return dst, buf
}

func containsInt(list []int, x int) bool {
	for _, v := range list {
		if v == x {
			return true
		}
	}
	return false
}
