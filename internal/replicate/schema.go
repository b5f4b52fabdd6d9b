package replicate

import (
	"context"
	"fmt"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/pgoutput"
)

// unsupported is a schema change this version does not follow: terminal
// (cdc.ErrSchemaChanged), unlike a failure to read the catalog.
type unsupported struct{ error }

func unsupportedf(format string, a ...any) error { return unsupported{fmt.Errorf(format, a...)} }

// relationDiff is how a Relation message's columns differ from a table's.
type relationDiff struct {
	kept    []int // per Relation column: the table column it is, or -1 (added)
	added   []int // Relation column indexes that are new
	dropped []int // table column indexes the Relation no longer has
	retyped []int // Relation column indexes whose type changed (readable)
}

func (d relationDiff) same() bool {
	return len(d.added) == 0 && len(d.dropped) == 0 && len(d.retyped) == 0
}

// Type OIDs a type change may involve (pg_type.dat).
const (
	typInt2    = 21
	typInt4    = 23
	typInt8    = 20
	typText    = 25
	typVarchar = 1043
)

// typeNames are format_type of the types a column may change to.
var typeNames = map[uint32]string{typInt4: "integer", typInt8: "bigint", typText: "text", typVarchar: "character varying"}

// readableTypeChange reports whether a column of type old may change to
// type oid (typmod mod) with readers casting its earlier values: the
// change must be lossless, and PostgreSQL's cast of every earlier value
// must be exactly what the reader's cast gives, because ALTER COLUMN TYPE
// rewrites the table without decoded WAL. So: integer widening (int2 →
// int4/int8, int4 → int8), and integers, varchar and text to unconstrained
// text or varchar (an integer's text cast is its output form; bool, bpchar,
// floats and dates are not, and a USING clause can be anything).
func readableTypeChange(old cdc.Column, oid uint32, mod int32) bool {
	from, _ := old.ValueType()
	if old.ElemTypeOID != 0 || len(old.EnumLabels) > 0 {
		return false
	}
	switch oid {
	case typInt4:
		return from == typInt2 && mod == -1
	case typInt8:
		return (from == typInt2 || from == typInt4) && mod == -1
	case typText, typVarchar:
		return mod == -1 && (from == typInt2 || from == typInt4 || from == typInt8 || from == typText || from == typVarchar)
	}
	return false
}

// diffRelation compares a Relation message with t by column name. It
// accepts what PostgreSQL produces for ADD COLUMN and DROP COLUMN: the
// surviving columns in their order, with unchanged types, then the added
// ones (pgoutput sends columns in attnum order, and a new column has the
// highest attnum). A changed type, or a new name before a surviving column
// (a rename), is an unsupported change. Whether an added name is really a
// renamed dropped column is for the caller to ask the catalog.
func diffRelation(t *cdc.Table, r *pgoutput.Relation) (relationDiff, error) {
	d := relationDiff{kept: make([]int, len(r.Columns))}
	seen := make([]bool, len(t.Columns))
	last := -1
	for i, c := range r.Columns {
		j := t.ColumnIndex(c.Name)
		d.kept[i] = j
		if j < 0 {
			d.added = append(d.added, i)
			continue
		}
		want := t.Columns[j]
		switch {
		case len(d.added) > 0:
			return d, unsupportedf("column %q follows the new column %q (a new column comes last; a renamed one was not recognised)",
				c.Name, r.Columns[d.added[0]].Name)
		case j < last:
			return d, unsupportedf("column %q moved before column %q", c.Name, t.Columns[last].Name)
		case c.TypeOID != want.TypeOID || c.TypeMod != want.TypeMod:
			if !readableTypeChange(want, c.TypeOID, c.TypeMod) {
				return d, unsupportedf("column %q changed type from %s to type oid %d mod %d, which readers cannot cast earlier values to exactly (followed: integer widening, integers and text to text)",
					c.Name, want.PGType, c.TypeOID, c.TypeMod)
			}
			d.retyped = append(d.retyped, i)
		}
		seen[j], last = true, j
	}
	for j, ok := range seen {
		if !ok {
			d.dropped = append(d.dropped, j)
		}
	}
	for _, j := range d.dropped {
		for _, k := range t.PrimaryKey {
			if t.Columns[j].Name == k {
				return d, unsupportedf("key column %q was dropped", k)
			}
		}
	}
	return d, nil
}

