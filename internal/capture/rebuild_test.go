package capture

import (
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

func rebuildManifest() *manifest.Manifest {
	file := func(p string) []manifest.File { return []manifest.File{{Path: p, Rows: 1}} }
	return &manifest.Manifest{
		Source: manifest.Source{SystemIdentifier: "1", Timeline: 1, Database: "app", Slot: "s", Publication: "p"},
		Epoch:  7, EndLSN: 0x500,
		Tables: map[string]*manifest.Table{
			"public.a": {Schema: "public", Name: "a", Generation: "g0001", SchemaVersion: 2,
				Schemas: []manifest.SchemaVersion{{Version: 1}, {Version: 2}},
				Base:    &manifest.Base{Files: file("public/a/g0001/base/00000003/part-00000.parquet")},
				Deltas:  []manifest.Delta{{Epoch: 5, Files: file("public/a/g0001/delta/00000005/part-00000.parquet")}}},
			// A re-snapshot had moved b ahead, and another is under way.
			"public.b": {Schema: "public", Name: "b", Generation: "g0002", SchemaVersion: 1,
				Schemas: []manifest.SchemaVersion{{Version: 1}},
				Base:    &manifest.Base{Files: file("public/b/g0002/base/00000000/part-00000.parquet")},
				Resnapshot: &manifest.Resnapshot{Generation: "g0003",
					Deltas: []manifest.Delta{{Epoch: 6, Files: file("public/b/g0003/delta/00000006/part-00000.parquet")}}}},
		},
	}
}

func TestRebuildGenerationIsAfterEveryLineage(t *testing.T) {
	m := rebuildManifest()
	if g, err := RebuildGeneration(m); err != nil || g != "g0004" {
		t.Fatalf("rebuildGeneration = %q, %v; want g0004 (after b's re-snapshot g0003)", g, err)
	}
	m.Tables["public.a"].Generation = "bad"
	if _, err := RebuildGeneration(m); err == nil {
		t.Fatal("a malformed generation was accepted")
	}
}

func TestRebuildSwitch(t *testing.T) {
	m := rebuildManifest()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tab := func(name string) *cdc.Table {
		return &cdc.Table{ID: cdc.TableID{Schema: "public", Name: name}, PrimaryKey: []string{"id"},
			Columns: []cdc.Column{{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", NotNull: true, FieldID: 1, AttNum: 1}}}
	}
	base := func(name string) *manifest.Base {
		return &manifest.Base{RowCount: 1, Files: []manifest.File{{Path: "public/" + name + "/g0004/base/00000000/part-00000.parquet", Rows: 1}}}
	}
	src := manifest.Source{SystemIdentifier: "2", Timeline: 3, Database: "app", Slot: "s", Publication: "p"}
	sw := rebuildSwitch{generation: "g0004", lsn: 0x900, snapTime: now, now: now, source: src,
		tables: []*rebuildTable{{source: tab("a"), base: base("a")}, {source: tab("b"), base: base("b")}}}
	if err := sw.apply(m); err != nil {
		t.Fatal(err)
	}
	if m.Epoch != 8 || m.EndLSN != 0x900 || m.Source != src {
		t.Errorf("epoch %d, end LSN %s, source %+v", m.Epoch, m.EndLSN, m.Source)
	}
	if h := m.History[len(m.History)-1]; h.Epoch != 8 || h.EndLSN != 0x900 {
		t.Errorf("history record %+v", h)
	}
	for _, name := range []string{"public.a", "public.b"} {
		mt := m.Tables[name]
		if mt.Generation != "g0004" || mt.Resnapshot != nil || len(mt.Deltas) != 0 || mt.Base.Epoch != 8 {
			t.Errorf("table %s after the switch: %+v", name, mt)
		}
	}
	if v := m.Tables["public.a"].SchemaVersion; v != 3 {
		t.Errorf("table a's schema version %d, want 3 (after its versions 1 and 2)", v)
	}
	retired := map[string]bool{}
	for _, g := range m.Garbage {
		retired[g.Path] = g.RetiredAt.Equal(now)
	}
	for _, p := range []string{"public/a/g0001/base/00000003/part-00000.parquet", "public/a/g0001/delta/00000005/part-00000.parquet",
		"public/b/g0002/base/00000000/part-00000.parquet", "public/b/g0003/delta/00000006/part-00000.parquet"} {
		if !retired[p] {
			t.Errorf("%s is not retired at the switch: garbage %+v", p, m.Garbage)
		}
	}
	if len(m.Garbage) != 4 {
		t.Errorf("garbage %+v, want the 4 old files", m.Garbage)
	}
}

func TestSlotState(t *testing.T) {
	m := &manifest.Manifest{EndLSN: 0x100}
	for _, c := range []struct {
		slot postgres.SlotInfo
		want string
	}{
		{postgres.SlotInfo{}, "missing"},
		{postgres.SlotInfo{Exists: true, WALStatus: "lost"}, "invalidated (wal_status lost)"},
		{postgres.SlotInfo{Exists: true, WALStatus: "reserved", ConfirmedFlushLSN: 0x200}, "confirmed at 0/200, past the manifest's end LSN 0/100"},
		{postgres.SlotInfo{Exists: true, WALStatus: "reserved", ConfirmedFlushLSN: 0x100}, "healthy (rebuilt on request)"},
	} {
		if got := SlotState(c.slot, m); got != c.want {
			t.Errorf("SlotState(%+v) = %q, want %q", c.slot, got, c.want)
		}
	}
}
