// Package icebergschema is the Apache Iceberg schema of pg-cdc's data files
// (design.md §4.2, §12): the table's columns under their own field ids, the
// metadata columns and list elements under ids of their own, and the JSON
// form Iceberg's table metadata and the Parquet footer key "iceberg.schema"
// carry. It depends on no Iceberg library: the writer stamps footers with
// it, and the catalog publisher hands the same JSON to its Iceberg client.
package icebergschema

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// FooterKey is the Parquet key-value metadata key whose value is the file's
// Iceberg schema, as JSON: readers that map columns by it (rather than by
// name) resolve renamed columns.
const FooterKey = "iceberg.schema"

// Field ids outside the table columns' range. A table column's id is its
// attnum at init and one more than the highest ever used after that
// (design.md §4.2), so it stays far below ElementBase; Iceberg reserves the
// ids above 2147483447 for its own metadata columns, so these stay below.
const (
	// ElementBase + a LIST column's field id is its element's field id.
	ElementBase = 1_000_000_000

	FieldOp               = 2_000_000_001 // __op
	FieldLSN              = 2_000_000_002 // __lsn
	FieldSeq              = 2_000_000_003 // __seq
	FieldXID              = 2_000_000_004 // __xid
	FieldOpTS             = 2_000_000_005 // __op_ts
	FieldUnchanged        = 2_000_000_006 // __unchanged
	FieldUnchangedElement = 2_000_000_007 // __unchanged's element
)

// Schema is an Iceberg schema in its JSON form (the spec's "Schemas"
// appendix).
type Schema struct {
	Type     string  `json:"type"` // "struct"
	SchemaID int     `json:"schema-id"`
	Fields   []Field `json:"fields"`
}

// Field is one field of a struct.
type Field struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	Required bool   `json:"required"`
	// Type is a primitive's name ("long", "decimal(12,3)") or a *List.
	Type any    `json:"type"`
	Doc  string `json:"doc,omitempty"`
}

// List is a list type.
type List struct {
	Type            string `json:"type"` // "list"
	ElementID       int    `json:"element-id"`
	Element         any    `json:"element"`
	ElementRequired bool   `json:"element-required"`
}

// Metadata are the metadata columns as Iceberg fields, in file order
// (design.md §4.1).
func Metadata() []Field {
	return []Field{
		{ID: FieldOp, Name: "__op", Required: true, Type: "string", Doc: "I, U, D or T (truncate)"},
		{ID: FieldLSN, Name: "__lsn", Required: true, Type: "long", Doc: "commit LSN"},
		{ID: FieldSeq, Name: "__seq", Required: true, Type: "long", Doc: "place in the transaction"},
		{ID: FieldXID, Name: "__xid", Required: true, Type: "long", Doc: "transaction id, 64-bit"},
		{ID: FieldOpTS, Name: "__op_ts", Required: true, Type: "timestamptz", Doc: "commit time"},
		{ID: FieldUnchanged, Name: "__unchanged", Type: &List{Type: "list", ElementID: FieldUnchangedElement, Element: "string", ElementRequired: true},
			Doc: "columns whose unchanged TOAST value could not be filled"},
	}
}

// Of is the Iceberg schema of files written with a table's schema version
// id: the metadata columns, then cols. Every table column is optional, as
// in the files (a delete row holds only its key).
func Of(id int, cols []manifest.Column) (Schema, error) {
	s := Schema{Type: "struct", SchemaID: id, Fields: Metadata()}
	for _, c := range cols {
		if c.FieldID <= 0 || c.FieldID >= ElementBase {
			return Schema{}, fmt.Errorf("iceberg schema: column %q: field id %d outside 1..%d", c.Name, c.FieldID, ElementBase-1)
		}
		t, err := typeOf(c.ParquetType, c.FieldID)
		if err != nil {
			return Schema{}, fmt.Errorf("iceberg schema: column %q: %w", c.Name, err)
		}
		s.Fields = append(s.Fields, Field{ID: c.FieldID, Name: c.Name, Type: t})
	}
	return s, nil
}

// JSON is s as the footer key and table metadata hold it.
func (s Schema) JSON() []byte {
	b, err := json.Marshal(s)
	if err != nil { // strings, ints and *List only
		panic(fmt.Sprintf("icebergschema: %v", err))
	}
	return b
}

// typeOf maps a manifest column's Parquet type name (internal/parquetfile)
// to its Iceberg type; a LIST's element takes ElementBase + id.
func typeOf(parquetType string, id int) (any, error) {
	if inner, ok := strings.CutPrefix(parquetType, "LIST<"); ok && strings.HasSuffix(inner, ">") {
		el, err := primitive(strings.TrimSuffix(inner, ">"))
		if err != nil {
			return nil, err
		}
		return &List{Type: "list", ElementID: ElementBase + id, Element: el}, nil
	}
	return primitive(parquetType)
}

func primitive(parquetType string) (string, error) {
	switch parquetType {
	case "BOOLEAN":
		return "boolean", nil
	case "INT16", "INT32":
		return "int", nil
	case "INT64":
		return "long", nil
	case "FLOAT":
		return "float", nil
	case "DOUBLE":
		return "double", nil
	case "STRING", "ENUM", "JSON":
		// Iceberg v2 has no JSON or enum type: their text.
		return "string", nil
	case "BINARY":
		return "binary", nil
	case "DATE":
		return "date", nil
	case "TIME(us)":
		return "time", nil
	case "TIMESTAMP(us)":
		return "timestamp", nil
	case "TIMESTAMP(us,UTC)":
		return "timestamptz", nil
	case "UUID":
		return "uuid", nil
	}
	if ps, ok := strings.CutPrefix(parquetType, "DECIMAL("); ok && strings.HasSuffix(ps, ")") {
		p, s, ok := strings.Cut(strings.TrimSuffix(ps, ")"), ",")
		pi, err1 := strconv.Atoi(p)
		si, err2 := strconv.Atoi(s)
		if ok && err1 == nil && err2 == nil && pi >= 1 && pi <= 38 && si >= 0 && si <= pi {
			return fmt.Sprintf("decimal(%d, %d)", pi, si), nil
		}
	}
	return "", fmt.Errorf("parquet type %q has no Iceberg type", parquetType)
}
