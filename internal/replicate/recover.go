package replicate

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// RowReader reads the current values of some columns of one row from the
// source, by primary key, in PostgreSQL's text form. The postgres adapter
// implements it.
type RowReader interface {
	// ReadRow returns the values of cols (column indexes) of the row whose
	// key columns hold key (in primary-key order), and whether it exists.
	ReadRow(ctx context.Context, t *cdc.Table, key []cdc.Datum, cols []int) ([]cdc.Datum, bool, error)
}

// toastRecovery fills in the unchanged TOAST values of a key-changing
// UPDATE.
//
// PostgreSQL does not send a TOASTed value that an UPDATE left alone. For an
// ordinary UPDATE the merge takes it from the key's previous version; after a
// key change there is none, so the value is read from the source by the new
// key. The transaction is committed by now (rows reach the epoch only at
// commit), so the row is visible. A later change of that value is later in
// the stream and wins over the value read here, so the current state is
// exact. When the row is gone (deleted or moved again since), the column
// stays listed in __unchanged, the case is counted and logged: the merged
// state of that key holds no value for it until a later change writes one.
type toastRecovery struct {
	rows   RowReader // nil: nothing is recovered
	log    *slog.Logger
	warned map[string]bool // "schema.table.column" logged once; counts go to the manifest
}

// recover fills in c's unchanged values from the source and returns the
// names of the columns it could not fill.
func (r *toastRecovery) recover(ctx context.Context, c *cdc.Change) ([]string, error) {
	var cols []int
	for i, v := range c.Values {
		if v.Kind == cdc.DatumUnchanged {
			cols = append(cols, i)
		}
	}
	if len(cols) == 0 {
		return nil, nil
	}
	t := c.Table
	if r.rows == nil {
		return r.unrecovered(c, cols, "no source connection to read it from"), nil
	}
	key := make([]cdc.Datum, len(t.PrimaryKey))
	for i, name := range t.PrimaryKey {
		key[i] = c.Values[t.ColumnIndex(name)]
	}
	vals, found, err := r.rows.ReadRow(ctx, t, key, cols)
	if err != nil {
		return nil, fmt.Errorf("table %s: read unchanged TOAST values after a key change: %w", t.ID, err)
	}
	if !found {
		return r.unrecovered(c, cols, "the row no longer exists under its new key"), nil
	}
	for j, i := range cols {
		c.Values[i] = vals[j]
	}
	r.log.Debug("recovered unchanged TOAST values after a key change", "table", t.ID.String(), "columns", len(cols))
	return nil, nil
}

func (r *toastRecovery) unrecovered(c *cdc.Change, cols []int, why string) []string {
	names := make([]string, 0, len(cols))
	for _, i := range cols {
		name := c.Table.Columns[i].Name
		names = append(names, name)
		key := c.Table.ID.String() + "." + name
		if !r.warned[key] {
			r.warned[key] = true
			r.log.Warn("unchanged TOAST value after a key change could not be recovered; the column stays listed in __unchanged",
				"table", c.Table.ID.String(), "column", name, "reason", why)
		}
	}
	return names
}
