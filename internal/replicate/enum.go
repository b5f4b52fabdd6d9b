package replicate

import (
	"context"
	"fmt"
	"slices"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/flush"
)

// ALTER TYPE … ADD VALUE sends no Relation message: a new label first shows
// up as a value. Values are written as strings, so it never stops the
// stream; the manifest's enum_labels of the version are refreshed from the
// catalog, in place, in the next flush (labels only grow; a label is never
// removed from an enum). Only scalar enum columns are checked; an enum
// array's labels stay as recorded.

// enumColumns are a table version's scalar enum columns and the labels
// seen so far.
type enumColumns struct {
	cols  []int
	known []map[string]bool
}

func (s *Service) enumsOf(t *cdc.Table) *enumColumns {
	if ec, ok := s.enums[t]; ok {
		return ec
	}
	var ec *enumColumns
	for i, c := range t.Columns {
		if len(c.EnumLabels) == 0 || c.ElemTypeOID != 0 || c.Repr != "" {
			continue
		}
		if ec == nil {
			ec = &enumColumns{}
		}
		known := map[string]bool{}
		for _, l := range c.EnumLabels {
			known[l] = true
		}
		ec.cols, ec.known = append(ec.cols, i), append(ec.known, known)
	}
	s.enums[t] = ec
	return ec
}

// checkEnumLabels refreshes a version's labels when c holds one it does not
// list.
func (s *Service) checkEnumLabels(ctx context.Context, e *flush.Epoch, c *cdc.Change) error {
	ec := s.enumsOf(c.Table)
	if ec == nil {
		return nil
	}
	for k, i := range ec.cols {
		if i >= len(c.Values) || c.Values[i].Kind != cdc.DatumText || ec.known[k][string(c.Values[i].Text)] {
			continue
		}
		value := string(c.Values[i].Text)
		ec.known[k][value] = true
		if s.catalog == nil {
			continue
		}
		col := &c.Table.Columns[i]
		described, err := s.catalog.DescribeColumns(ctx, c.Table.OID, []string{col.Name})
		if err != nil {
			return fmt.Errorf("table %s column %q: read the labels of its enum: %w", c.Table.ID, col.Name, err)
		}
		if len(described) != 1 || !slices.Contains(described[0].EnumLabels, value) || len(described[0].EnumLabels) <= len(col.EnumLabels) {
			continue // changed again since; a later value refreshes it
		}
		col.EnumLabels = described[0].EnumLabels
		for _, l := range col.EnumLabels {
			ec.known[k][l] = true
		}
		e.UpdateEnumLabels(c.Table.ID, c.Table.SchemaVersion, col.FieldID, col.EnumLabels)
		s.log.Info("enum labels refreshed", "table", c.Table.ID.String(), "column", col.Name, "labels", len(col.EnumLabels))
	}
	return nil
}
