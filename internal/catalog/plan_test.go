package catalog

import (
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// table is a manifest table with a snapshot (or compacted) base and deltas.
func table(compacted bool, base []string, deltas ...string) *manifest.Table {
	mt := &manifest.Table{Schema: "public", Name: "t", SchemaVersion: 1, PrimaryKey: []string{"id"},
		Schemas: []manifest.SchemaVersion{{Version: 1, Columns: []manifest.Column{{Name: "id", ParquetType: "INT64", FieldID: 1}}}}}
	mt.Base = &manifest.Base{}
	for _, p := range base {
		mt.Base.Files = append(mt.Base.Files, manifest.File{Path: p, Rows: 1})
	}
	if compacted {
		at := now
		mt.Base.CompactedAt, mt.Base.SortedBy = &at, []string{"id", "__lsn", "__seq"}
	}
	for i, p := range deltas {
		mt.Deltas = append(mt.Deltas, manifest.Delta{Epoch: uint64(i + 1), Files: []manifest.File{{Path: p, Rows: 1}}})
	}
	return mt
}

// key is the sink key of public.t's file of kind at epoch (part 0).
func key(kind string, epoch uint64) string {
	return manifest.FileKey(cdc.TableID{Schema: "public", Name: "t"}, "g0001", manifest.Kind(kind), epoch, 0)
}

func set(paths ...string) map[string]bool {
	out := map[string]bool{}
	for _, p := range paths {
		out[p] = true
	}
	return out
}

func paths(fs []manifest.File) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return strings.Join(out, ",")
}

