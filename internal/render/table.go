package render

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Leaf indexes of the metadata columns in internal/parquetfile's layout; the
// table's columns start at firstDataLeaf.
const (
	leafOp = iota
	leafLSN
	leafSeq
	leafXID
	leafOpTS
	leafUnchanged
	firstDataLeaf
)

// Definition levels of an array column, Optional(List(Optional(element))),
// and of __unchanged, Optional(List(element)).
const (
	listNullDef      = 0
	listEmptyDef     = 1
	listNullElemDef  = 2
	listElemDef      = 3
	unchangedElemDef = 2
)

// Type OIDs that decide how a STRING column is rendered.
const (
	oidInterval      = 1186
	oidIntervalArray = 1187
)

// kind is how one scalar value is rendered.
type kind uint8

const (
	kindBool kind = iota + 1
	kindInt
	kindFloat
	kindDouble
	kindDecimal
	kindString   // STRING, ENUM: the text as stored
	kindInterval // STRING holding an interval stored without its '+' signs
	kindJSON
	kindBinary
	kindUUID
	kindDate
	kindTime
	kindTimestamp
	kindTimestampTZ
)

// column is one table column's renderer.
type column struct {
	name  string
	ptype string // the manifest's ParquetType, for errors
	kind  kind
	scale int // DECIMAL
	list  bool
}

// Table renders the rows of one table. It is immutable after NewTable and
// safe for concurrent use.
type Table struct {
	cols  []column
	names []string
}

// NewTable prepares a renderer per column from the manifest's description
// of the table's columns, in table order. An unknown ParquetType is an error
// naming the column and the type.
func NewTable(cols []manifest.Column) (*Table, error) {
	t := &Table{cols: make([]column, len(cols)), names: make([]string, len(cols))}
	for i, c := range cols {
		pt := c.ParquetType
		col := column{name: c.Name, ptype: pt}
		if elem, ok := strings.CutPrefix(pt, "LIST<"); ok && strings.HasSuffix(elem, ">") {
			col.list, pt = true, strings.TrimSuffix(elem, ">")
		}
		k, scale, err := scalarKind(pt)
		if err != nil {
			return nil, fmt.Errorf("render column %q: parquet type %q: %w", c.Name, c.ParquetType, err)
		}
		if k == kindString && storesInterval(c, col.list) {
			k = kindInterval
		}
		col.kind, col.scale = k, scale
		t.cols[i], t.names[i] = col, c.Name
	}
	return t, nil
}

