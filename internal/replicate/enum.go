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

func (b *binder) enumsOf(t *cdc.Table) *enumColumns {
	if ec, ok := b.enums[t]; ok {
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
	b.enums[t] = ec
	return ec
}

// enumLabels returns the label updates to record when c holds a label its
// table version does not list (refreshed from the catalog): nil almost
// always.
func (b *binder) enumLabels(ctx context.Context, c *cdc.Change) ([]flush.LabelUpdate, error) {
	ec := b.enumsOf(c.Table)
	if ec == nil {
		return nil, nil
	}
	var updates []flush.LabelUpdate
	for k, i := range ec.cols {
		if i >= len(c.Values) || c.Values[i].Kind != cdc.DatumText || ec.known[k][string(c.Values[i].Text)] {
			continue
		}
		value := string(c.Values[i].Text)
		ec.known[k][value] = true
		if b.columns == nil {
			continue
		}
		col := &c.Table.Columns[i]
		described, err := b.columns.DescribeColumns(ctx, c.Table.OID, []string{col.Name})
		if err != nil {
			return nil, fmt.Errorf("table %s column %q: read the labels of its enum: %w", c.Table.ID, col.Name, err)
		}
		if len(described) != 1 || !slices.Contains(described[0].EnumLabels, value) || len(described[0].EnumLabels) <= len(col.EnumLabels) {
			continue // changed again since; a later value refreshes it
		}
		col.EnumLabels = described[0].EnumLabels
		for _, l := range col.EnumLabels {
			ec.known[k][l] = true
		}
		updates = append(updates, flush.LabelUpdate{Table: c.Table.ID, Version: c.Table.SchemaVersion, FieldID: col.FieldID, Labels: col.EnumLabels})
		b.log.Info("enum labels refreshed", "table", c.Table.ID.String(), "column", col.Name, "labels", len(col.EnumLabels))
	}
	return updates, nil
}
