package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

func TestSoakRenderRow(t *testing.T) {
	id, a := int64(7), int64(-3)
	b, c := `say "NULL"`, "-0.01"
	d := time.Date(2024, 5, 6, 9, 8, 9, 120000000, time.FixedZone("x", 2*3600))
	got := renderSoakRow(&id, &a, &b, &c, &d)
	want := soakRow{"7", "-3", `"say \"NULL\""`, "-0.01", "2024-05-06 07:08:09.120000Z"}
	if !sameRow(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	empty := "NULL"
	if got := renderSoakRow(&id, nil, &empty, nil, nil); !sameRow(got, soakRow{"7", "NULL", `"NULL"`, "NULL", "NULL"}) {
		t.Errorf("nulls: got %q", got)
	}
}

func TestSoakDiffRows(t *testing.T) {
	row := func(cells ...string) soakRow { return soakRow(cells) }
	pg := []soakRow{row("1", "1", `"a"`, "1.00", "t"), row("2", "2", `"b"`, "2.00", "t"), row("3", "3", `"c"`, "3.00", "t")}
	if n, first := diffSoakRows(pg, pg, 3); n != 0 || len(first) != 0 {
		t.Fatalf("equal rows: %d differences %q", n, first)
	}
	sink := []soakRow{row("1", "1", `"a"`, "1.00", "t"), row("3", "3", `"c"`, "3.01", "t"), row("4", "4", `"d"`, "4.00", "t"), row("4", "4", `"d"`, "4.00", "t")}
	n, first := diffSoakRows(pg, sink, 10)
	if n != 4 {
		t.Errorf("%d differences, want 4 (a twice-held id, a missing row, a value, an extra row): %q", n, first)
	}
	for _, want := range []string{"id 4: twice in the sink", "id 2: in PostgreSQL, not in the sink", "id 3: PostgreSQL (3, 3, \"c\", 3.00, t), the sink (3, 3, \"c\", 3.01, t)", "id 4: in the sink, not in PostgreSQL"} {
		if !strings.Contains(strings.Join(first, "\n"), want) {
			t.Errorf("differences lack %q: %q", want, first)
		}
	}
	if n, first := diffSoakRows(pg, nil, 2); n != 3 || len(first) != 2 {
		t.Errorf("an empty sink: %d differences, %d shown", n, len(first))
	}
}

// TestSoakOracleMerge writes a base and two deltas with DuckDB, in the
// layout pg-cdc writes (parquetfile's metadata columns, DECIMAL(12,2),
// TIMESTAMP(us,UTC)), and checks the merge and the rendering against what
// PostgreSQL would print for the same rows.
func TestSoakOracleMerge(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := openOracle(ctx, filepath.Join(dir, "tmp"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	write := func(name string, rows ...string) manifest.File {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		q := fmt.Sprintf(`COPY (SELECT __op::VARCHAR AS __op, __lsn::BIGINT AS __lsn, __seq::BIGINT AS __seq, __unchanged::VARCHAR[] AS __unchanged,
			id::BIGINT AS id, a::INTEGER AS a, b::VARCHAR AS b, c::DECIMAL(12,2) AS c, d::TIMESTAMPTZ AS d
			FROM (VALUES %s) t(__op, __lsn, __seq, __unchanged, id, a, b, c, d)) TO %s (FORMAT parquet)`, strings.Join(rows, ", "), sqlLiteral(path))
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return manifest.File{Path: name}
	}
	const ts = "'2024-05-06 07:08:09.12+00'"
	base := write("public/t/g/base/00000001/part-00000.parquet",
		"('I', 100, 0, [], 1, 10, 'one', 1.50, "+ts+")",
		"('I', 100, 0, [], 2, 20, 'two', 0.00, "+ts+")",
		"('I', 100, 0, [], 3, 30, NULL, -0.01, "+ts+")",
		"('D', 90, 0, [], 9, NULL, NULL, NULL, NULL)") // a tombstone the base keeps
	d1 := write("public/t/g/delta/00000002/part-00000.parquet",
		"('U', 100, 0, [], 1, 99, 'replayed older', 9.99, "+ts+")", // the base's own version, replayed: the base's row wins
		"('U', 200, 1, [], 2, 21, 'two''', 1234567890.12, '2024-05-06 07:08:09.000001+00')",
		"('D', 200, 2, [], 3, NULL, NULL, NULL, NULL)",
		"('I', 200, 3, [], 4, 40, 'four', 4.00, "+ts+")")
	d2 := write("public/t/g/delta/00000003/part-00000.parquet",
		"('U', 300, 0, [], 4, 41, 'four', 4.10, "+ts+")",
		"('U', 300, 0, [], 4, 41, 'four', 4.10, "+ts+")", // a replayed duplicate
		"('I', 300, 1, [], 3, 31, 'three again', 3.00, "+ts+")",
		"('U', 250, 0, [], 2, 22, 'two, newest', 2.00, "+ts+")")
	mt := &manifest.Table{Base: &manifest.Base{Files: []manifest.File{base}},
		Deltas: []manifest.Delta{{Epoch: 2, Files: []manifest.File{d1}}, {Epoch: 3, Files: []manifest.File{d2}}}}
	got, info, err := oracleRows(ctx, db, dir, mt)
	if err != nil {
		t.Fatal(err)
	}
	want := []soakRow{
		{"1", "10", `"one"`, "1.50", "2024-05-06 07:08:09.120000Z"},
		{"2", "22", `"two, newest"`, "2.00", "2024-05-06 07:08:09.120000Z"},
		{"3", "31", `"three again"`, "3.00", "2024-05-06 07:08:09.120000Z"},
		{"4", "41", `"four"`, "4.10", "2024-05-06 07:08:09.120000Z"},
	}
	if n, first := diffSoakRows(want, got, 10); n != 0 {
		t.Errorf("merged state differs (want = PostgreSQL side):\n%s", strings.Join(first, "\n"))
	}
	if info.files != 3 || info.dupChanges != 1 {
		t.Errorf("files %d, duplicate change rows %d; want 3 and 1", info.files, info.dupChanges)
	}

	// The values PostgreSQL prints for numeric(12,2) and timestamptz come
	// out of DuckDB the same: two decimals kept, microseconds exact.
	mt = &manifest.Table{Deltas: []manifest.Delta{{Files: []manifest.File{d1}}}}
	got, _, err = oracleRows(ctx, db, dir, mt)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1][3] != "1234567890.12" || got[1][4] != "2024-05-06 07:08:09.000001Z" || got[1][2] != `"two'"` {
		t.Errorf("rows of one delta: %q", got)
	}

	// What the merge does not cover fails rather than guesses.
	tr := write("public/t/g/delta/00000004/part-00000.parquet", "('T', 400, 0, [], NULL, NULL, NULL, NULL, NULL)")
	mt = &manifest.Table{Base: &manifest.Base{Files: []manifest.File{base}}, Deltas: []manifest.Delta{{Files: []manifest.File{tr}}}}
	if _, _, err := oracleRows(ctx, db, dir, mt); err == nil || !strings.Contains(err.Error(), "truncate") {
		t.Errorf("a truncate: %v", err)
	}
	toast := write("public/t/g/delta/00000005/part-00000.parquet", "('U', 500, 0, ['b'], 1, 11, NULL, 1.50, "+ts+")")
	mt = &manifest.Table{Base: &manifest.Base{Files: []manifest.File{base}}, Deltas: []manifest.Delta{{Files: []manifest.File{toast}}}}
	if _, _, err := oracleRows(ctx, db, dir, mt); err == nil || !strings.Contains(err.Error(), "unchanged") {
		t.Errorf("an unchanged column: %v", err)
	}
	if rows, info, err := oracleRows(ctx, db, dir, &manifest.Table{}); err != nil || len(rows) != 0 || info.files != 0 {
		t.Errorf("no files: %v rows, %v", rows, err)
	}
}
