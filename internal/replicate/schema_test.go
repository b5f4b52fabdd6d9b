package replicate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/merge"
	"github.com/pg-cdc/pg-cdc/internal/render"
)

// fakeCatalog describes columns by name; a name it does not hold comes back
// with AttNum 0 (dropped since).
type fakeCatalog map[string]cdc.Column

func (c fakeCatalog) DescribeColumns(_ context.Context, _ uint32, names []string) ([]cdc.Column, error) {
	out := make([]cdc.Column, len(names))
	for i, n := range names {
		out[i] = c[n]
		out[i].Name = n
	}
	return out, nil
}

func strptr(s string) *string { return &s }

func rel(cols ...relCol) []byte {
	return pgRelation(0, false, itemsOID, "public", "items", cols...)
}

var (
	colID = relCol{Key: true, Name: "id", TypeOID: oidInt8, TypeMod: -1}
	colV  = relCol{Name: "v", TypeOID: oidText, TypeMod: -1}
	colW  = relCol{Name: "w", TypeOID: oidInt4, TypeMod: -1}
)

func insert(vals ...string) []byte {
	cols := make([]col, len(vals))
	for i, v := range vals {
		if v == "null" {
			cols[i] = null
		} else {
			cols[i] = txt(v)
		}
	}
	return pgInsert(0, false, itemsOID, cols...)
}

