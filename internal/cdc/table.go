package cdc

import (
	"fmt"
	"strings"
)

// TableID names a source table.
type TableID struct {
	Schema string
	Name   string
}

// ParseTableID parses "schema.table". An unqualified name is an error: the
// configuration always names the schema so that nothing is guessed. Either
// part may be quoted as PostgreSQL quotes it (public."Order Items",
// "my.schema".t, a "" inside quotes being one "), which is how a name
// holding a dot, a space or a quote is written; an unquoted part is taken
// as it is (not folded to lower case).
func ParseTableID(s string) (TableID, error) {
	parts, err := splitQualified(s)
	if err != nil || len(parts) != 2 {
		if err == nil {
			err = fmt.Errorf("want a schema-qualified name such as public.orders")
		}
		return TableID{}, fmt.Errorf("table %q: %w", s, err)
	}
	return TableID{Schema: parts[0], Name: parts[1]}, nil
}

// ParseColumnRef splits "schema.table.column" (a types: key of the
// configuration), each part plain or quoted as in ParseTableID.
func ParseColumnRef(s string) (schema, table, column string, err error) {
	parts, err := splitQualified(s)
	if err != nil || len(parts) != 3 {
		if err == nil {
			err = fmt.Errorf("want schema.table.column, such as public.orders.id")
		}
		return "", "", "", fmt.Errorf("%q: %w", s, err)
	}
	return parts[0], parts[1], parts[2], nil
}

// splitQualified splits a dotted name into its parts, each unquoted (no
// dot or quote in it) or double-quoted; no part may be empty.
func splitQualified(s string) ([]string, error) {
	var parts []string
	for i := 0; ; {
		var part string
		if i < len(s) && s[i] == '"' {
			var b strings.Builder
			for i++; ; i++ {
				if i >= len(s) {
					return nil, fmt.Errorf("a quoted name is not closed")
				}
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					i++
					break
				}
				b.WriteByte(s[i])
			}
			part = b.String()
		} else {
			j := i
			for j < len(s) && s[j] != '.' {
				if s[j] == '"' {
					return nil, fmt.Errorf("a quote inside an unquoted name: quote the whole part (\"My Table\")")
				}
				j++
			}
			part, i = s[i:j], j
		}
		if part == "" {
			return nil, fmt.Errorf("an empty part")
		}
		parts = append(parts, part)
		if i == len(s) {
			return parts, nil
		}
		if s[i] != '.' {
			return nil, fmt.Errorf("a quoted name must be followed by . or the end")
		}
		i++
	}
}

// String returns "schema.table", the key used in the manifest.
func (t TableID) String() string { return t.Schema + "." + t.Name }

// Quoted is the name as PostgreSQL (and tables.include) would write it:
// each part as it is when it is a plain lower-case identifier, in double
// quotes otherwise (public."Order Items", public."trailing "), so a
// message shows a capital, a dot or a trailing space.
func (t TableID) Quoted() string { return quoteIdent(t.Schema) + "." + quoteIdent(t.Name) }

func quoteIdent(s string) string {
	plain := s != "" && (s[0] == '_' || s[0] >= 'a' && s[0] <= 'z')
	for i := 0; plain && i < len(s); i++ {
		c := s[i]
		plain = c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
	}
	if plain {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// MetadataColumns are the names of the metadata columns every data file
// holds beside the table's own (design.md §4), in file order. A source column
// may not take one of these names, in any letter case (pg-cdc refuses such a
// table at init; see docs/decisions.md, "Identifiers in sink keys").
var MetadataColumns = []string{"__op", "__lsn", "__seq", "__xid", "__op_ts", "__unchanged"}

// ReplicaIdentity is a table's REPLICA IDENTITY setting.
type ReplicaIdentity string

const (
	ReplicaIdentityDefault ReplicaIdentity = "default"
	ReplicaIdentityFull    ReplicaIdentity = "full"
	ReplicaIdentityIndex   ReplicaIdentity = "index"
	ReplicaIdentityNothing ReplicaIdentity = "nothing"
)

// Column describes one source column as the catalog reports it.
type Column struct {
	Name    string
	TypeOID uint32
	TypeMod int32
	// PGType is format_type(oid, typmod): "numeric(12,3)", "timestamp with time zone".
	PGType  string
	NotNull bool
	// FieldID is the stable id of the column across renames (Iceberg field id).
	FieldID int

	// TypeOID above is what pgoutput's Relation message reports (the domain
	// itself for a domain column); the fields below describe what the
	// values are, for the Parquet mapping. Zero values mean "same as
	// TypeOID/TypeMod, no labels, no override" (older manifests).

	// BaseTypeOID and BaseTypeMod are the type after resolving domains.
	BaseTypeOID uint32
	BaseTypeMod int32
	// ElemTypeOID is the element type (domains resolved) when the base type
	// is an array, else 0.
	ElemTypeOID uint32
	// EnumLabels are the labels in sort order when the base type, or the
	// array's element type, is an enum.
	EnumLabels []string
	// Repr is a representation chosen by a per-column override (the
	// config's types: section), e.g. "string"; "" is the default mapping.
	Repr string

	// AttNum is the column's pg_attribute.attnum, which a rename keeps; 0
	// when unknown.
	AttNum int
	// Missing is the text form of the value rows that existed before the
	// column was added read (pg_attribute.attmissingval: the ADD COLUMN's
	// DEFAULT, which PostgreSQL applied without rewriting them or writing
	// WAL); nil reads NULL.
	Missing *string
	// VolatileDefault: the column's default calls a volatile function and
	// there is no missing value, which is what ADD COLUMN with such a
	// default leaves (the table was rewritten with a value per row, and no
	// WAL carries those values). Set only by a catalog description.
	VolatileDefault bool
}

// ValueType returns the type OID and typmod the values have: the base type
// of a domain, else TypeOID and TypeMod.
func (c *Column) ValueType() (uint32, int32) {
	if c.BaseTypeOID != 0 {
		return c.BaseTypeOID, c.BaseTypeMod
	}
	return c.TypeOID, c.TypeMod
}

// Table is a source table as pg-cdc captures it.
type Table struct {
	ID              TableID
	OID             uint32
	Columns         []Column
	PrimaryKey      []string // column names in key order; empty when the table has none
	ReplicaIdentity ReplicaIdentity
	// SchemaVersion is the manifest schema version these columns are; 0
	// before the table is in a manifest.
	SchemaVersion int
}

// InsertOnly reports whether the table is captured without a key: it has no
// primary key and no REPLICA IDENTITY FULL, so PostgreSQL rejects its UPDATE
// and DELETE and its rows are identified by (__lsn, __seq).
func (t *Table) InsertOnly() bool {
	return len(t.PrimaryKey) == 0 && t.ReplicaIdentity != ReplicaIdentityFull
}

// ColumnIndex returns the position of the named column, or -1.
func (t *Table) ColumnIndex(name string) int {
	for i, c := range t.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}
