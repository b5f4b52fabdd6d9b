package merge

import (
	"bytes"
	"cmp"
	"math"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// Order is the order rows are merged and bases are sorted in: by primary key
// (each key column's values in the order of compareValues), then by
// (__lsn, __seq). Without a key, by (__lsn, __seq) alone.
type Order struct {
	keyLeaves []int
}

// NewOrder returns the order of a table whose key columns are the table
// columns at keyCols (positions in table order).
func NewOrder(keyCols []int) Order {
	o := Order{}
	for _, c := range keyCols {
		o.keyLeaves = append(o.keyLeaves, parquetfile.FirstDataLeaf+c)
	}
	return o
}

// Compare orders a and b by key, then by (__lsn, __seq).
func (o Order) Compare(a, b parquet.Row) int {
	if c := o.CompareKey(a, b); c != 0 {
		return c
	}
	return CompareVersion(a, b)
}

// CompareKey orders a and b by key alone; without a key every row compares
// equal.
func (o Order) CompareKey(a, b parquet.Row) int {
	for _, leaf := range o.keyLeaves {
		av, bv := leafValues(a, leaf), leafValues(b, leaf)
		for i := 0; i < len(av) && i < len(bv); i++ {
			if c := compareValues(av[i], bv[i]); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(len(av), len(bv)); c != 0 {
			return c
		}
	}
	return 0
}

// HasKey reports whether the order has key columns.
func (o Order) HasKey() bool { return len(o.keyLeaves) > 0 }

// CompareVersion orders two versions by (__lsn, __seq).
func CompareVersion(a, b parquet.Row) int {
	if c := cmp.Compare(a[parquetfile.LeafLSN].Int64(), b[parquetfile.LeafLSN].Int64()); c != 0 {
		return c
	}
	return cmp.Compare(a[parquetfile.LeafSeq].Int64(), b[parquetfile.LeafSeq].Int64())
}

// leafValues returns the values of one leaf column in row. Rows hold their
// values in leaf order, and the metadata leaves before __unchanged hold
// exactly one value each, so the search starts there.
func leafValues(row parquet.Row, leaf int) []parquet.Value {
	i := 0
	if leaf >= parquetfile.LeafUnchanged {
		i = parquetfile.LeafUnchanged
	}
	for i < len(row) && row[i].Column() < leaf {
		i++
	}
	j := i
	for j < len(row) && row[j].Column() == leaf {
		j++
	}
	return row[i:j:j]
}

// compareValues is a total order on values of one column: NULL first, then by
// physical type. Byte arrays compare byte-wise (text in "C" collation
// order, uuid and bytea as PostgreSQL orders them); fixed-length byte arrays
// (DECIMAL) as big-endian two's complement numbers; floats numerically with
// -0 before +0 and NaN last, as a bit-exact total order must. Any consistent
// total order groups equal keys; this one also sorts most key types as
// PostgreSQL does.
func compareValues(a, b parquet.Value) int {
	an, bn := a.IsNull(), b.IsNull()
	switch {
	case an && bn:
		return 0
	case an:
		return -1
	case bn:
		return 1
	}
	if c := cmp.Compare(a.Kind(), b.Kind()); c != 0 {
		return c
	}
	switch a.Kind() {
	case parquet.Boolean:
		return cmp.Compare(b2i(a.Boolean()), b2i(b.Boolean()))
	case parquet.Int32:
		return cmp.Compare(a.Int32(), b.Int32())
	case parquet.Int64:
		return cmp.Compare(a.Int64(), b.Int64())
	case parquet.Float:
		return cmp.Compare(floatKey(float64(a.Float())), floatKey(float64(b.Float())))
	case parquet.Double:
		return cmp.Compare(floatKey(a.Double()), floatKey(b.Double()))
	case parquet.FixedLenByteArray:
		return compareSignedBigEndian(a.ByteArray(), b.ByteArray())
	default:
		return bytes.Compare(a.ByteArray(), b.ByteArray())
	}
}

// floatKey maps a float to an integer with the same order, -0 < +0 and NaN
// above +Inf (all NaN payloads equal).
func floatKey(f float64) int64 {
	if math.IsNaN(f) {
		return math.MaxInt64
	}
	bits := int64(math.Float64bits(f))
	if bits < 0 {
		bits = math.MinInt64 - bits - 1 // flip negatives so they order downwards
	}
	return bits
}

func compareSignedBigEndian(a, b []byte) int {
	if len(a) > 0 && len(b) > 0 {
		an, bn := a[0]&0x80 != 0, b[0]&0x80 != 0
		if an != bn {
			if an {
				return -1
			}
			return 1
		}
	}
	if c := cmp.Compare(len(a), len(b)); c != 0 {
		return c
	}
	return bytes.Compare(a, b)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
