package merge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/render"
)

// TestMergeAcrossSchemaVersions reads a sorted base and deltas written under
// four schema versions: a column added with a missing value (7), a column
// dropped, a dropped name added again (a new field: the old values must not
// show), a rename (same field, read under its old name) and int → bigint and
// int → text (cast). Every row comes out in the newest version.
func TestMergeAcrossSchemaVersions(t *testing.T) {
	seven := "7"
	col := func(name string, field int, oid uint32, pgType, pq string) manifest.Column {
		return manifest.Column{Name: name, FieldID: field, TypeOID: oid, TypeMod: -1, PGType: pgType, ParquetType: pq, Nullable: field != 1}
	}
	id := col("id", 1, 20, "bigint", "INT64")
	id.Nullable = false
	versions := []manifest.SchemaVersion{
		{Version: 1, Columns: []manifest.Column{id, col("v", 2, 25, "text", "STRING"), col("n", 3, 23, "integer", "INT32")}},
		// ADD COLUMN w int DEFAULT 7
		{Version: 2, FromEpoch: 2, Columns: []manifest.Column{id, col("v", 2, 25, "text", "STRING"), col("n", 3, 23, "integer", "INT32"), withMissing(col("w", 4, 23, "integer", "INT32"), &seven)}},
		// DROP COLUMN v; ADD COLUMN v text; RENAME n TO num; w TYPE bigint
		{Version: 3, FromEpoch: 3, Columns: []manifest.Column{id, col("num", 3, 23, "integer", "INT32"), withMissing(col("w", 4, 20, "bigint", "INT64"), &seven), col("v", 5, 25, "text", "STRING")}},
		// num TYPE text
		{Version: 4, FromEpoch: 4, Columns: []manifest.Column{id, col("num", 3, 25, "text", "STRING"), withMissing(col("w", 4, 20, "bigint", "INT64"), &seven), col("v", 5, 25, "text", "STRING")}},
	}
	mt := &manifest.Table{
		Schema: "public", Name: "t", OID: 1, Generation: "g0001", PrimaryKey: []string{"id"},
		SchemaVersion: 4, Schemas: versions,
	}
	store := memory.New()
	ctx := context.Background()
	lsn := cdc.LSN(100)
	write := func(key string, v int, rows ...[]string) manifest.File {
		t.Helper()
		tbl, err := mt.SourceTableAt(v)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := parquetfile.NewSchema(tbl)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w := parquetfile.NewWriter(&buf, sc)
		for _, r := range rows {
			vals := make([]cdc.Datum, len(r))
			for i, s := range r {
				vals[i] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(s)}
				if s == "null" {
					vals[i] = cdc.Datum{Kind: cdc.DatumNull}
				}
			}
			lsn++
			if err := w.Write(cdc.RowMeta{Op: cdc.OpInsert, LSN: lsn, XID: 1, CommitTime: time.Unix(0, 0)}, vals); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := store.Put(ctx, key, bytes.NewReader(buf.Bytes())); err != nil {
			t.Fatal(err)
		}
		return manifest.File{Path: key, Rows: int64(len(rows)), Bytes: int64(buf.Len())}
	}
	// A compacted base of version 1, in key order.
	mt.Base = &manifest.Base{Epoch: 1, SchemaVersion: 1, SortedBy: []string{"id", "__lsn", "__seq"},
		Files: []manifest.File{write("base", 1, []string{"1", "a", "10"}, []string{"2", "b", "20"})}}
	mt.Deltas = []manifest.Delta{
		{Epoch: 2, SchemaVersion: 2, Files: []manifest.File{write("d2", 2, []string{"3", "c", "30", "33"})}},
		{Epoch: 3, SchemaVersion: 3, Files: []manifest.File{write("d3", 3, []string{"4", "40", "5000000000", "new"})}},
		{Epoch: 4, SchemaVersion: 4, Files: []manifest.File{write("d4", 4, []string{"5", "fifty", "5", "null"})}},
	}
	r, err := Open(ctx, store, mt, Options{ScratchDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rt, err := render.NewTable(mt.CurrentSchema().Columns)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
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
		for i, n := range rt.Names() {
			text, null, err := rt.Text(i, vals[i])
			if err != nil {
				t.Fatal(err)
			}
			if null {
				text = "null"
			}
			parts = append(parts, n+"="+text)
		}
		got = append(got, strings.Join(parts, " "))
	}
	want := []string{
		"id=1 num=10 w=7 v=null",
		"id=2 num=20 w=7 v=null",
		"id=3 num=30 w=33 v=null",
		"id=4 num=40 w=5000000000 v=new",
		"id=5 num=fifty w=5 v=null",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("merged rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func withMissing(c manifest.Column, v *string) manifest.Column {
	c.MissingValue = v
	return c
}
