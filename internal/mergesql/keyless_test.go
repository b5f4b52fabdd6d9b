package mergesql_test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// writeFile writes rows (op, lsn, seq, value) of a one-column keyless table
// to dir/name and returns the manifest file.
func writeFile(t *testing.T, dir, name string, tbl *cdc.Table, rows [][4]any) manifest.File {
	t.Helper()
	s, err := parquetfile.NewSchema(tbl)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, s)
	for _, r := range rows {
		op, lsn, seq := r[0].(cdc.Op), r[1].(int), r[2].(int)
		vals := []cdc.Datum{{}}
		if v, ok := r[3].(string); ok {
			vals[0] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(v)}
		}
		meta := cdc.RowMeta{Op: op, LSN: cdc.LSN(lsn), Seq: int64(seq), XID: cdc.XID(lsn), CommitTime: time.UnixMicro(int64(lsn))}
		if err := w.Write(meta, vals); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return manifest.File{Path: name, Rows: int64(len(rows)), Bytes: int64(buf.Len())}
}

func lines(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query("SELECT CAST(COLUMNS(*) AS VARCHAR) FROM (" + q + ")")
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		line := ""
		for i, v := range vals {
			if i > 0 {
				line += "|"
			}
			if v.Valid {
				line += v.String
			} else {
				line += `\N`
			}
		}
		out = append(out, line)
	}
	slices.Sort(out)
	return out
}

// TestKeylessAndChanges: a table without a primary key keeps every insert
// after its last truncate, once per (__lsn, __seq) (a replayed row counts
// once); its change rows, with the metadata columns, are every row of
// every file, the truncate marker included.
func TestKeylessAndChanges(t *testing.T) {
	dir := t.TempDir()
	tbl := &cdc.Table{ID: cdc.TableID{Schema: "public", Name: "events"}, OID: 7, ReplicaIdentity: cdc.ReplicaIdentityDefault,
		SchemaVersion: 1, Columns: []cdc.Column{{Name: "msg", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 1}}}
	s, err := parquetfile.NewSchema(tbl)
	if err != nil {
		t.Fatal(err)
	}
	base := writeFile(t, dir, "base.parquet", tbl, [][4]any{{cdc.OpInsert, 10, 0, "snapshot"}})
	d1 := writeFile(t, dir, "d1.parquet", tbl, [][4]any{{cdc.OpInsert, 20, 0, "before"}, {cdc.OpTruncate, 30, 0, nil}, {cdc.OpInsert, 30, 1, "after"}})
	d2 := writeFile(t, dir, "d2.parquet", tbl, [][4]any{{cdc.OpInsert, 30, 1, "after"}, {cdc.OpInsert, 40, 0, "later"}})
	mt := &manifest.Table{Schema: "public", Name: "events", OID: 7, Generation: "g0001", PrimaryKey: []string{}, SchemaVersion: 1,
		Schemas: []manifest.SchemaVersion{{Version: 1, Columns: s.ManifestColumns(tbl)}},
		Base:    &manifest.Base{Files: []manifest.File{base}},
		Deltas:  []manifest.Delta{{Epoch: 1, SchemaVersion: 1, Files: []manifest.File{d1}}, {Epoch: 2, SchemaVersion: 1, Files: []manifest.File{d2}}}}
	in := mergesql.Input{Table: mt, Path: func(key string) (string, error) { return filepath.Join(dir, key), nil }}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	state, err := mergesql.State(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lines(t, db, state), []string{"after", "later"}; !slices.Equal(got, want) {
		t.Errorf("state %q, want %q", got, want)
	}
	in.Bound = mergesql.Bound{LSN: 25}
	state, _ = mergesql.State(in)
	if got, want := lines(t, db, state), []string{"before", "snapshot"}; !slices.Equal(got, want) {
		t.Errorf("state as of 0/19: %q, want %q", got, want)
	}
	in.Bound = mergesql.Bound{}
	changes, err := mergesql.Changes(in)
	if err != nil {
		t.Fatal(err)
	}
	got := lines(t, db, "SELECT msg, __op, __lsn, __seq FROM ("+changes+")")
	want := []string{`\N|T|30|0`, "after|I|30|1", "after|I|30|1", "before|I|20|0", "later|I|40|0", "snapshot|I|10|0"}
	if !slices.Equal(got, want) {
		t.Errorf("changes %q, want %q", got, want)
	}
	empty, err := mergesql.Empty(mt, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(t, db, empty); len(got) != 0 {
		t.Errorf("empty: %q", got)
	}
}