// scalarKind maps a Parquet type name, as internal/parquetfile records it
// in the manifest, to its renderer.
func scalarKind(pt string) (kind, int, error) {
	switch pt {
	case "BOOLEAN":
		return kindBool, 0, nil
	case "INT16", "INT32", "INT64":
		return kindInt, 0, nil
	case "FLOAT":
		return kindFloat, 0, nil
	case "DOUBLE":
		return kindDouble, 0, nil
	case "STRING", "ENUM":
		return kindString, 0, nil
	case "JSON":
		return kindJSON, 0, nil
	case "BINARY":
		return kindBinary, 0, nil
	case "UUID":
		return kindUUID, 0, nil
	case "DATE":
		return kindDate, 0, nil
	case "TIME(us)":
		return kindTime, 0, nil
	case "TIMESTAMP(us)":
		return kindTimestamp, 0, nil
	case "TIMESTAMP(us,UTC)":
		return kindTimestampTZ, 0, nil
	}
	if args, ok := strings.CutPrefix(pt, "DECIMAL("); ok {
		if args, ok = strings.CutSuffix(args, ")"); ok {
			ps, ss, _ := strings.Cut(args, ",")
			p, err1 := strconv.Atoi(ps)
			s, err2 := strconv.Atoi(ss)
			if err1 == nil && err2 == nil && p >= 1 && p <= 38 && s >= 0 && s <= p {
				return kindDecimal, s, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("unknown type")
}

// storesInterval reports whether a STRING column (or a LIST<STRING>'s
// element) holds intervals, which internal/parquetfile stores without the
// '+' signs PostgreSQL prints. The types: string override keeps the text as
// sent, so such a column is plain text.
func storesInterval(c manifest.Column, list bool) bool {
	if c.Representation != "" {
		return false
	}
	oid := c.TypeOID
	if c.BaseTypeOID != 0 {
		oid = c.BaseTypeOID
	}
	if list {
		if c.ElementTypeOID != 0 {
			return c.ElementTypeOID == oidInterval
		}
		if oid != 0 {
			return oid == oidIntervalArray
		}
		return strings.HasPrefix(c.PGType, "interval") && strings.HasSuffix(c.PGType, "[]")
	}
	if oid != 0 {
		return oid == oidInterval
	}
	return strings.HasPrefix(c.PGType, "interval") && !strings.HasSuffix(c.PGType, "[]")
}

// NumColumns returns the number of table columns.
func (t *Table) NumColumns() int { return len(t.cols) }

// Names returns the column names in table order. The slice is shared: do
// not modify it.
func (t *Table) Names() []string { return t.names }

// Split returns the values of each table column of row, in table order:
// sub-slices of row, not copies. A scalar column has one value; an array
// column one per element, or one for a NULL or empty array. dst is reused
// when it has the capacity. It fails when row does not have the layout of
// this table (firstDataLeaf metadata leaves, then one leaf per column, in
// leaf order).
func (t *Table) Split(row parquet.Row, dst [][]parquet.Value) ([][]parquet.Value, error) {
	dst = dst[:0]
	i := 0
	for i < len(row) && row[i].Column() < firstDataLeaf {
		i++
	}
	for c := range t.cols {
		leaf := firstDataLeaf + c
		j := i
		for j < len(row) && row[j].Column() == leaf {
			j++
		}
		if j == i {
			return dst, fmt.Errorf("render row: column %q (leaf %d) has no value", t.cols[c].name, leaf)
		}
		dst = append(dst, row[i:j:j])
		i = j
	}
	if i != len(row) {
		return dst, fmt.Errorf("render row: value for leaf %d beyond the table's %d columns", row[i].Column(), len(t.cols))
	}
	return dst, nil
}

// Meta is a row's metadata columns (design.md §4).
type Meta struct {
	Op        cdc.Op
	LSN       cdc.LSN
	Seq       int64
	XID       cdc.XID
	OpTS      time.Time // UTC
	Unchanged []string  // columns whose value was not sent (TOAST)
}

// ReadMeta decodes the metadata leaves of row.
func ReadMeta(row parquet.Row) (Meta, error) {
	var m Meta
	seen := 0
	for _, v := range row {
		col := v.Column()
		if col >= firstDataLeaf {
			break
		}
		if v.IsNull() && col != leafUnchanged {
			return m, fmt.Errorf("render row: metadata leaf %d is NULL", col)
		}
		var err error
		switch col {
		case leafOp:
			if v.Kind() != parquet.ByteArray || len(v.ByteArray()) != 1 {
				err = errKind
			} else {
				m.Op = cdc.Op(v.ByteArray()[0])
			}
		case leafLSN:
			var n int64
			n, err = int64Of(v)
			m.LSN = cdc.LSN(n)
		case leafSeq:
			m.Seq, err = int64Of(v)
		case leafXID:
			var n int64
			n, err = int64Of(v)
			m.XID = cdc.XID(n)
		case leafOpTS:
			var n int64
			n, err = int64Of(v)
			m.OpTS = time.UnixMicro(n).UTC()
		case leafUnchanged:
			if v.DefinitionLevel() == unchangedElemDef && v.Kind() == parquet.ByteArray {
				m.Unchanged = append(m.Unchanged, string(v.ByteArray()))
			}
		}
		if err != nil {
			return m, fmt.Errorf("render row: metadata leaf %d: %w", col, err)
		}
		seen |= 1 << col
	}
	if seen != 1<<firstDataLeaf-1 {
		return m, fmt.Errorf("render row: metadata leaves missing (have %06b)", seen)
	}
	return m, nil
}
