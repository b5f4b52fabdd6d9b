package extsort

import "github.com/parquet-go/parquet-go"

// arenaChunk is the size of the slabs rows are copied into: a few large
// allocations instead of one per value keeps the garbage collector's work
// proportional to the budget, not to the number of rows.
const arenaChunk = 1 << 20

// Arena copies rows into shared slabs. A slab is never reallocated, so a row
// stays valid until Reset. The zero Arena is ready to use.
type Arena struct {
	values []parquet.Value
	bytes  []byte
}

// Clone copies row, byte arrays included, into the arena.
func (a *Arena) Clone(row parquet.Row) parquet.Row {
	if cap(a.values)-len(a.values) < len(row) {
		a.values = make([]parquet.Value, 0, max(arenaChunk/valueSize, len(row)))
	}
	start := len(a.values)
	a.values = append(a.values, row...)
	out := parquet.Row(a.values[start:len(a.values):len(a.values)])
	for i, v := range out {
		if k := v.Kind(); k != parquet.ByteArray && k != parquet.FixedLenByteArray {
			continue
		}
		b := v.ByteArray()
		if len(b) > arenaChunk/4 {
			// A large value gets its own allocation rather than wasting
			// most of a slab.
			out[i] = v.Clone()
			continue
		}
		if cap(a.bytes)-len(a.bytes) < len(b) {
			a.bytes = make([]byte, 0, arenaChunk)
		}
		off := len(a.bytes)
		a.bytes = append(a.bytes, b...)
		out[i] = withBytes(v, a.bytes[off:len(a.bytes):len(a.bytes)])
	}
	return out
}

// Reset forgets every row and reuses the current slabs: rows cloned before
// are overwritten by later clones, so the caller must be done with them.
func (a *Arena) Reset() { a.values, a.bytes = a.values[:0], a.bytes[:0] }

// withBytes returns v with its byte array replaced by b (same length),
// keeping its kind, levels and column index.
func withBytes(v parquet.Value, b []byte) parquet.Value {
	var nv parquet.Value
	if v.Kind() == parquet.FixedLenByteArray {
		nv = parquet.FixedLenByteArrayValue(b)
	} else {
		nv = parquet.ByteArrayValue(b)
	}
	return nv.Level(v.RepetitionLevel(), v.DefinitionLevel(), v.Column())
}
