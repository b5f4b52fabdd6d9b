package postgres

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func (e *env) table(id string) *cdc.Table {
	e.t.Helper()
	tid, err := cdc.ParseTableID(id)
	if err != nil {
		e.t.Fatal(err)
	}
	tables, err := e.db.DiscoverTables(testCtx(e.t), nil, []cdc.TableID{tid}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return tables[0]
}

// copyRows copies a table into rows of *string (nil for NULL).
func (e *env) copyRows(snapshot string, t *cdc.Table) []row {
	e.t.Helper()
	var rows []row
	n, err := e.db.CopyTable(testCtx(e.t), snapshot, t, func(vals []cdc.Datum) error {
		r := make(row, len(vals))
		for i, v := range vals {
			if v.Kind == cdc.DatumText {
				r[i] = str(string(v.Text))
			}
		}
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		e.t.Fatalf("copy %s: %v", t.ID, err)
	}
	if n != int64(len(rows)) {
		e.t.Fatalf("copy %s: returned %d rows, emitted %d", t.ID, n, len(rows))
	}
	return rows
}

// textRows reads the same table through pgx as the output functions'
// text, the reference for what COPY must produce.
func (e *env) textRows(t *cdc.Table) []row {
	e.t.Helper()
	ctx := testCtx(e.t)
	conn, err := e.db.connect(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close(ctx)
	var cols []string
	for _, c := range t.Columns {
		// format('%s') calls the type's output function, as COPY does;
		// a ::text cast differs for some types (bool gives "true", not "t").
		q := pgx.Identifier{c.Name}.Sanitize()
		cols = append(cols, "CASE WHEN "+q+" IS NOT NULL THEN format('%s', "+q+") END")
	}
	rows, err := conn.Query(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+pgx.Identifier{t.ID.Schema, t.ID.Name}.Sanitize()+" ORDER BY 1")
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		vals := make([]*string, len(t.Columns))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		return vals, r.Scan(ptrs...)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func TestCopyTableValues(t *testing.T) {
	e := newEnv(t)
	// Settings that would change the text form if the startup packet did not
	// override them.
	db := e.queryString("SELECT current_database()")
	e.exec(
		`ALTER DATABASE "`+db+`" SET DateStyle = 'German, DMY'`,
		`ALTER DATABASE "`+db+`" SET TimeZone = 'America/New_York'`,
		`ALTER DATABASE "`+db+`" SET IntervalStyle = 'sql_standard'`,
		`ALTER DATABASE "`+db+`" SET extra_float_digits = 0`,
		`ALTER DATABASE "`+db+`" SET bytea_output = 'escape'`,
		`CREATE TABLE "Odd Table" (
			id int PRIMARY KEY, t text, b bytea, ts timestamptz, tsl timestamp, d date, iv interval,
			f8 float8, f4 float4, n numeric, j jsonb, arr text[], u uuid, ok bool, "Col ""q""" text)`,
		`INSERT INTO "Odd Table" VALUES
			(1, 'plain', '\x00ff5c0a'::bytea, '2024-01-02 03:04:05.123456+02', '2024-01-02 03:04:05', '2024-01-02',
			 '1 day 2 hours', 0.1, 1.1, 1.50, '{"k": "v\tw"}', ARRAY['a b', 'c"d', NULL], 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', true, 'x'),
			(2, E'tab\there\nnewline\\backslash\rcr', '', 'infinity', '-infinity', 'infinity', '-1 mon 3 days', 'NaN', '-Infinity', 'NaN', 'null', '{}', NULL, false, ''),
			(3, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
			(4, '日本語 🐘 héllo', E'\\x'::bytea, '1999-12-31 23:59:59.999999+00', NULL, '0044-03-15 BC', '00:00:00.000001', 1e300, 3.4e38, 123456789012345678901234567890.000000001, '[1, 2.50, "\u00e9"]', ARRAY['\N', E'\\', ''], NULL, NULL, E'\\N')`,
	)
	if ds := e.queryString("SHOW DateStyle"); ds != "German, DMY" {
		t.Fatalf("a plain session sees DateStyle %q: the database settings did not take", ds)
	}
	tbl := e.table(`public.Odd Table`)
	got := e.copyRows("", tbl)
	if want := e.textRows(tbl); !reflect.DeepEqual(got, want) {
		t.Fatalf("COPY differs from the output functions:\n got %s\nwant %s", show(got), show(want))
	}
	// The session settings are in force, not the database's.
	col := func(r int, name string) string {
		v := got[r][tbl.ColumnIndex(name)]
		if v == nil {
			return "NULL"
		}
		return *v
	}
	for _, c := range []struct {
		row       int
		col, want string
	}{
		{0, "b", `\x00ff5c0a`},
		{0, "ts", "2024-01-02 01:04:05.123456+00"},
		{0, "tsl", "2024-01-02 03:04:05"},
		{0, "d", "2024-01-02"},
		{0, "iv", "1 day 02:00:00"},
		{0, "f8", "0.1"},
		{0, "f4", "1.1"},
		{0, "n", "1.50"},
		{0, "arr", `{"a b","c\"d",NULL}`},
		{1, "t", "tab\there\nnewline\\backslash\rcr"},
		{1, "b", `\x`},
		{1, "iv", "-1 mons +3 days"},
		{2, "t", ""},
		{2, "b", "NULL"},
		{3, "t", "日本語 🐘 héllo"},
		{3, "d", "0044-03-15 BC"},
		{3, "Col \"q\"", `\N`},
	} {
		if g := col(c.row, c.col); g != c.want {
			t.Errorf("row %d %s = %q, want %q", c.row+1, c.col, g, c.want)
		}
	}
}

func TestCopyTableSnapshot(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY, v text)`, `INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 3) g`)
	tbl := e.table("public.t")

	r := e.replConn()
	_, snapshot, err := r.CreateSlot(ctx, "snap_slot")
	if err != nil {
		t.Fatal(err)
	}
	if snapshot == "" {
		t.Fatal("no exported snapshot")
	}
	e.exec(`INSERT INTO t VALUES (4, 'after the slot')`, `UPDATE t SET v = 'changed' WHERE id = 1`)

	inSnapshot := e.copyRows(snapshot, tbl)
	want := []row{{str("1"), str("row 1")}, {str("2"), str("row 2")}, {str("3"), str("row 3")}}
	if !reflect.DeepEqual(inSnapshot, want) {
		t.Errorf("in snapshot: %s, want %s", show(inSnapshot), show(want))
	}
	if now := e.copyRows("", tbl); len(now) != 4 {
		t.Errorf("now: %s", show(now))
	}

	// The next command on the exporting connection ends the snapshot.
	if _, _, err := r.IdentifySystem(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = e.db.CopyTable(ctx, snapshot, tbl, func([]cdc.Datum) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "import snapshot") {
		t.Errorf("copy with a dead snapshot: %v", err)
	}
}

func TestCopyTableErrors(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE big AS SELECT g AS id, repeat('x', 100) AS v FROM generate_series(1, 20000) g`, `CREATE TABLE empty ()`, `INSERT INTO empty DEFAULT VALUES`)
	tbl := e.table("public.big")

	stop := errors.New("stop")
	var seen int
	n, err := e.db.CopyTable(ctx, "", tbl, func([]cdc.Datum) error {
		if seen++; seen == 1000 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !strings.Contains(err.Error(), "public.big") || !strings.Contains(err.Error(), "row 1000") || n != 999 {
		t.Errorf("callback error: n=%d err=%v", n, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	seen = 0
	_, err = e.db.CopyTable(cctx, "", tbl, func([]cdc.Datum) error {
		if seen++; seen == 10 {
			cancel()
		}
		return nil
	})
	if err == nil || seen >= 20000 {
		t.Errorf("cancelled copy: seen %d, err %v", seen, err)
	}

	// The DB still works after broken copies.
	if rows := e.copyRows("", tbl); len(rows) != 20000 {
		t.Errorf("copy after errors: %d rows", len(rows))
	}
	if rows := e.copyRows("", e.table("public.empty")); len(rows) != 1 || len(rows[0]) != 0 {
		t.Errorf("table without columns: %s", show(rows))
	}

	if _, err := e.db.CopyTable(ctx, "x'; SELECT 1; --", tbl, nil); err == nil {
		t.Error("bad snapshot name accepted")
	}
	gone := &cdc.Table{ID: cdc.TableID{Schema: "public", Name: "gone"}, Columns: []cdc.Column{{Name: "id"}}}
	if _, err := e.db.CopyTable(ctx, "", gone, nil); err == nil || !strings.Contains(err.Error(), "public.gone") {
		t.Errorf("missing table: %v", err)
	}
}
