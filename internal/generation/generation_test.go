package generation

import (
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// prevTable: id (attnum 1, field 1), "amount" added by schema evolution
// (attnum 3, field 4), and field ids up to 4 used (a dropped column had 2,
// a retyped one 3).
func prevTable() *manifest.Table {
	return &manifest.Table{
		Schema: "public", Name: "t", Generation: "g0001", SchemaVersion: 3,
		Schemas: []manifest.SchemaVersion{
			{Version: 1, Columns: []manifest.Column{{Name: "id", FieldID: 1}, {Name: "gone", FieldID: 2}}},
			{Version: 2, Columns: []manifest.Column{{Name: "id", FieldID: 1}, {Name: "old", FieldID: 3, AttNum: 3}}},
			{Version: 3, Columns: []manifest.Column{{Name: "id", FieldID: 1, AttNum: 1}, {Name: "amount", FieldID: 4, AttNum: 3}}},
		},
	}
}

func discovered(cols ...cdc.Column) *cdc.Table {
	return &cdc.Table{ID: cdc.TableID{Schema: "public", Name: "t"}, Columns: cols, PrimaryKey: []string{"id"}}
}

func TestCarryFieldIDs(t *testing.T) {
	for _, c := range []struct {
		name string
		same bool
		cols []cdc.Column
		want []int
	}{
		// Discovery sets field id = attnum. A rename kept attnum 3.
		{"same upstream, renamed and added", true,
			[]cdc.Column{{Name: "id", FieldID: 1}, {Name: "amount_renamed", FieldID: 3}, {Name: "added", FieldID: 4}},
			[]int{1, 4, 5}},
		// Another server: attnums mean nothing, names do.
		{"new upstream", false,
			[]cdc.Column{{Name: "amount", FieldID: 2}, {Name: "id", FieldID: 5}, {Name: "other", FieldID: 6}},
			[]int{4, 1, 5}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab := discovered(c.cols...)
			attnums := make([]int, len(tab.Columns))
			for i, col := range tab.Columns {
				attnums[i] = col.FieldID
			}
			CarryFieldIDs(prevTable(), tab, c.same)
			for i, col := range tab.Columns {
				if col.FieldID != c.want[i] || col.AttNum != attnums[i] {
					t.Errorf("column %q: field id %d attnum %d, want field id %d attnum %d", col.Name, col.FieldID, col.AttNum, c.want[i], attnums[i])
				}
			}
		})
	}
	tab := discovered(cdc.Column{Name: "id", FieldID: 1})
	CarryFieldIDs(nil, tab, true)
	if tab.Columns[0].FieldID != 1 || tab.Columns[0].AttNum != 1 {
		t.Errorf("a table new to the manifest: %+v", tab.Columns[0])
	}
}

func TestTableIsTheNextGeneration(t *testing.T) {
	tab := discovered(cdc.Column{Name: "id", FieldID: 1, AttNum: 1, TypeOID: 20, TypeMod: -1, PGType: "bigint", NotNull: true})
	base := &manifest.Base{RowCount: 3, MaxLSN: 0x100, Files: []manifest.File{{Path: "public/t/g0002/base/00000000/part-00000.parquet", Rows: 3}}}
	nt, err := Table(prevTable(), tab, "g0002", base, 0x100, 9)
	if err != nil {
		t.Fatal(err)
	}
	if nt.Generation != "g0002" || nt.SchemaVersion != 4 || len(nt.Schemas) != 1 || nt.Schemas[0].Version != 4 || nt.Schemas[0].FromEpoch != 9 {
		t.Errorf("schema versions: current %d, %+v; want one version 4 from epoch 9", nt.SchemaVersion, nt.Schemas)
	}
	if nt.Base.Epoch != 9 || nt.Base.SchemaVersion != 4 || nt.Base.RowCount != 3 || base.Epoch != 0 {
		t.Errorf("base %+v (input %+v): want epoch 9, schema version 4, the input untouched", nt.Base, base)
	}
	if len(nt.Deltas) != 0 || nt.Snapshot.State != manifest.SnapshotComplete || nt.Snapshot.LSN != 0x100 {
		t.Errorf("deltas %v, snapshot %+v", nt.Deltas, nt.Snapshot)
	}
	first, err := Table(nil, tab, manifest.FirstGeneration, base, 0x100, 9)
	if err != nil || first.SchemaVersion != 1 {
		t.Errorf("a table new to the manifest: version %d, %v", first.SchemaVersion, err)
	}
}
