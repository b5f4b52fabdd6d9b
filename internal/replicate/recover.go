package replicate

import (
	"context"
	"fmt"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/flush"
)

// RowReader reads the current values of some columns of one row from the
// source, by primary key, in PostgreSQL's text form. The postgres adapter
// implements it.
type RowReader interface {
	// ReadRow returns the values of cols (column indexes) of the row whose
	// key columns hold key (in primary-key order), and whether it exists.
	ReadRow(ctx context.Context, t *cdc.Table, key []cdc.Datum, cols []int) ([]cdc.Datum, bool, error)
}

// write adds one committed change row to the epoch, first recovering the
// unchanged TOAST values of a key-changing UPDATE.
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
func (s *Service) write(ctx context.Context, e *flush.Epoch, meta cdc.RowMeta, c *cdc.Change) error {
	var lost []string
	if c.KeyChanged {
		var err error
		if lost, err = s.recoverUnchanged(ctx, c); err != nil {
			return err
		}
	}
	if err := s.checkEnumLabels(ctx, e, c); err != nil {
		return err
	}
	if err := e.Write(meta, c); err != nil {
		return err
	}
	s.countEvent(c.Table, c.Op)
	if tr := s.trackers[c.Table.ID]; tr != nil {
		if err := s.track(tr, meta, c); err != nil {
			return err
		}
	}
	if gen := s.shadow[c.Table.ID]; gen != "" {
		// A resnapshot builds the next generation: the change counts for it
		// too (its chunks are placed around it by visibility).
		if err := e.WriteTo(gen, meta, c); err != nil {
			return err
		}
	}
	for _, column := range lost {
		e.CountUnrecovered(c.Table, column)
	}
	return nil
}

// recoverUnchanged fills in c's unchanged values from the source and returns
// the names of the columns it could not fill.
func (s *Service) recoverUnchanged(ctx context.Context, c *cdc.Change) ([]string, error) {
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
	if s.rows == nil {
		return s.unrecovered(c, cols, "no source connection to read it from"), nil
	}
	key := make([]cdc.Datum, len(t.PrimaryKey))
	for i, name := range t.PrimaryKey {
		key[i] = c.Values[t.ColumnIndex(name)]
	}
	vals, found, err := s.rows.ReadRow(ctx, t, key, cols)
	if err != nil {
		return nil, fmt.Errorf("table %s: read unchanged TOAST values after a key change: %w", t.ID, err)
	}
	if !found {
		return s.unrecovered(c, cols, "the row no longer exists under its new key"), nil
	}
	for j, i := range cols {
		c.Values[i] = vals[j]
	}
	s.log.Debug("recovered unchanged TOAST values after a key change", "table", t.ID.String(), "columns", len(cols))
	return nil, nil
}

func (s *Service) unrecovered(c *cdc.Change, cols []int, why string) []string {
	names := make([]string, 0, len(cols))
	for _, i := range cols {
		name := c.Table.Columns[i].Name
		names = append(names, name)
		key := c.Table.ID.String() + "." + name
		if !s.warnedUnrecovered[key] {
			s.warnedUnrecovered[key] = true
			s.log.Warn("unchanged TOAST value after a key change could not be recovered; the column stays listed in __unchanged",
				"table", c.Table.ID.String(), "column", name, "reason", why)
		}
	}
	return names
}
