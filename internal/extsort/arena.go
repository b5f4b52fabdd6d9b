package extsort

import "github.com/parquet-go/parquet-go"

// arenaChunk is the size of the slabs rows are copied into: a few large
// allocations instead of one per value keeps the garbage collector's work
// proportional to the budget, not to the number of rows.
const arenaChunk = 1 << 20

// Arena copies rows into shared slabs. A slab is never reallocated, so a row
// stays valid until Reset. The zero Arena is ready to use.
//
// Reset keeps the slabs and fills them again from the first: a sorter that
// spills run after run reuses the same memory instead of leaving a budget's
// worth of garbage per run (which the collector let grow to about twice the
// budget before reclaiming it).
type Arena struct {
	values [][]parquet.Value
	vi     int // the slab being filled
	bytes  [][]byte
	bi     int
	// big is set when a value got its own allocation: Reset then clears
	// the values, so stale ones past a slab's length do not keep it alive.
	big bool
}

// Clone copies row, byte arrays included, into the arena.
func (a *Arena) Clone(row parquet.Row) parquet.Row {
	vs := a.valueSlab(len(row))
	start := len(*vs)
	*vs = append(*vs, row...)
	out := parquet.Row((*vs)[start:len(*vs):len(*vs)])
	for i, v := range out {
		if k := v.Kind(); k != parquet.ByteArray && k != parquet.FixedLenByteArray {
			continue
		}
		b := v.ByteArray()
		if len(b) > arenaChunk/4 {
			// A large value gets its own allocation rather than wasting
			// most of a slab.
			out[i] = v.Clone()
			a.big = true
			continue
		}
		bs := a.byteSlab(len(b))
		off := len(*bs)
		*bs = append(*bs, b...)
		out[i] = withBytes(v, (*bs)[off:len(*bs):len(*bs)])
	}
	return out
}

// valueSlab returns a slab with room for n more values.
func (a *Arena) valueSlab(n int) *[]parquet.Value {
	for {
		if a.vi == len(a.values) {
			a.values = append(a.values, make([]parquet.Value, 0, max(arenaChunk/valueSize, n)))
		}
		s := &a.values[a.vi]
		if cap(*s)-len(*s) >= n {
			return s
		}
		if len(*s) == 0 {
			// Empty and still too small: only a row wider than a slab.
			*s = make([]parquet.Value, 0, n)
			return s
		}
		a.vi++
	}
}

// byteSlab returns a slab with room for n more bytes (n ≤ arenaChunk/4).
func (a *Arena) byteSlab(n int) *[]byte {
	for {
		if a.bi == len(a.bytes) {
			a.bytes = append(a.bytes, make([]byte, 0, arenaChunk))
		}
		s := &a.bytes[a.bi]
		if cap(*s)-len(*s) >= n {
			return s
		}
		a.bi++
	}
}

// Reset forgets every row and reuses the slabs: rows cloned before are
// overwritten by later clones, so the caller must be done with them.
func (a *Arena) Reset() {
	for i := range a.values[:min(a.vi+1, len(a.values))] {
		if a.big {
			clear(a.values[i])
		}
		a.values[i] = a.values[i][:0]
	}
	a.big = false
	for i := range a.bytes[:min(a.bi+1, len(a.bytes))] {
		a.bytes[i] = a.bytes[i][:0]
	}
	a.vi, a.bi = 0, 0
}

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
