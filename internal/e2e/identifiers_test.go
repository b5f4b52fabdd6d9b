package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// TestIdentifiers captures a set of tables whose schema, table and column
// names are as awkward as PostgreSQL allows (issue 4 item 6), through the
// snapshot and the stream, and checks that every table lands in its own
// directory under the sink root and that its merged state equals the
// source. A column named like a metadata column is refused at init first.
func TestIdentifiers(t *testing.T) {
	long63 := strings.Repeat("é", 31) + "x" // 63 bytes
	longSchema := strings.Repeat("長", 21)   // 63 bytes
	odd := `dot.s/lash\back"quote`          // schema
	schemas := []string{"public", "Mixed Case", "a", odd, "..", "日本😀", longSchema}
	tables := []cdc.TableID{
		{Schema: "public", Name: "T"},
		{Schema: "public", Name: "t"},
		{Schema: "public", Name: "a.b"},
		{Schema: "a", Name: "b"},
		{Schema: "public", Name: "items"},
		{Schema: "Mixed Case", Name: "items"},
		{Schema: "Mixed Case", Name: "Order Lines"},
		{Schema: "Mixed Case", Name: long63},
		{Schema: odd, Name: `we"ird/ta.ble\x`},
		{Schema: "..", Name: ".."},
		{Schema: "..", Name: "."},
		{Schema: "日本😀", Name: "表😀"},
		{Schema: longSchema, Name: "t"},
	}
	e := newEnv(t, envOptions{schemas: schemas})
	for _, s := range schemas[1:] {
		e.exec("CREATE SCHEMA " + pgx.Identifier{s}.Sanitize())
	}
	// Columns with odd names too; the key column is one of them. No two
	// differ only by case: DuckDB, like most Parquet readers, matches
	// column names without regard to case.
	const columns = `("the id" int PRIMARY KEY, "Mixed Case" text, "a.b" int, "we""ird\x" text,
		"😀" text, "__other" text, "列" numeric(10,2), "..""" text)`
	for _, id := range tables {
		e.exec("CREATE TABLE " + rel(id) + " " + columns)
	}

	// A column named like a metadata column (in any case) is refused
	// before anything is created, naming the table, the column and the fix.
	clash := cdc.TableID{Schema: "Mixed Case", Name: "clash"}
	e.exec("CREATE TABLE " + rel(clash) + ` (id int PRIMARY KEY, "__LSN" bigint)`)
	code, out := e.run("init")
	if code != 2 || !strings.Contains(out, `"Mixed Case"."clash"`) || !strings.Contains(out, `"__LSN"`) ||
		!strings.Contains(out, "RENAME COLUMN") {
		t.Fatalf("init with a metadata-named column: exit %d:\n%s", code, out)
	}
	var slots int
	if err := e.conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&slots); err != nil || slots != 0 {
		t.Fatalf("a refused init left %d slots (%v)", slots, err)
	}
	e.exec("DROP TABLE " + rel(clash))

	insert := func(id cdc.TableID, from, to int) {
		e.exec(fmt.Sprintf(`INSERT INTO %s SELECT g, 'v' || g, g, 'w"' || g, '😀' || g, '_' || g, g / 4.0, 'x' || g
			FROM generate_series(%d, %d) g`, rel(id), from, to))
	}
	for _, id := range tables {
		insert(id, 1, 5)
	}
	out = e.mustRun("init")
	if want := fmt.Sprintf("initialized: %d tables", len(tables)); !strings.Contains(out, want) {
		t.Fatalf("init output lacks %q:\n%s", want, out)
	}

	d := e.start()
	for _, id := range tables {
		insert(id, 6, 8)
		e.exec(`UPDATE ` + rel(id) + ` SET "Mixed Case" = 'updated', "列" = 1.5 WHERE "the id" IN (2, 7)`)
		e.exec(`DELETE FROM ` + rel(id) + ` WHERE "the id" IN (3, 8)`)
	}
	e.waitCaughtUp(90 * time.Second)
	d.stop()

	m := e.manifest()
	if len(m.Tables) != len(tables) {
		t.Errorf("manifest holds %d tables, want %d", len(m.Tables), len(tables))
	}
	keys := make([]string, len(tables))
	dirs := map[string]cdc.TableID{} // lower-cased <schema>/<table> prefix → table
	root, err := filepath.EvalSymlinks(e.sink)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range tables {
		keys[i] = id.String()
		mt := m.Tables[id.String()]
		if mt == nil {
			t.Fatalf("table %s is not in the manifest", id)
		}
		if mt.Schema != id.Schema || mt.Name != id.Name {
			t.Errorf("manifest table %q names %q.%q", id, mt.Schema, mt.Name)
		}
		if len(mt.Deltas) == 0 {
			t.Errorf("table %s has no delta: the stream did not reach it", id)
		}
		files := append([]manifest.File(nil), mt.Base.Files...)
		for _, dl := range mt.Deltas {
			files = append(files, dl.Files...)
		}
		for _, f := range files {
			parts := strings.Split(f.Path, "/")
			s, err1 := url.PathUnescape(parts[0])
			n, err2 := url.PathUnescape(parts[1])
			if err1 != nil || err2 != nil || s != id.Schema || n != id.Name {
				t.Errorf("table %s: file %s does not name its table (%q, %q)", id, f.Path, s, n)
			}
			dir := strings.ToLower(parts[0] + "/" + parts[1])
			if other, ok := dirs[dir]; ok && other != id {
				t.Errorf("tables %s and %s share the directory %s (case-insensitively)", id, other, dir)
			}
			dirs[dir] = id
			p, err := filepath.EvalSymlinks(filepath.Join(e.sink, filepath.FromSlash(f.Path)))
			if err != nil {
				t.Errorf("table %s: file %s: %v", id, f.Path, err)
				continue
			}
			if rel, err := filepath.Rel(root, p); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				t.Errorf("table %s: file %s resolves to %s, outside the sink root %s", id, f.Path, p, root)
			}
		}
	}
	// Nothing was written outside the sink root's own directories.
	entries, err := os.ReadDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		switch en.Name() {
		case "sink", "state", "pg-cdc.yml":
		default:
			t.Errorf("unexpected entry %q beside the sink root", en.Name())
		}
	}
	assertSinkEqualsSource(t, e, keys...)
}

// rel is the quoted name of a table in SQL.
func rel(id cdc.TableID) string { return pgx.Identifier{id.Schema, id.Name}.Sanitize() }