// evolve returns the next schema version of t for Relation r, whose
// columns differ from t's as d says: surviving columns keep their field id,
// attnum and missing value; added columns take new field ids from
// *fieldHigh up, and their type details and missing value from the catalog.
// A Relation that renames a column (an added name whose attnum is a dropped
// column's) is refused: renames are not followed yet, and guessing drop +
// add would lose the column's history.
func evolve(ctx context.Context, cat ColumnDescriber, t *cdc.Table, r *pgoutput.Relation, d relationDiff, fieldHigh *int) (*cdc.Table, error) {
	var described []cdc.Column
	if len(d.added) > 0 {
		if cat == nil {
			return nil, unsupportedf("no catalog connection to describe the added columns")
		}
		names := make([]string, len(d.added))
		for k, i := range d.added {
			names[k] = r.Columns[i].Name
		}
		var err error
		if described, err = cat.DescribeColumns(ctx, r.RelID, names); err != nil {
			return nil, fmt.Errorf("describe added columns: %w", err)
		}
		if len(described) != len(names) {
			return nil, fmt.Errorf("describe added columns: %d columns for %d names", len(described), len(names))
		}
		for _, c := range described {
			if c.VolatileDefault {
				// PostgreSQL rewrote the table with a value per row (no WAL
				// carries them); NULL for the earlier rows would be wrong.
				return nil, unsupportedf("column %q was added with a volatile default: its values for earlier rows were never streamed (resnapshot the table)", c.Name)
			}
			for _, j := range d.dropped {
				if c.AttNum != 0 && c.AttNum == t.Columns[j].AttNum {
					// renames found it first; reaching here means the catalog
					// changed between the two reads.
					return nil, fmt.Errorf("column %q was renamed to %q while the change was being read", t.Columns[j].Name, c.Name)
				}
			}
		}
	}
	nt := &cdc.Table{
		ID: t.ID, OID: t.OID,
		PrimaryKey:      append([]string(nil), t.PrimaryKey...),
		ReplicaIdentity: t.ReplicaIdentity,
		SchemaVersion:   t.SchemaVersion + 1,
	}
	for i, rc := range r.Columns {
		if j := d.kept[i]; j >= 0 {
			c := t.Columns[j]
			if c.TypeOID != rc.TypeOID || c.TypeMod != rc.TypeMod {
				// A readable type change (diffRelation): the same field,
				// a built-in type, no domain, labels or element.
				c.TypeOID, c.TypeMod, c.PGType = rc.TypeOID, rc.TypeMod, typeNames[rc.TypeOID]
				c.BaseTypeOID, c.BaseTypeMod, c.ElemTypeOID, c.EnumLabels = 0, 0, 0, nil
			}
			nt.Columns = append(nt.Columns, c)
			continue
		}
		var c cdc.Column
		for k, a := range d.added {
			if a == i {
				c = described[k]
			}
		}
		if c.AttNum == 0 || c.TypeOID != rc.TypeOID || c.TypeMod != rc.TypeMod {
			// Dropped or changed again since this Relation was sent: the
			// catalog no longer describes it. Its values are what the
			// stream says; a later Relation brings the later change.
			c = cdc.Column{Name: rc.Name, AttNum: c.AttNum, Missing: c.Missing}
			c.PGType = fmt.Sprintf("oid %d", rc.TypeOID)
		}
		c.Name, c.TypeOID, c.TypeMod = rc.Name, rc.TypeOID, rc.TypeMod
		*fieldHigh++
		c.FieldID = *fieldHigh
		nt.Columns = append(nt.Columns, c)
	}
	return nt, nil
}

// renames recognises renamed columns through the catalog: a name the
// Relation has and t does not, whose attnum is that of a column of t the
// Relation no longer names, is that column renamed (pgoutput sends names
// only; a rename is never guessed from names or positions). It returns t
// with those columns renamed (field id, attnum and missing value kept) and
// the renames as "old → new"; t itself when there are none.
func renames(ctx context.Context, cat ColumnDescriber, t *cdc.Table, r *pgoutput.Relation) (*cdc.Table, []string, error) {
	var unknown []string
	names := map[string]bool{}
	for _, c := range r.Columns {
		names[c.Name] = true
		if t.ColumnIndex(c.Name) < 0 {
			unknown = append(unknown, c.Name)
		}
	}
	var gone []int
	for j, c := range t.Columns {
		if !names[c.Name] {
			gone = append(gone, j)
		}
	}
	if len(unknown) == 0 || len(gone) == 0 {
		return t, nil, nil
	}
	if cat == nil {
		return nil, nil, unsupportedf("no catalog connection to tell renamed columns from dropped and added ones")
	}
	described, err := cat.DescribeColumns(ctx, r.RelID, unknown)
	if err != nil {
		return nil, nil, fmt.Errorf("describe new column names: %w", err)
	}
	var out *cdc.Table
	var renamed []string
	for _, c := range described {
		for _, j := range gone {
			if c.AttNum == 0 || c.AttNum != t.Columns[j].AttNum {
				continue
			}
			for _, k := range t.PrimaryKey {
				if k == t.Columns[j].Name {
					return nil, nil, unsupportedf("key column %q was renamed to %q; renaming a key column is not followed", k, c.Name)
				}
			}
			if out == nil {
				cp := *t
				cp.Columns = append([]cdc.Column(nil), t.Columns...)
				out = &cp
			}
			renamed = append(renamed, fmt.Sprintf("%q → %q", out.Columns[j].Name, c.Name))
			out.Columns[j].Name = c.Name
		}
	}
	if out == nil {
		return t, nil, nil
	}
	return out, renamed, nil
}

// describeChange says what a new schema version changed, for the log.
func describeChange(t, nt *cdc.Table, d relationDiff, renamed []string) string {
	parts := append([]string(nil), renamed...)
	for _, i := range d.added {
		c := nt.Columns[i]
		def := "NULL"
		if c.Missing != nil {
			def = *c.Missing
		}
		parts = append(parts, fmt.Sprintf("added %q (%s, field id %d, existing rows read %s)", c.Name, c.PGType, c.FieldID, def))
	}
	for _, j := range d.dropped {
		parts = append(parts, fmt.Sprintf("dropped %q", t.Columns[j].Name))
	}
	for _, i := range d.retyped {
		parts = append(parts, fmt.Sprintf("%q changed type from %s to %s", nt.Columns[i].Name, t.Columns[d.kept[i]].PGType, nt.Columns[i].PGType))
	}
	return strings.Join(parts, "; ")
}
