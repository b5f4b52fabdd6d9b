package flush

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// uploadedEpoch is an epoch whose delta files are in the store: everything
// its manifest write needs, as plain data (no spool file, no clock).
type uploadedEpoch struct {
	// Record is the epoch's history entry: its number, end LSN, newest
	// commit time and the flush time.
	Record  manifest.EpochRecord
	Schemas []NewSchema
	Labels  []LabelUpdate
	// Deltas are the uploaded files, one per segment, in any order.
	Deltas []uploadedDelta
	// Also are the edits other components commit with the epoch
	// (Epoch.Also).
	Also []func(*manifest.Manifest) error
}

// uploadedDelta is one segment's delta file, uploaded under Key.
type uploadedDelta struct {
	Table cdc.TableID
	// Generation is the generation the rows are for; empty for the table's
	// current one (see segment).
	Generation string
	// SchemaVersion is the version the rows were written with; 0 stands
	// for the table's version in force.
	SchemaVersion    int
	Key              string
	Rows             int64
	Bytes            int64
	MinLSN           cdc.LSN
	MaxLSN           cdc.LSN
	Adjusted         map[string]int64
	UnrecoveredTOAST map[string]int64
}

// applyEpoch applies an uploaded epoch to m, in this order: the schema
// versions that start in it (a delta names the version it was written
// with, and both land in the one write), enum label updates, the deltas
// (to the table's current generation or to the generation its resnapshot
// is building), the epoch's Also edits, then the epoch number, end LSN and
// history record.
//
// It is the mutation of the flush's manifest commit and is pure apart from
// what the Also edits do: no I/O, no clock (the flush time is
// u.Record.FlushedAt), the same output for the same m and u, and u is not
// modified, so a CAS conflict can apply it again to the re-read manifest.
// On error m is left partly edited; Commit applies the mutation to a copy
// and discards it.
func applyEpoch(m *manifest.Manifest, u *uploadedEpoch) error {
	epoch := u.Record.Epoch
	if m.Epoch >= epoch {
		return fmt.Errorf("flush epoch %d: another writer committed epoch %d", epoch, m.Epoch)
	}
	if err := addSchemas(m, epoch, u.Schemas); err != nil {
		return err
	}
	updateEnumLabels(m, u.Labels)
	if err := addDeltas(m, epoch, u.Deltas); err != nil {
		return err
	}
	for _, fn := range u.Also {
		if err := fn(m); err != nil {
			return err
		}
	}
	m.Epoch = epoch
	m.EndLSN = max(m.EndLSN, u.Record.EndLSN)
	m.AppendHistory(u.Record)
	if u.Record.MaxCommitTime.After(m.FreshAsOf) {
		m.FreshAsOf = u.Record.MaxCommitTime
	}
	return nil
}

// addSchemas adds the schema versions that start in epoch.
func addSchemas(m *manifest.Manifest, epoch uint64, schemas []NewSchema) error {
	for _, ns := range schemas {
		t := m.Tables[ns.Table.String()]
		if t == nil {
			return fmt.Errorf("flush epoch %d: table %s vanished from the manifest", epoch, ns.Table)
		}
		if t.SchemaAt(ns.Version) != nil && ns.Version != 0 {
			return fmt.Errorf("flush epoch %d: table %s already has schema version %d", epoch, ns.Table, ns.Version)
		}
		// A copy of the columns: a label update below edits them in place,
		// and must not edit the epoch's own list.
		t.Schemas = append(t.Schemas, manifest.SchemaVersion{Version: ns.Version, FromEpoch: epoch, Columns: slices.Clone(ns.Columns)})
		t.SchemaVersion = max(t.SchemaVersion, ns.Version)
	}
	return nil
}

// updateEnumLabels writes grown enum label lists into the schema versions
// they belong to. Labels only ever grow: a shorter list is ignored, and so
// is an update for a table or version the manifest does not hold.
func updateEnumLabels(m *manifest.Manifest, labels []LabelUpdate) {
	for _, u := range labels {
		t := m.Tables[u.Table.String()]
		if t == nil || u.Version == 0 {
			continue
		}
		sv := t.SchemaAt(u.Version)
		if sv == nil {
			continue
		}
		for i := range sv.Columns {
			if c := &sv.Columns[i]; c.FieldID == u.FieldID && len(u.Labels) > len(c.EnumLabels) {
				c.EnumLabels = slices.Clone(u.Labels)
			}
		}
	}
}

// addDeltas lists the epoch's delta files in their tables. Uploads finish in
// any order; a table's deltas are listed in the order they were written,
// which their keys' part numbers give.
func addDeltas(m *manifest.Manifest, epoch uint64, deltas []uploadedDelta) error {
	sorted := slices.SortedFunc(slices.Values(deltas), func(a, b uploadedDelta) int { return strings.Compare(a.Key, b.Key) })
	for _, f := range sorted {
		t := m.Tables[f.Table.String()]
		if t == nil {
			return fmt.Errorf("flush epoch %d: table %s vanished from the manifest", epoch, f.Table)
		}
		version := f.SchemaVersion
		if version == 0 {
			version = t.SchemaVersion
		}
		d := manifest.Delta{
			Epoch: epoch, MinLSN: f.MinLSN, MaxLSN: f.MaxLSN, Rows: f.Rows,
			SchemaVersion:    version,
			Files:            []manifest.File{{Path: f.Key, Rows: f.Rows, Bytes: f.Bytes}},
			Adjusted:         maps.Clone(f.Adjusted),
			UnrecoveredTOAST: maps.Clone(f.UnrecoveredTOAST),
		}
		switch {
		case f.Generation == "" || f.Generation == t.Generation:
			t.Deltas = append(t.Deltas, d)
		case t.Resnapshot != nil && t.Resnapshot.Generation == f.Generation:
			t.Resnapshot.Deltas = append(t.Resnapshot.Deltas, d)
		default:
			return fmt.Errorf("flush epoch %d: table %s has no generation %s being built", epoch, f.Table, f.Generation)
		}
	}
	return nil
}