func TestPlanChangelog(t *testing.T) {
	id := ChangelogIdent(DefaultPrefix, "public", "t")
	if id.String() != "pgcdc_changelog.public.t" {
		t.Errorf("ident %s", id)
	}
	const retention = time.Hour
	for _, c := range []struct {
		name       string
		mt         *manifest.Table
		garbage    []manifest.RetiredFile
		folds      []manifest.Fold
		folded     []manifest.RetiredFile // what the history says the folds after pub's version took
		pub        Published
		add, rm    string
		schema     bool
		wantSchema int
	}{
		{name: "first publication: the snapshot base and the deltas, and the schema",
			mt: table(false, []string{"b0"}, "d1", "d2"), add: "b0,d1,d2", schema: true},
		{name: "a new delta",
			mt: table(false, []string{"b0"}, "d1", "d2", "d3"), pub: Published{ManifestVersion: 3, SchemaID: 1, Files: set("b0", "d1", "d2")}, add: "d3"},
		{name: "a commit whose answer was lost plans to nothing",
			mt: table(false, []string{"b0"}, "d1"), pub: Published{ManifestVersion: 2, SchemaID: 1, Files: set("b0", "d1")}},
		{name: "a compaction: the compacted base is state, not changes; the folded files stay inside the retention",
			mt:      table(true, []string{"c5"}, "d6"),
			garbage: []manifest.RetiredFile{{Path: "b0", RetiredAt: now.Add(-time.Minute)}, {Path: "d1", RetiredAt: now.Add(-time.Minute)}},
			pub:     Published{ManifestVersion: 5, SchemaID: 1, Files: set("b0", "d1")}, add: "d6"},
		{name: "files retired longer ago than the retention leave",
			mt:      table(true, []string{"c5"}, "d6"),
			garbage: []manifest.RetiredFile{{Path: "b0", RetiredAt: now.Add(-2 * time.Hour)}, {Path: "d1", RetiredAt: now.Add(-time.Minute)}},
			pub:     Published{ManifestVersion: 6, SchemaID: 1, Files: set("b0", "d1", "d6")}, rm: "b0"},
		{name: "a publisher behind across a compaction: the change files it folded are added inside the retention",
			mt: func() *manifest.Table {
				mt := table(true, []string{key("base", 2)}, key("delta", 3))
				mt.Generation = "g0001"
				return mt
			}(),
			garbage: []manifest.RetiredFile{
				{Path: key("base", 0), RetiredAt: now.Add(-time.Minute)},                                         // the snapshot base
				{Path: key("delta", 1), RetiredAt: now.Add(-time.Minute)},                                        // published
				{Path: key("delta", 2), RetiredAt: now.Add(-time.Minute)},                                        // folded before it was published
				{Path: key("delta", 2), RetiredAt: now.Add(-time.Minute)},                                        // listed twice: added once
				{Path: key("base", 1), RetiredAt: now.Add(-time.Minute)},                                         // a compacted base: state, not changes
				{Path: "public/other/g0001/delta/00000002/part-00000.parquet", RetiredAt: now.Add(-time.Minute)}, // another table's
				{Path: "public/t/g0002/delta/00000002/part-00000.parquet", RetiredAt: now.Add(-time.Minute)},     // another generation's
				{Path: "public/t/g0001/delta/00000001/part-00001.parquet", RetiredAt: now.Add(-2 * time.Hour)},   // past the retention
			},
			pub: Published{ManifestVersion: 4, SchemaID: 1, Files: set(key("delta", 1))},
			add: key("delta", 3) + "," + key("base", 0) + "," + key("delta", 2)},
		{name: "a minor compaction: the merged file replaces the published files it merged, in one commit",
			mt: func() *manifest.Table {
				mt := table(false, []string{key("base", 0)})
				mt.Generation = "g0001"
				mt.Deltas = []manifest.Delta{{Epoch: 3, FromEpoch: 1, Level: 1, Files: []manifest.File{{Path: "m1-3", Rows: 3}}}}
				return mt
			}(),
			// The merged files are not in garbage (the merged delta retires them).
			pub: Published{ManifestVersion: 4, SchemaID: 1, Files: set(key("base", 0), key("delta", 1), key("delta", 2))},
			add: "m1-3", rm: key("delta", 1) + "," + key("delta", 2)},
		{name: "a merged file a major compaction folded before it was published stands for the files it merged",
			mt: func() *manifest.Table {
				mt := table(true, []string{key("base", 4)})
				mt.Generation = "g0001"
				return mt
			}(),
			garbage: []manifest.RetiredFile{
				{Path: "public/t/g0001/delta/00000002/from-00000001-part-00000.parquet", RetiredAt: now.Add(-time.Minute)},
			},
			pub: Published{ManifestVersion: 4, SchemaID: 1, Files: set(key("delta", 1))},
			add: "public/t/g0001/delta/00000002/from-00000001-part-00000.parquet", rm: key("delta", 1)},
		{name: "a fold keeps the published files it holds inside the retention",
			mt: func() *manifest.Table {
				mt := table(true, []string{key("base", 5)}, key("delta", 6))
				mt.Generation = "g0001"
				return mt
			}(),
			folds: []manifest.Fold{{Prefix: "public/t/g0001/", From: 0, Through: 5, RetiredAt: now.Add(-time.Minute), Version: 5}},
			pub:   Published{ManifestVersion: 6, SchemaID: 1, Files: set(key("base", 0), key("delta", 1), key("delta", 5))},
			add:   key("delta", 6)},
		{name: "the files of a fold past the retention leave",
			mt: func() *manifest.Table {
				mt := table(true, []string{key("base", 5)}, key("delta", 6))
				mt.Generation = "g0001"
				return mt
			}(),
			folds: []manifest.Fold{{Prefix: "public/t/g0001/", From: 0, Through: 5, RetiredAt: now.Add(-2 * time.Hour), Version: 5}},
			pub:   Published{ManifestVersion: 7, SchemaID: 1, Files: set(key("base", 0), key("delta", 1), key("delta", 5), key("delta", 6))},
			rm:    key("base", 0) + "," + key("delta", 1) + "," + key("delta", 5)},
		{name: "a publisher behind a fold adds the change files the history says it took",
			mt: func() *manifest.Table {
				mt := table(true, []string{key("base", 5)}, key("delta", 6))
				mt.Generation = "g0001"
				return mt
			}(),
			folds: []manifest.Fold{{Prefix: "public/t/g0001/", From: 0, Through: 5, RetiredAt: now.Add(-time.Minute), Version: 5}},
			folded: []manifest.RetiredFile{
				{Path: key("delta", 1), RetiredAt: now.Add(-time.Minute)}, // published
				{Path: key("delta", 4), RetiredAt: now.Add(-time.Minute)}, // folded before it was published
			},
			pub: Published{ManifestVersion: 3, SchemaID: 1, Files: set(key("base", 0), key("delta", 1))},
			add: key("delta", 6) + "," + key("delta", 4)},
		{name: "a file the manifest no longer lists at all leaves",
			mt: table(false, nil, "d7"), pub: Published{ManifestVersion: 6, SchemaID: 1, Files: set("gone", "d7")}, rm: "gone"},
		{name: "a new schema version",
			mt: func() *manifest.Table {
				mt := table(false, nil, "d1")
				mt.SchemaVersion = 2
				mt.Schemas = append(mt.Schemas, manifest.SchemaVersion{Version: 2, Columns: []manifest.Column{
					{Name: "id", ParquetType: "INT64", FieldID: 1}, {Name: "v", ParquetType: "STRING", FieldID: 2}}})
				return mt
			}(), pub: Published{ManifestVersion: 1, SchemaID: 1, Files: set("d1")}, schema: true, wantSchema: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &manifest.Manifest{Version: 9, Tables: map[string]*manifest.Table{"public.t": c.mt}, Garbage: c.garbage, Folds: c.folds}
			got, err := PlanChangelog(id, "public.t", m, c.pub, now, retention, c.folded)
			if err != nil {
				t.Fatal(err)
			}
			if paths(got.Add) != c.add || strings.Join(got.Remove, ",") != c.rm || (got.Schema != nil) != c.schema {
				t.Errorf("add %q remove %q schema %v; want add %q remove %q schema %v", paths(got.Add), strings.Join(got.Remove, ","), got.Schema != nil, c.add, c.rm, c.schema)
			}
			if c.wantSchema != 0 && got.Schema != nil && got.Schema.SchemaID != c.wantSchema {
				t.Errorf("schema id %d, want %d", got.Schema.SchemaID, c.wantSchema)
			}
			if got.Summary[SummaryManifestVersion] != "9" || VersionOf(got.Summary) != 9 {
				t.Errorf("summary %v", got.Summary)
			}
			if got.Empty() != (c.add == "" && c.rm == "" && !c.schema) {
				t.Errorf("Empty() = %v", got.Empty())
			}
		})
	}
	if _, err := PlanChangelog(id, "public.nope", &manifest.Manifest{Version: 3}, Published{}, now, retention, nil); err == nil || !strings.Contains(err.Error(), "public.nope") {
		t.Errorf("unknown table: %v", err)
	}
}
