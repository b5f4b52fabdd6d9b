package parquetfile

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/icebergschema"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Names of the metadata columns (design.md §4), in file order.
const (
	ColOp        = "__op"
	ColLSN       = "__lsn"
	ColSeq       = "__seq"
	ColXID       = "__xid"
	ColOpTS      = "__op_ts"
	ColUnchanged = "__unchanged"
)

// Leaf column indexes of the metadata columns. __unchanged is a list whose
// single leaf is its element; the table's columns follow from firstDataLeaf.
const (
	leafOp = iota
	leafLSN
	leafSeq
	leafXID
	leafOpTS
	leafUnchanged
	firstDataLeaf
)

// Definition levels of __unchanged (optional list of required strings):
// 1 is an empty list, 2 is an element. 0 (a NULL list) is never written.
const (
	unchangedEmptyDef   = 1
	unchangedElementDef = 2
)

// PostgreSQL type OIDs with a typed mapping (pg_type.dat). Everything else is
// stored as its text form.
const (
	oidBool        = 16
	oidBytea       = 17
	oidChar        = 18
	oidName        = 19
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidOID         = 26
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidBPChar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestampTZ = 1184
	oidNumeric     = 1700
	oidUUID        = 2950
	oidJSONB       = 3802
)

// varhdrsz is PostgreSQL's VARHDRSZ, the offset numeric typmods are stored
// with.
const varhdrsz = 4

// maxDecimalPrecision is the widest DECIMAL that fits the 16-byte
// representation DuckDB, Spark and Iceberg readers accept.
const maxDecimalPrecision = 38

// converter turns one value's PostgreSQL text into a Parquet value. Bytes the
// value needs beyond text are appended to buf, and the grown buf is returned;
// the value may reference text or buf, so both must stay untouched until the
// row is handed to parquet-go. The error is a short reason; the caller adds
// the table, column and value.
type converter func(buf, text []byte) (parquet.Value, []byte, error)

// column is one table column's mapping.
type column struct {
	name        string
	pgType      string
	parquetType string
	key         bool         // part of the primary key
	node        parquet.Node // optional, with its field id
	conv        converter    // a scalar column's converter
	elem        converter    // an array column's element converter (conv is nil)
}

// Schema is the Parquet layout of one table: the metadata columns followed by
// the table's columns, each with its converter chosen once here so the write
// path only calls it.
type Schema struct {
	table  cdc.TableID
	cols   []column
	schema *parquet.Schema
	rep    reporter
	// iceberg is the Iceberg schema JSON the footer carries
	// (icebergschema.FooterKey); empty without field ids.
	iceberg string
}

// NewSchema maps every column of t. It fails when a column's name is empty,
// repeated, or taken by a metadata column, because the file could not hold
// both.
func NewSchema(t *cdc.Table) (*Schema, error) {
	if t == nil {
		return nil, fmt.Errorf("parquet schema: no table")
	}
	s := &Schema{table: t.ID, cols: make([]column, len(t.Columns))}
	seen := make(map[string]bool, len(t.Columns)+firstDataLeaf)
	fields := []parquet.Field{
		field{ColOp, parquet.FieldID(parquet.String(), icebergschema.FieldOp)},
		field{ColLSN, parquet.FieldID(parquet.Int(64), icebergschema.FieldLSN)},
		field{ColSeq, parquet.FieldID(parquet.Int(64), icebergschema.FieldSeq)},
		field{ColXID, parquet.FieldID(parquet.Int(64), icebergschema.FieldXID)},
		field{ColOpTS, parquet.FieldID(parquet.Timestamp(parquet.Microsecond), icebergschema.FieldOpTS)},
		field{ColUnchanged, parquet.FieldID(parquet.Optional(parquet.List(
			parquet.FieldID(parquet.String(), icebergschema.FieldUnchangedElement))), icebergschema.FieldUnchanged)},
	}
	for _, f := range fields {
		seen[f.Name()] = true
	}
	for i, c := range t.Columns {
		if c.Name == "" {
			return nil, fmt.Errorf("parquet schema of %s: column %d has no name", t.ID, i+1)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("parquet schema of %s: column name %q is used twice or is reserved for metadata", t.ID, c.Name)
		}
		seen[c.Name] = true
		col := mapColumn(c)
		col.key = slices.Contains(t.PrimaryKey, c.Name)
		s.cols[i] = col
		fields = append(fields, field{c.Name, col.node})
	}
	s.schema = parquet.NewSchema(schemaName(t.ID), orderedGroup(fields))
	// The footer's Iceberg schema (design.md §12); a table whose columns
	// have no field ids (none written by init lacks them) has none to map by.
	if is, err := icebergschema.Of(t.SchemaVersion, s.ManifestColumns(t)); err == nil {
		s.iceberg = string(is.JSON())
	}
	return s, nil
}

// schemaName is the root name written into the file; readers ignore it, so
// it only has to be readable.
func schemaName(id cdc.TableID) string {
	return strings.NewReplacer(".", "_", " ", "_").Replace(id.Schema + "_" + id.Name)
}

