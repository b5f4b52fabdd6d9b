package iceberg_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// evolveRow is a change row of TestSchemaEvolution: its op and LSN, and a
// text value per column of the table's current schema ("" is NULL).
type evolveRow struct {
	op   cdc.Op
	lsn  int
	vals []string
}

// writeEvolve puts a delta file of rows in the table's current schema and
// commits it as one version.
func (s *sink) writeEvolve(rows []evolveRow) *manifest.Manifest {
	s.t.Helper()
	ps, err := parquetfile.NewSchema(s.tbl)
	if err != nil {
		s.t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, ps)
	for i, r := range rows {
		var vals []cdc.Datum
		for _, v := range r.vals {
			d := cdc.Datum{Kind: cdc.DatumText, Text: []byte(v)}
			if v == "" {
				d = cdc.Datum{Kind: cdc.DatumNull}
			}
			vals = append(vals, d)
		}
		if err := w.Write(cdc.RowMeta{Op: r.op, LSN: cdc.LSN(r.lsn), Seq: int64(i), XID: cdc.XID(r.lsn), CommitTime: s.now}, vals); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		s.t.Fatal(err)
	}
	s.n++
	path := fmt.Sprintf("public/t/g0001/delta/%d/part-00000.parquet", s.n)
	if err := s.store.Put(context.Background(), path, bytes.NewReader(buf.Bytes())); err != nil {
		s.t.Fatal(err)
	}
	f := manifest.File{Path: path, Rows: int64(len(rows)), Bytes: int64(buf.Len())}
	return s.commit(func(m *manifest.Manifest, mt *manifest.Table) {
		for _, r := range rows {
			m.EndLSN = max(m.EndLSN, cdc.LSN(r.lsn))
		}
		mt.Deltas = append(mt.Deltas, manifest.Delta{Epoch: m.Epoch + 1, SchemaVersion: mt.SchemaVersion, Rows: f.Rows, Files: []manifest.File{f}})
	})
}

// evolve records s.tbl's columns as the next schema version.
func (s *sink) evolve() {
	s.t.Helper()
	s.tbl.SchemaVersion++
	ps, err := parquetfile.NewSchema(s.tbl)
	if err != nil {
		s.t.Fatal(err)
	}
	s.commit(func(m *manifest.Manifest, mt *manifest.Table) {
		mt.SchemaVersion = s.tbl.SchemaVersion
		mt.Schemas = append(mt.Schemas, manifest.SchemaVersion{Version: s.tbl.SchemaVersion, FromEpoch: m.Epoch + 1, Columns: ps.ManifestColumns(s.tbl)})
	})
}

// TestSchemaEvolution mirrors every kind of schema change pg-cdc follows
// into the changelog table, by field id, and reads the files written under
// every version back with iceberg-go's scanner: an integer widened (int →
// bigint: earlier files hold int32, later int64, all read as long), a
// column dropped (gone from the current schema, its id never reused), a
// column renamed (earlier files' values read under the new name), a column
// added (NULL in earlier files); a file written before the drop and
// published after it is registered too.
func TestSchemaEvolution(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	cat, ad := openCatalog(t, s)
	p := catalog.New(catalog.Options{Catalog: ad, Retention: 24 * 3600e9, Positions: positions(s)})
	publish := func(m *manifest.Manifest) {
		t.Helper()
		if _, err := p.Publish(ctx, m); err != nil {
			t.Fatalf("publish version %d: %v", m.Version, err)
		}
	}

	// Version 2: n integer added (field 3).
	s.tbl.Columns = append(s.tbl.Columns, cdc.Column{Name: "n", TypeOID: 23, TypeMod: -1, PGType: "integer", FieldID: 3})
	s.evolve()
	publish(s.writeEvolve([]evolveRow{{cdc.OpInsert, 0x200, []string{"10", "x", "2147483647"}}}))
	// Version 3: n widened to bigint, same field.
	s.tbl.Columns[2] = cdc.Column{Name: "n", TypeOID: 20, TypeMod: -1, PGType: "bigint", FieldID: 3}
	s.evolve()
	// Not published before the drop (the publisher is behind): its file
	// holds v, which the table's schema no longer has when it is added.
	s.writeEvolve([]evolveRow{{cdc.OpInsert, 0x300, []string{"11", "y", "9000000000"}}})
	// Version 4: v dropped.
	s.tbl.Columns = slices.Delete(s.tbl.Columns, 1, 2)
	s.evolve()
	publish(s.writeEvolve([]evolveRow{{cdc.OpUpdate, 0x400, []string{"10", "-5"}}}))
	// Version 5: n renamed to total.
	s.tbl.Columns[1].Name = "total"
	s.evolve()
	m := s.writeEvolve([]evolveRow{{cdc.OpInsert, 0x500, []string{"12", ""}}})
	publish(m)

	tbl, err := cat.LoadTable(ctx, table.Identifier{"pgcdc_changelog", "public", "t"})
	if err != nil {
		t.Fatal(err)
	}
	sc := tbl.Schema()
	if f, ok := sc.FindFieldByName("total"); !ok || f.ID != 3 || f.Type.String() != "long" {
		t.Errorf("field total: %+v, want id 3, long", f)
	}
	if _, ok := sc.FindFieldByName("v"); ok {
		t.Error("dropped column v is still in the current schema")
	}
	if _, ok := sc.FindFieldByName("n"); ok {
		t.Error("renamed column n is still in the current schema")
	}
	if got := tbl.Properties()[catalog.PropertySchemaVersion]; got != "5" {
		t.Errorf("schema version property %q, want 5", got)
	}
	// Every schema version published is in the metadata (the catalog
	// numbers them its own way; the property names pg-cdc's): 1, 2, 4 and
	// 5 — version 3 was current at no publication.
	if n := len(tbl.Metadata().Schemas()); n != 4 {
		t.Errorf("%d schemas in the metadata, want one per version published (4)", n)
	}

	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer at.Release()
	var got []string
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		idx := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		for i := 0; i < int(rec.NumRows()); i++ {
			op := rec.Column(idx("__op")).(*array.String).Value(i)
			key := rec.Column(idx("id")).(*array.Int64).Value(i)
			total := "-"
			if c, ok := rec.Column(idx("total")).(*array.Int64); !ok {
				t.Fatalf("total read as %s, want int64", rec.Column(idx("total")).DataType())
			} else if c.IsValid(i) {
				total = fmt.Sprint(c.Value(i))
			}
			got = append(got, fmt.Sprintf("%s:%d:%s", op, key, total))
		}
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{"I:1:-", "I:2:-", "I:3:-", "I:10:2147483647", "I:11:9000000000", "U:10:-5", "I:12:-"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("rows across five schema versions:\n got %s\nwant %s", strings.Join(got, " "), strings.Join(want, " "))
	}
	if d, err := p.Inspect(ctx, m); err != nil || len(d) == 0 || d[0].Drift == nil || !d[0].Drift.InSync() {
		t.Errorf("drift after the last version: %+v, %v", d, err)
	}
}
