package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// DescribeColumns reads the named columns of the table with OID rel from the
// catalog as it is now: types resolved as DiscoverTables resolves them,
// attnum, and Missing, the value rows that existed before the column was
// added read (pg_attribute.attmissingval, set by ADD COLUMN … DEFAULT with a
// non-volatile default; nil when there is none, and those rows read NULL).
// Columns are returned in the order of names; a name the table no longer
// has (dropped or renamed since) comes back with AttNum 0 and no type.
// VolatileDefault is set for a column whose default calls a volatile
// function and that has no missing value.
//
// The missing value is attmissingval's single element in text form, read
// under this adapter's session settings, so it has the form pgoutput sends
// for the same value. An array column with a missing value is refused: the
// element of a one-element array of arrays does not come out of the text
// cast used here.
func (db *DB) DescribeColumns(ctx context.Context, rel uint32, names []string) ([]cdc.Column, error) {
	var out []cdc.Column
	err := db.with(ctx, func(c *pgx.Conn) error {
		var err error
		out, err = describeColumns(ctx, c, rel, names)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("describe columns of relation %d on %s: %w", rel, db.server, err)
	}
	return out, nil
}

// describeColumns is DescribeColumns on connection c (which may be inside
// a transaction).
func describeColumns(ctx context.Context, c *pgx.Conn, rel uint32, names []string) ([]cdc.Column, error) {
	out := make([]cdc.Column, len(names))
	for i, n := range names {
		out[i].Name = n
	}
	// A default is volatile when its expression calls a volatile
	// function (the funcids of its node tree).
	rows, err := c.Query(ctx, `SELECT a.attname::text, a.atttypid, a.atttypmod, format_type(a.atttypid, a.atttypmod),
			a.attnotnull, a.attnum, a.atthasmissing, (a.attmissingval::text::text[])[1],
			coalesce((SELECT bool_or(p.provolatile = 'v')
				FROM pg_attrdef d, regexp_matches(d.adbin::text, ':funcid (\d+)', 'g') AS f(m)
				JOIN pg_proc p ON p.oid = f.m[1]::oid
				WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum), false)
		FROM pg_attribute a
		WHERE a.attrelid = $1 AND a.attname = ANY($2::text[]) AND a.attnum > 0 AND NOT a.attisdropped`, rel, names)
	if err != nil {
		return nil, fmt.Errorf("read columns: %w", err)
	}
	var (
		col        cdc.Column
		attnum     int16
		hasMissing bool
		missing    *string
		volatile   bool
	)
	byName := map[string]cdc.Column{}
	_, err = pgx.ForEachRow(rows, []any{&col.Name, &col.TypeOID, &col.TypeMod, &col.PGType, &col.NotNull, &attnum, &hasMissing, &missing, &volatile}, func() error {
		col.AttNum = int(attnum)
		col.VolatileDefault = volatile && !hasMissing
		col.Missing = nil
		if hasMissing && missing != nil {
			v := *missing
			col.Missing = &v
		}
		byName[col.Name] = col
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read columns: %w", err)
	}
	t := &cdc.Table{}
	for i, n := range names {
		if c, ok := byName[n]; ok {
			out[i] = c
		}
		t.Columns = append(t.Columns, out[i])
	}
	if err := resolveTypes(ctx, c, []*cdc.Table{onlyTyped(t)}); err != nil {
		return nil, fmt.Errorf("read column types: %w", err)
	}
	j := 0
	for i := range out {
		if out[i].AttNum == 0 {
			continue
		}
		out[i] = t.Columns[j]
		j++
		if out[i].ElemTypeOID != 0 && out[i].Missing != nil {
			return nil, fmt.Errorf("column %q: an array column added with a DEFAULT is not supported (its value for existing rows cannot be read)", out[i].Name)
		}
	}
	return out, nil
}

// onlyTyped keeps, in place, the columns the catalog had (AttNum set).
func onlyTyped(t *cdc.Table) *cdc.Table {
	kept := t.Columns[:0]
	for _, c := range t.Columns {
		if c.AttNum != 0 {
			kept = append(kept, c)
		}
	}
	t.Columns = kept
	return t
}