// mapColumn chooses the Parquet type and converter for one column: its
// override, else by the type its values have (a domain's base type). An
// array becomes a LIST of its element's mapping, except box[] (whose
// elements are separated by ';') and arrays of arrays' text forms, which
// stay text.
func mapColumn(c cdc.Column) column {
	col := column{name: c.Name, pgType: c.PGType}
	if col.pgType == "" {
		col.pgType = fmt.Sprintf("oid %d", c.TypeOID)
	}
	oid, mod := c.ValueType()
	elem := c.ElemTypeOID
	if elem == 0 {
		elem = builtinArrayElem[oid]
	}
	var leaf parquet.Node
	switch {
	case c.Repr == ReprString:
		leaf, col.parquetType, col.conv = parquet.String(), "STRING", convText
	case elem != 0 && elem != oidBox:
		// An array column's typmod is its element's (numeric(10,2)[]).
		el, name, conv := scalarMapping(elem, mod, len(c.EnumLabels) > 0)
		elNode := parquet.Optional(el)
		if c.FieldID > 0 {
			elNode = parquet.FieldID(elNode, icebergschema.ElementBase+c.FieldID)
		}
		leaf, col.parquetType, col.elem = parquet.List(elNode), "LIST<"+name+">", conv
	default:
		leaf, col.parquetType, col.conv = scalarMapping(oid, mod, len(c.EnumLabels) > 0)
	}
	col.node = parquet.Optional(leaf)
	if c.FieldID > 0 {
		col.node = parquet.FieldID(col.node, c.FieldID)
	}
	return col
}

func decimalName(p, s int) string { return fmt.Sprintf("DECIMAL(%d,%d)", p, s) }

// numericTypmod decodes numeric(p,s) from its typmod and reports whether it
// fits a Parquet DECIMAL: 1 ≤ p ≤ 38 and 0 ≤ s ≤ p. PostgreSQL 15 allows a
// negative scale and a scale above the precision; the scale is an 11-bit
// signed field, which also reads older servers' 0..1000 scales correctly.
func numericTypmod(typmod int32) (precision, scale int, ok bool) {
	if typmod < varhdrsz {
		return 0, 0, false
	}
	v := typmod - varhdrsz
	precision = int((v >> 16) & 0xffff)
	scale = int(((v & 0x7ff) ^ 1024) - 1024)
	if precision < 1 || precision > maxDecimalPrecision || scale < 0 || scale > precision {
		return 0, 0, false
	}
	return precision, scale, true
}

// Table returns the table the schema was built for.
func (s *Schema) Table() cdc.TableID { return s.table }

// NumColumns returns the number of table columns (metadata not counted).
func (s *Schema) NumColumns() int { return len(s.cols) }

// ParquetType returns a readable name of table column i's Parquet type, as
// the manifest records it: "INT64", "DECIMAL(12,3)", "TIMESTAMP(us,UTC)", ...
func (s *Schema) ParquetType(i int) string { return s.cols[i].parquetType }

// ManifestColumns describes the table's columns as a manifest schema version
// lists them. t must be the table the schema was built from.
func (s *Schema) ManifestColumns(t *cdc.Table) []manifest.Column {
	out := make([]manifest.Column, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = manifest.Column{
			Name:           c.Name,
			PGType:         c.PGType,
			ParquetType:    s.cols[i].parquetType,
			Nullable:       !c.NotNull,
			FieldID:        c.FieldID,
			TypeOID:        c.TypeOID,
			TypeMod:        c.TypeMod,
			ElementTypeOID: c.ElemTypeOID,
			EnumLabels:     append([]string(nil), c.EnumLabels...),
			Representation: c.Repr,
			AttNum:         c.AttNum,
		}
		if c.Missing != nil {
			v := *c.Missing
			out[i].MissingValue = &v
		}
		if c.BaseTypeOID != 0 && (c.BaseTypeOID != c.TypeOID || c.BaseTypeMod != c.TypeMod) {
			out[i].BaseTypeOID, out[i].BaseTypeMod = c.BaseTypeOID, c.BaseTypeMod
		}
	}
	return out
}

// field is a named node of an orderedGroup.
type field struct {
	name string
	parquet.Node
}

func (f field) Name() string { return f.name }

// Value is part of parquet.Field for writers that deconstruct Go structs;
// this package writes parquet.Row values and never reaches it.
func (f field) Value(base reflect.Value) reflect.Value {
	if base.Kind() == reflect.Map {
		return base.MapIndex(reflect.ValueOf(f.name))
	}
	return reflect.Value{}
}

// orderedGroup is a group node whose fields keep the order they were given
// in. parquet.Group is a map whose Fields() sorts by name, which would put
// "__lsn" after "__op" and the table's columns alphabetically.
type orderedGroup []parquet.Field

func (g orderedGroup) group() parquet.Group {
	m := make(parquet.Group, len(g))
	for _, f := range g {
		m[f.Name()] = f
	}
	return m
}

func (g orderedGroup) ID() int                     { return 0 }
func (g orderedGroup) String() string              { return g.group().String() }
func (g orderedGroup) Type() parquet.Type          { return g.group().Type() }
func (g orderedGroup) Optional() bool              { return false }
func (g orderedGroup) Repeated() bool              { return false }
func (g orderedGroup) Required() bool              { return true }
func (g orderedGroup) Leaf() bool                  { return false }
func (g orderedGroup) Fields() []parquet.Field     { return g }
func (g orderedGroup) Encoding() encoding.Encoding { return nil }
func (g orderedGroup) Compression() compress.Codec { return nil }
func (g orderedGroup) GoType() reflect.Type        { return g.group().GoType() }
