package postgres

import (
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestReadChunk walks a table with a two-column key (text with quotes and
// backslashes, and an int) in chunks of 2, each after the previous chunk's
// last key, and checks the rows come in key order, once each, and that the
// snapshot of a chunk sees a transaction committed before it.
func TestReadChunk(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE c (a text, b int, v text, PRIMARY KEY (a, b))`,
		`INSERT INTO c VALUES ('x', 2, 'x2'), ('x', 1, 'x1'), ('it''s', 1, 'q'), ('back\slash', 7, 'b'), ('z', 0, NULL)`)
	tbl := e.table("public.c")
	db := e.db
	xid := e.xidOf(`UPDATE c SET v = 'z0' WHERE a = 'z'`)

	var (
		got   []string
		after []string
	)
	for chunks := 0; ; chunks++ {
		if chunks > 5 {
			t.Fatal("more chunks than rows")
		}
		var last []cdc.Datum
		snap, n, err := db.ReadChunk(ctx, tbl, after, 2, func(values []cdc.Datum) error {
			row := make([]string, len(values))
			for i, v := range values {
				row[i] = string(v.Text)
			}
			got = append(got, strings.Join(row, "|"))
			last = []cdc.Datum{{Kind: cdc.DatumText, Text: append([]byte(nil), values[0].Text...)}, {Kind: cdc.DatumText, Text: append([]byte(nil), values[1].Text...)}}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !snap.Visible(xid) {
			t.Fatalf("chunk %d: snapshot %s does not see transaction %d committed before it", chunks, snap, xid)
		}
		if n < 2 {
			break
		}
		after = []string{string(last[0].Text), string(last[1].Text)}
	}
	want := []string{`back\slash|7|b`, `it's|1|q`, `x|1|x1`, `x|2|x2`, `z|0|z0`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A table without a primary key cannot be read in chunks.
	e.exec(`CREATE TABLE nokey (v int)`)
	if _, _, err := db.ReadChunk(ctx, e.table("public.nokey"), nil, 10, func([]cdc.Datum) error { return nil }); err == nil || !strings.Contains(err.Error(), "no primary key") {
		t.Fatalf("keyless table: %v", err)
	}

	if lsn, err := db.EmitMarker(ctx, "pgcdc.backfill", "test"); err != nil || lsn == 0 {
		t.Fatalf("EmitMarker = %s, %v", lsn, err)
	}
	if n, err := db.EstimateRows(ctx, tbl.ID); err != nil || n < 0 {
		t.Fatalf("EstimateRows = %d, %v", n, err)
	}
}