// TestSchemaEvolution follows ADD COLUMN with a DEFAULT, DROP COLUMN (in
// the middle of a transaction, so one epoch writes the table under two
// versions), ADD of a dropped name again, and add + drop in one Relation,
// without a restart: each change is a new schema version committed with the
// epoch's deltas, field ids are never reused, and the merged state reads
// the recorded default for rows written before the column existed.
func TestSchemaEvolution(t *testing.T) {
	cat := fakeCatalog{
		"w": {TypeOID: oidInt4, TypeMod: -1, PGType: "integer", AttNum: 3, Missing: strptr("7")},
		"v": {TypeOID: oidText, TypeMod: -1, PGType: "text", AttNum: 4},
		"x": {TypeOID: oidText, TypeMod: -1, PGType: "text", AttNum: 5, Missing: strptr("hello world")},
		// v renamed: its attnum.
		"vv": {TypeOID: oidText, TypeMod: -1, PGType: "text", AttNum: 4},
	}
	h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}, catalog: cat})
	c := startLSN + 0x100
	next := func() cdc.LSN { c += 0x100; return c }

	// Epoch 1: version 1.
	c1 := next()
	h.push(tx(500, c1, rel(colID, colV), insert("1", "a"), insert("2", "b"))...)
	// Epoch 2: ADD COLUMN w int DEFAULT 7.
	c2 := next()
	h.push(tx(501, c2, rel(colID, colV, colW), insert("3", "c", "30"))...)
	// Epoch 3: one transaction writes under version 2, then DROP COLUMN v
	// arrives and it writes under version 3.
	c3 := next()
	h.push(tx(502, c3, insert("4", "d", "40"), rel(colID, colW), insert("5", "50"))...)
	h.waitFor("epoch 3 durable", func() bool { return h.manifest().EndLSN == endOf(c3) })
	m := h.manifest()
	mt := m.Tables["public.items"]
	if mt.SchemaVersion != 3 {
		t.Fatalf("schema version %d, want 3", mt.SchemaVersion)
	}
	checkVersions(t, mt, []string{
		"1@0: id#1 v#2",
		"2@2: id#1 v#2 w#3=7",
		"3@3: id#1 w#3=7",
	})
	checkDeltas(t, mt, []string{"1:v1:part-00000:2", "2:v2:part-00000:1", "3:v2:part-00000:1", "3:v3:part-00001:1"})
	checkMerged(t, h, mt, []string{"id=1 w=7", "id=2 w=7", "id=3 w=30", "id=4 w=40", "id=5 w=50"})

	// Epoch 4: v added again (a new column: a new field id, and the old
	// v's values are not its values), and in epoch 5 add x + drop w in one
	// Relation.
	c4 := next()
	h.push(tx(503, c4, rel(colID, colW, colV), insert("6", "60", "f"), pgUpdate(0, false, itemsOID, 0, nil, []col{txt("1"), txt("11"), null}))...)
	c5 := next()
	h.push(tx(504, c5, rel(colID, colV, relCol{Name: "x", TypeOID: oidText, TypeMod: -1}), insert("7", "g", "xx"))...)
	h.waitFor("epoch 5 durable", func() bool { return h.manifest().EndLSN == endOf(c5) })
	mt = h.manifest().Tables["public.items"]
	checkVersions(t, mt, []string{
		"1@0: id#1 v#2",
		"2@2: id#1 v#2 w#3=7",
		"3@3: id#1 w#3=7",
		"4@4: id#1 w#3=7 v#4",
		"5@5: id#1 v#4 x#5=hello world",
	})
	checkMerged(t, h, mt, []string{
		"id=1 v=null x=hello world", "id=2 v=null x=hello world", "id=3 v=null x=hello world",
		"id=4 v=null x=hello world", "id=5 v=null x=hello world", "id=6 v=f x=hello world", "id=7 v=g x=xx",
	})

	// Epoch 6: RENAME COLUMN v TO vv (recognised by attnum: the same field,
	// its values kept), in the middle of the column list.
	c6 := next()
	h.push(tx(505, c6, rel(colID, relCol{Name: "vv", TypeOID: oidText, TypeMod: -1}, relCol{Name: "x", TypeOID: oidText, TypeMod: -1}),
		insert("8", "h", "yy"))...)
	h.waitFor("epoch 6 durable", func() bool { return h.manifest().EndLSN == endOf(c6) })
	mt = h.manifest().Tables["public.items"]
	if got := mt.CurrentSchema(); got.Version != 6 || got.Columns[1].Name != "vv" || got.Columns[1].FieldID != 4 {
		t.Errorf("after the rename: version %d, column 2 %q field id %d; want 6, vv, 4", got.Version, got.Columns[1].Name, got.Columns[1].FieldID)
	}
	checkMerged(t, h, mt, []string{
		"id=1 vv=null x=hello world", "id=2 vv=null x=hello world", "id=3 vv=null x=hello world",
		"id=4 vv=null x=hello world", "id=5 vv=null x=hello world", "id=6 vv=f x=hello world", "id=7 vv=g x=xx",
		"id=8 vv=h x=yy",
	})
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaTypeChange: int → bigint and bigint → text are new versions of
// the same field; readers cast earlier files' values; a change readers
// cannot cast (text → int) stops with ErrSchemaChanged.
func TestSchemaTypeChange(t *testing.T) {
	cat := fakeCatalog{"w": {TypeOID: oidInt4, TypeMod: -1, PGType: "integer", AttNum: 3, Missing: strptr("7")}}
	h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}, catalog: cat})
	c1 := startLSN + 0x100
	h.push(tx(500, c1, rel(colID, colV), insert("1", "a"))...)
	c2 := c1 + 0x100
	h.push(tx(501, c2, rel(colID, colV, colW), insert("2", "b", "5"))...)
	c3 := c2 + 0x100
	w8 := relCol{Name: "w", TypeOID: oidInt8, TypeMod: -1}
	h.push(tx(502, c3, rel(colID, colV, w8), insert("3", "c", "5000000000"))...)
	h.waitFor("epoch 3 durable", func() bool { return h.manifest().EndLSN == endOf(c3) })
	mt := h.manifest().Tables["public.items"]
	checkVersions(t, mt, []string{"1@0: id#1 v#2", "2@2: id#1 v#2 w#3=7", "3@3: id#1 v#2 w#3=7"})
	if got := mt.CurrentSchema().Columns[2]; got.PGType != "bigint" || got.ParquetType != "INT64" {
		t.Errorf("w after the change: %s %s, want bigint INT64", got.PGType, got.ParquetType)
	}
	checkMerged(t, h, mt, []string{"id=1 v=a w=7", "id=2 v=b w=5", "id=3 v=c w=5000000000"})

	c4 := c3 + 0x100
	wt := relCol{Name: "w", TypeOID: oidText, TypeMod: -1}
	h.push(tx(503, c4, rel(colID, colV, wt), insert("4", "d", "four"))...)
	h.waitFor("epoch 4 durable", func() bool { return h.manifest().EndLSN == endOf(c4) })
	mt = h.manifest().Tables["public.items"]
	checkMerged(t, h, mt, []string{"id=1 v=a w=7", "id=2 v=b w=5", "id=3 v=c w=5000000000", "id=4 v=d w=four"})

	c5 := c4 + 0x100
	h.push(tx(504, c5, rel(colID, colV, colW), insert("5", "e", "5"))...)
	err := h.wait()
	if !errors.Is(err, cdc.ErrSchemaChanged) || !strings.Contains(err.Error(), `column "w" changed type`) {
		t.Errorf("text → int: %v, want ErrSchemaChanged naming the column", err)
	}
}

