package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// ReadRow reads the columns cols (indexes into t.Columns) of the row whose
// primary key holds key, in PostgreSQL's text output form: the same form
// COPY and pgoutput produce under this adapter's session settings. Key
// values are sent as text parameters, so the server parses them with the
// column types' own input functions. found is false when no row matches.
func (db *DB) ReadRow(ctx context.Context, t *cdc.Table, key []cdc.Datum, cols []int) ([]cdc.Datum, bool, error) {
	if _, _, err := rowQuery(t, "", key, cols); err != nil {
		return nil, false, fmt.Errorf("read row of %s: %w", t.ID, err)
	}
	var (
		out   []cdc.Datum
		found bool
	)
	err := db.with(ctx, func(c *pgx.Conn) error {
		from, err := db.rowSourceOf(ctx, c, t)
		if err != nil {
			return err
		}
		sql, params, err := rowQuery(t, from, key, cols)
		if err != nil {
			return err
		}
		out, found, err = queryRow(ctx, c.PgConn(), sql, params)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("read row of %s: %w", t.ID, err)
	}
	return out, found, nil
}

// rowSourceOf is t's rowSource. Whether a table is partitioned is read
// once per table OID and kept in db (an OID's relkind never changes: a
// table made partitioned is a new relation), so ReadRow, on the apply
// loop's TOAST recovery path, costs one round trip, not two. Without an
// OID, or when the OID is gone, it is looked up by name at each call.
func (db *DB) rowSourceOf(ctx context.Context, q rowQuerier, t *cdc.Table) (string, error) {
	if t.OID == 0 {
		return lookupRowSource(ctx, q, t.ID)
	}
	if p, ok := db.partitioned.Load(t.OID); ok {
		return rowSource(t.ID, p.(bool)), nil
	}
	var kind string
	err := q.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = $1", t.OID).Scan(&kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return lookupRowSource(ctx, q, t.ID)
	}
	if err != nil {
		return "", fmt.Errorf("read the kind of table %s: %w", t.ID, err)
	}
	db.partitioned.Store(t.OID, kind == "p")
	return rowSource(t.ID, kind == "p"), nil
}

// rowQuery is the SELECT from from (t's rowSource) of the columns cols of
// the row whose primary key holds key, with the key values as text
// parameters.
func rowQuery(t *cdc.Table, from string, key []cdc.Datum, cols []int) (string, [][]byte, error) {
	if len(t.PrimaryKey) == 0 || len(key) != len(t.PrimaryKey) {
		return "", nil, fmt.Errorf("need %d key values, got %d", len(t.PrimaryKey), len(key))
	}
	sel := make([]string, len(cols))
	for i, c := range cols {
		if c < 0 || c >= len(t.Columns) {
			return "", nil, fmt.Errorf("no column %d", c)
		}
		sel[i] = pgx.Identifier{t.Columns[c].Name}.Sanitize()
	}
	where := make([]string, len(key))
	params := make([][]byte, len(key))
	for i, name := range t.PrimaryKey {
		if key[i].Kind != cdc.DatumText {
			return "", nil, fmt.Errorf("key column %q has no value", name)
		}
		where[i] = pgx.Identifier{name}.Sanitize() + " = $" + strconv.Itoa(i+1)
		params[i] = key[i].Text
	}
	sql := "SELECT " + strings.Join(sel, ", ") + " FROM " + from +
		" WHERE " + strings.Join(where, " AND ")
	return sql, params, nil
}

// queryRow runs a rowQuery: at most one row, every value in text form.
func queryRow(ctx context.Context, c *pgconn.PgConn, sql string, params [][]byte) ([]cdc.Datum, bool, error) {
	var (
		out   []cdc.Datum
		found bool
	)
	// Unknown parameter types (OID 0) and text formats both ways: the
	// server infers each key's type from its column and returns every
	// value through the type's output function.
	res := c.ExecParams(ctx, sql, params, make([]uint32, len(params)), nil, nil)
	for res.NextRow() {
		if found {
			_, _ = res.Close()
			return nil, false, fmt.Errorf("more than one row for one primary key")
		}
		found = true
		for _, v := range res.Values() {
			if v == nil {
				out = append(out, cdc.Datum{Kind: cdc.DatumNull})
			} else {
				out = append(out, cdc.Datum{Kind: cdc.DatumText, Text: append([]byte(nil), v...)})
			}
		}
	}
	_, err := res.Close()
	return out, found, err
}