// TestEnumLabelAdded: ALTER TYPE … ADD VALUE sends no Relation; a value
// with the new label streams, and the version's enum_labels are refreshed
// from the catalog in the same flush.
func TestEnumLabelAdded(t *testing.T) {
	const oidMood = 70000
	cat := fakeCatalog{"v": {TypeOID: oidMood, TypeMod: -1, PGType: "mood", AttNum: 2, EnumLabels: []string{"sad", "great", "ok"}}}
	h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}, catalog: cat, manifest: func(m *manifest.Manifest) {
		c := &m.Tables["public.items"].Schemas[0].Columns[1]
		c.TypeOID, c.PGType, c.ParquetType, c.EnumLabels = oidMood, "mood", "ENUM", []string{"sad", "ok"}
	}})
	mood := relCol{Name: "v", TypeOID: oidMood, TypeMod: -1}
	c1 := startLSN + 0x100
	h.push(tx(500, c1, rel(colID, mood), insert("1", "ok"), insert("2", "great"))...)
	h.waitFor("epoch 1 durable", func() bool { return h.manifest().EndLSN == endOf(c1) })
	mt := h.manifest().Tables["public.items"]
	if got := mt.Schemas[0].Columns[1].EnumLabels; strings.Join(got, ",") != "sad,great,ok" {
		t.Errorf("enum labels %v, want [sad great ok]", got)
	}
	if len(mt.Schemas) != 1 {
		t.Errorf("%d schema versions, want 1 (labels are refreshed in place)", len(mt.Schemas))
	}
	checkMerged(t, h, mt, []string{"id=1 v=ok", "id=2 v=great"})
}

// TestSchemaReplayKeepsVersions: a transaction the manifest already holds,
// replayed after a restart with the schema it was written under, binds to
// that version instead of making a new one.
func TestSchemaReplayKeepsVersions(t *testing.T) {
	cat := fakeCatalog{"w": {TypeOID: oidInt4, TypeMod: -1, PGType: "integer", AttNum: 3}}
	h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}, catalog: cat})
	c1 := startLSN + 0x100
	h.push(tx(500, c1, rel(colID, colV), insert("1", "a"))...)
	c2 := c1 + 0x100
	h.push(tx(501, c2, rel(colID, colV, colW), insert("2", "b", "5"))...)
	h.waitFor("epoch 2 durable", func() bool { return h.manifest().EndLSN == endOf(c2) })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	// A new session over the same manifest, as after a crash before the
	// confirmation: both transactions come again.
	svc, err := New(h.svc.cfg, h.src, h.svc.committer, h.svc.log)
	if err != nil {
		t.Fatal(err)
	}
	h.src.push(tx(500, c1, rel(colID, colV), insert("1", "a"))...)
	h.src.push(tx(501, c2, rel(colID, colV, colW), insert("2", "b", "5"))...)
	c3 := c2 + 0x100
	h.src.push(tx(502, c3, insert("3", "c", "6"))...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	deadline := time.Now().Add(waitLimit)
	for h.manifest().EndLSN != endOf(c3) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mt := h.manifest().Tables["public.items"]
	checkVersions(t, mt, []string{"1@0: id#1 v#2", "2@2: id#1 v#2 w#3"})
	checkMerged(t, h, mt, []string{"id=1 v=a w=null", "id=2 v=b w=5", "id=3 v=c w=6"})
}

func checkVersions(t *testing.T, mt *manifest.Table, want []string) {
	t.Helper()
	var got []string
	for _, sv := range mt.Schemas {
		var cols []string
		for _, c := range sv.Columns {
			s := fmt.Sprintf("%s#%d", c.Name, c.FieldID)
			if c.MissingValue != nil {
				s += "=" + *c.MissingValue
			}
			cols = append(cols, s)
		}
		got = append(got, fmt.Sprintf("%d@%d: %s", sv.Version, sv.FromEpoch, strings.Join(cols, " ")))
	}
	equalRows(t, "schema versions", got, want)
}

func checkDeltas(t *testing.T, mt *manifest.Table, want []string) {
	t.Helper()
	var got []string
	for _, d := range mt.Deltas {
		for _, f := range d.Files {
			part := f.Path[strings.LastIndex(f.Path, "/")+1:]
			got = append(got, fmt.Sprintf("%d:v%d:%s:%d", d.Epoch, d.SchemaVersion, strings.TrimSuffix(part, ".parquet"), f.Rows))
		}
	}
	equalRows(t, "deltas (epoch:version:file:rows)", got, want)
}

// checkMerged merges the table's files as compact, dump and verify do and
// compares the rows, rendered as PostgreSQL text.
func checkMerged(t *testing.T, h *harness, mt *manifest.Table, want []string) {
	t.Helper()
	r, err := merge.Open(context.Background(), h.store, mt, merge.Options{ScratchDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rt, err := render.NewTable(mt.CurrentSchema().Columns)
	if err != nil {
		t.Fatal(err)
	}
	names := rt.Names()
	var got []string
	for {
		row, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		vals, err := rt.Split(row, nil)
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		for i, n := range names {
			text, isNull, err := rt.Text(i, vals[i])
			if err != nil {
				t.Fatal(err)
			}
			if isNull {
				text = "null"
			}
			parts = append(parts, n+"="+text)
		}
		got = append(got, strings.Join(parts, " "))
	}
	equalRows(t, "merged rows", got, want)
}
