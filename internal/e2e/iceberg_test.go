package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"github.com/pg-cdc/pg-cdc/internal/npmtest"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/icebergschema"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// iceCol is a column of the test's table and how its values compare.
type iceCol struct {
	name string
	kind string // int, str, bool, dec3, ts
}

// iceMeta are the metadata columns and how their values compare.
var iceMeta = []iceCol{{"__op", "str"}, {"__lsn", "int"}, {"__seq", "int"}, {"__xid", "int"}, {"__op_ts", "ts"}, {"__unchanged", "list"}}

// TestIcebergChangelog publishes a table's changelog to the embedded SQL
// catalog (catalog.type iceberg: init, start, catalog sync) while a
// workload inserts, updates (the key too, and leaving a TOASTed value
// alone), deletes, truncates, adds a column, renames one, widens one
// (integer to bigint) and drops one, with a
// compaction in the middle that folds deltas the publisher has not
// published yet (a daemon without the catalog stands for an outage); then
// reads the table with icebird, an Iceberg reader independent of
// iceberg-go (npm, scripts/ensure-icebird.sh), from the metadata location
// pg-cdc catalog status prints, with every table in sync. Its rows must be
// the change rows of the files the manifest lists as changes (the snapshot
// base and every delta, the folded ones included), read by DuckDB, value
// by value; replaying them must give the source table, now and as it was
// just before the TRUNCATE; the Iceberg schema must carry the manifest's
// field ids (the added column's, the renamed one's); after a last
// compaction the state table, read by icebird, must be the source; and
// the slot is never confirmed past the manifest.
func TestIcebergChangelog(t *testing.T) {
	waitBound(t)
	mods := ensureIcebird(t)
	const catalogYAML = "catalog:\n  type: iceberg\n  iceberg:\n    commit_interval: 0s\n"
	e := newEnv(t, envOptions{extraYAML: catalogYAML})
	s := e.startSampler()
	const table = "public.ice"
	e.exec(`CREATE TABLE ice (id int PRIMARY KEY, big bigint, label text, doc text, amount numeric(12,3), at timestamptz, flag boolean, qty integer, gone text);
		ALTER TABLE ice ALTER doc SET STORAGE EXTERNAL`)
	insert := func(from, to int) {
		e.exec(fmt.Sprintf(`INSERT INTO ice SELECT g, CASE WHEN g %% 4 <> 0 THEN g::bigint * 10000000000 END,
			CASE WHEN g %% 5 <> 0 THEN 'label ' || g END, repeat(md5(g::text), 400),
			CASE WHEN g %% 3 <> 0 THEN g * 1.125 END, '2026-01-02 03:04:05.123456+00'::timestamptz + g * interval '1 hour 1 microsecond',
			CASE WHEN g %% 6 <> 0 THEN g %% 2 = 0 END
			FROM generate_series(%d, %d) g`, from, to))
	}
	insert(1, 30)
	runTimed(t, e, 2*time.Minute, "init")
	d := e.start()

	insert(31, 50)
	e.exec(`UPDATE ice SET label = 'updated ' || id, amount = amount + 1 WHERE id % 7 = 0`)
	e.exec(`UPDATE ice SET flag = NOT flag, big = NULL WHERE id BETWEEN 10 AND 14`) // doc, TOASTed, unchanged
	e.exec(`DELETE FROM ice WHERE id IN (3, 33, 44)`)
	e.exec(`UPDATE ice SET qty = id * 1000, gone = 'g' || id WHERE id % 4 = 1`)
	e.waitCaughtUp(60 * time.Second)
	d.stop()

	// The publisher falls behind (a catalog outage; here a daemon without
	// it) while the next changes are flushed, and the compaction folds them
	// before they are published: the changelog must still get them.
	withCatalog := e.config
	e.config = filepath.Join(e.dir, "pg-cdc-nocatalog.yml")
	writeWithout(t, withCatalog, e.config, catalogYAML)
	d = e.start()
	e.exec(`UPDATE ice SET id = id + 1000 WHERE id IN (2, 32)`) // the key
	e.exec(`UPDATE ice SET doc = 'short now' WHERE id = 5`)
	e.exec(`BEGIN; INSERT INTO ice (id, label) VALUES (60, 'in a txn'); UPDATE ice SET label = 'twice' WHERE id = 60; DELETE FROM ice WHERE id = 1; COMMIT`)
	e.waitCaughtUp(60 * time.Second)
	e.config = withCatalog
	if st := changelogStatus(t, catalogStatus(t, e).Tables); st.Drift == nil || st.Drift.Add == 0 {
		t.Fatalf("the changelog is not behind before the compaction: %+v", st.Drift)
	}
	folded := changeFiles(e.manifest(), table)
	written := map[string]int{} // change file → the schema version it was written with, kept across compactions
	fileVersions(e.manifest(), table, written)

	// A compaction mid-way, beside the daemon: the files it folds stay in
	// the changelog (history.retention's default is a week), the ones
	// never published too.
	runTimed(t, e, 2*time.Minute, "compact")
	if b := e.manifest().Tables[table].Base; b == nil || b.CompactedAt == nil {
		t.Fatalf("compact made no compacted base: %+v", b)
	}
	d.stop()
	d = e.start()

	e.exec(`UPDATE ice SET amount = 7.5 WHERE id IN (4, 1002)`)
	e.exec(`ALTER TABLE ice ADD COLUMN extra text`)
	e.exec(`UPDATE ice SET extra = 'x' || id WHERE id % 2 = 0`)
	e.exec(`INSERT INTO ice (id, label, extra) VALUES (70, 'after add', 'seventy')`)
	e.exec(`ALTER TABLE ice RENAME COLUMN label TO title`)
	e.exec(`UPDATE ice SET title = 'renamed ' || id WHERE id % 3 = 1`)
	e.exec(`ALTER TABLE ice ALTER qty TYPE bigint`) // widened: earlier files hold int32
	e.exec(`UPDATE ice SET qty = 5000000000 + id WHERE id % 5 = 2`)
	e.exec(`ALTER TABLE ice DROP COLUMN gone`)
	e.exec(`UPDATE ice SET extra = 'after drop' WHERE id = 4`)
	e.waitCaughtUp(60 * time.Second)
	beforeTruncate := iceSourceRows(t, e)
	e.exec(`TRUNCATE ice`)
	insert(100, 110)
	e.exec(`UPDATE ice SET extra = 'after truncate', title = NULL WHERE id = 101`)
	e.exec(`UPDATE ice SET flag = true WHERE id = 102`) // doc unchanged again
	e.exec(`DELETE FROM ice WHERE id = 103`)
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	s.check()

	// A last compaction, so the state table (copy-on-write: replaced at
	// each compaction) holds the source as it is now.
	fileVersions(e.manifest(), table, written)
	folded = append(folded, changeFiles(e.manifest(), table)...)
	runTimed(t, e, 2*time.Minute, "compact")

	runTimed(t, e, time.Minute, "catalog", "sync")
	status := catalogStatus(t, e)
	m := e.manifest()
	if status.ManifestVersion != m.Version {
		t.Fatalf("catalog status at manifest version %d, want %d", status.ManifestVersion, m.Version)
	}
	for _, ts := range status.Tables {
		if !ts.Drift.InSync() || ts.Err != "" {
			t.Errorf("catalog status of %s (%s) after a sync: drift %+v, error %q", ts.Iceberg, ts.Kind, ts.Drift, ts.Err)
		}
	}
	st := changelogStatus(t, status.Tables)
	// The published version is the newest that changed the table (the
	// stop's last version may change none).
	if st.Table != table || !st.Drift.InSync() || st.Version == 0 || st.Version > m.Version || st.Err != "" {
		t.Fatalf("catalog status of %s: %+v (drift %+v), want in sync at version %d or before", table, st, st.Drift, m.Version)
	}
	if !strings.HasPrefix(st.Metadata, "file://"+e.sink+"/_pgcdc/iceberg/") {
		t.Fatalf("metadata location %q is not under the sink's _pgcdc/iceberg/", st.Metadata)
	}

	// The files the changelog must hold: the change files before the
	// compaction (now folded) and after it.
	mt := m.Tables[table]
	files := map[string]manifest.File{}
	for _, f := range append(folded, changeFiles(m, table)...) {
		files[f.Path] = f
	}
	if st.Files != len(files) {
		t.Errorf("the changelog has %d files, want %d (the change files, the folded ones included)", st.Files, len(files))
	}

	fileVersions(m, table, written)
	cols, want := sinkChangeRows(t, e, mt, files, written)
	ib := readIcebird(t, mods, st.Metadata)

	// (c) The Iceberg schema is the manifest's, field ids included: the
	// added column with its id, the renamed one under its id.
	cur := mt.CurrentSchema()
	wantFields := map[int]string{}
	for _, f := range icebergschema.Metadata() {
		wantFields[f.ID] = f.Name
	}
	ids := map[string]int{}
	for _, c := range cur.Columns {
		wantFields[c.FieldID] = c.Name
		ids[c.Name] = c.FieldID
	}
	gotFields := map[int]string{}
	for _, f := range ib.Schema {
		gotFields[f.ID] = f.Name
	}
	if fmt.Sprint(gotFields) != fmt.Sprint(wantFields) {
		t.Errorf("the Iceberg schema's fields (id: name)\n got %v\nwant %v", gotFields, wantFields)
	}
	if ids["extra"] == 0 || gotFields[ids["extra"]] != "extra" {
		t.Errorf("the added column extra: manifest field id %d, Iceberg fields %v", ids["extra"], gotFields)
	}
	if first := mt.SchemaAt(0); first == nil || fieldID(first.Columns, "label") != ids["title"] {
		t.Errorf("the renamed column title has field id %d, label had %v", ids["title"], first)
	}
	// The widened column keeps its field id and is a long now; the dropped
	// one is gone.
	if first := mt.SchemaAt(0); first == nil || ids["qty"] == 0 || fieldID(first.Columns, "qty") != ids["qty"] {
		t.Errorf("the widened column qty has field id %d, before it was widened %v", ids["qty"], first)
	}
	for _, f := range ib.Schema {
		if f.Name == "qty" && f.Type != "long" {
			t.Errorf("the widened column qty is %v in the Iceberg schema, want long", f.Type)
		}
		if f.Name == "gone" {
			t.Error("the dropped column gone is still in the Iceberg schema")
		}
	}

	// (a) icebird's rows are the change rows as written, value by value.
	var got []string
	for _, r := range ib.Rows {
		got = append(got, canonRow(cols, func(c iceCol) any { return r[c.name] }))
	}
	slices.Sort(got)
	slices.Sort(want)
	for _, r := range append(slices.Clone(want), got...) {
		if strings.Contains(r, "=?") {
			t.Fatalf("a value of unexpected type (marked ?kind:type:value): %s", r)
		}
	}
	if os.Getenv("PGCDCTEST_ICEBERG_DUMP") != "" {
		t.Logf("change rows (icebird):\n%s", strings.Join(got, "\n"))
	}
	if len(got) != len(want) {
		t.Errorf("icebird read %d change rows, the sink's change files hold %d", len(got), len(want))
	}
	if !slices.Equal(got, want) {
		for i := 0; i < max(len(got), len(want)); i++ {
			g, w := "(none)", "(none)"
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Errorf("first difference at row %d of %d (sorted):\n icebird %s\n    sink %s", i, len(want), g, w)
				break
			}
		}
	}
	ops := map[string]int{}
	for _, r := range ib.Rows {
		op, _ := r["__op"].(string)
		ops[op]++
	}
	for _, op := range []string{"I", "U", "D", "T"} {
		if ops[op] == 0 {
			t.Errorf("icebird read no %s row (ops %v): the workload should have written some", op, ops)
		}
	}

	// (b) Replaying the changelog gives the source table, now and just
	// before the TRUNCATE (which a replay of everything forgets).
	var truncLSN int64 = -1
	for _, r := range ib.Rows {
		if r["__op"] == "T" {
			truncLSN, _ = strconv.ParseInt(canon("int", r["__lsn"]), 10, 64)
		}
	}
	for _, c := range []struct {
		what   string
		before int64
		want   []string
	}{{"now", -1, iceSourceRows(t, e)}, {"before the TRUNCATE", truncLSN, beforeTruncate}} {
		replayed := replayChangelog(t, ib.Rows, c.before)
		if !slices.Equal(replayed, c.want) {
			t.Errorf("the changelog replayed (%d rows) differs from the source %s (%d rows):\n got %s\nwant %s",
				len(replayed), c.what, len(c.want), strings.Join(replayed, "\n     "), strings.Join(c.want, "\n     "))
		}
	}

	// (d) The state table, read by icebird with its position deletes
	// applied (the compacted base's tombstones masked), is the source.
	var state catalog.TableStatus
	for _, ts := range status.Tables {
		if ts.Kind == catalog.KindState {
			state = ts
		}
	}
	if state.Metadata == "" {
		t.Fatalf("catalog status lists no state table with a metadata location: %+v", status.Tables)
	}
	var stateRows []string
	for _, r := range readIcebird(t, mods, state.Metadata).Rows {
		if r["__op"] == "D" {
			t.Errorf("the state table shows a tombstone: %v", r)
		}
		stateRows = append(stateRows, canonRow(tableCols, func(c iceCol) any { return r[c.name] }))
	}
	slices.Sort(stateRows)
	source := iceSourceRows(t, e)
	slices.Sort(source)
	if !slices.Equal(stateRows, source) {
		t.Errorf("the state table (%d rows, icebird) differs from the source (%d rows):\n got %s\nwant %s",
			len(stateRows), len(source), strings.Join(stateRows, "\n     "), strings.Join(source, "\n     "))
	}
	s.check()
}

// changeFiles are a table's change files in m, as the changelog holds
// them (catalog.ChangeFiles' rule, written out here: the snapshot base and
// every delta; a compacted base is state, not changes).
func changeFiles(m *manifest.Manifest, table string) []manifest.File {
	mt := m.Tables[table]
	var out []manifest.File
	if b := mt.Base; b != nil && b.CompactedAt == nil {
		out = append(out, b.Files...)
	}
	for _, d := range mt.Deltas {
		out = append(out, d.Files...)
	}
	return out
}

// fileVersions records in into the schema version each change file of
// table in m was written with (a compaction folds them out of the
// manifest, so a test records them before).
func fileVersions(m *manifest.Manifest, table string, into map[string]int) {
	mt := m.Tables[table]
	if b := mt.Base; b != nil && b.CompactedAt == nil {
		for _, f := range b.Files {
			into[f.Path] = b.SchemaVersion
		}
	}
	for _, d := range mt.Deltas {
		for _, f := range d.Files {
			into[f.Path] = d.SchemaVersion
		}
	}
}

// catalogStatus is pg-cdc catalog status --format json.
func catalogStatus(t *testing.T, e *env) (status struct {
	ManifestVersion uint64                `json:"manifest_version"`
	Tables          []catalog.TableStatus `json:"tables"`
}) {
	t.Helper()
	if err := json.Unmarshal([]byte(runTimed(t, e, time.Minute, "catalog", "status", "--format", "json")), &status); err != nil {
		t.Fatalf("catalog status --format json: %v", err)
	}
	return status
}

// changelogStatus is the changelog's entry in a catalog status.
func changelogStatus(t *testing.T, tables []catalog.TableStatus) catalog.TableStatus {
	t.Helper()
	for _, ts := range tables {
		if ts.Kind == catalog.KindChangelog {
			return ts
		}
	}
	t.Fatalf("catalog status lists no changelog: %+v", tables)
	return catalog.TableStatus{}
}

// writeWithout writes the configuration file from without the section cut.
func writeWithout(t *testing.T, from, to, cut string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(cut)) {
		t.Fatalf("%s has no %q", from, cut)
	}
	if err := os.WriteFile(to, bytes.Replace(data, []byte(cut), nil, 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fieldID(cols []manifest.Column, name string) int {
	for _, c := range cols {
		if c.Name == name {
			return c.FieldID
		}
	}
	return -1
}

// tableCols are the test table's columns in the current schema: the names
// the Iceberg table and the source use now.
var tableCols = []iceCol{{"id", "int"}, {"big", "int"}, {"title", "str"}, {"doc", "str"}, {"amount", "dec3"},
	{"at", "ts"}, {"flag", "bool"}, {"qty", "int"}, {"extra", "str"}}

// sinkChangeRows reads every file with DuckDB and returns the columns
// compared (the metadata columns, then the table's under their current
// names) and each row in canonical form. A file's columns are mapped to
// the current names by field id, through the schema version the manifest
// says it was written with.
func sinkChangeRows(t *testing.T, e *env, mt *manifest.Table, files map[string]manifest.File, version map[string]int) ([]iceCol, []string) {
	t.Helper()
	cols := append(slices.Clone(iceMeta), tableCols...)
	nameOf := map[int]string{} // field id → current name
	for _, c := range mt.CurrentSchema().Columns {
		nameOf[c.FieldID] = c.Name
	}
	var rows []string
	for _, path := range slices.Sorted(maps.Keys(files)) {
		sv := mt.SchemaAt(version[path])
		rename := map[string]string{} // name in the file → current name
		for _, c := range sv.Columns {
			rename[c.Name] = nameOf[c.FieldID]
		}
		db := openDuck(t)
		res, err := db.Query("SELECT * FROM read_parquet(" + sqlString(filepath.Join(e.sink, path)) + ")")
		if err != nil {
			t.Fatalf("duckdb read %s: %v", path, err)
		}
		names, _ := res.Columns()
		for res.Next() {
			vals := make([]any, len(names))
			ptrs := make([]any, len(names))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := res.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			byName := map[string]any{}
			for i, n := range names {
				if cur, ok := rename[n]; ok {
					n = cur
				}
				byName[n] = vals[i]
			}
			rows = append(rows, canonRow(cols, func(c iceCol) any { return byName[c.name] }))
		}
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		res.Close()
		db.Close()
	}
	return cols, rows
}

// canonRow is a row in canonical form: each column's value as canon
// prints it, in cols' order.
func canonRow(cols []iceCol, get func(iceCol) any) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.name + "=" + canon(c.kind, get(c))
	}
	return strings.Join(parts, " ")
}

// canon prints a value as DuckDB, icebird (JSON: int64 as a string, a
// timestamp as {"ts_us": ...}) or PostgreSQL's text form gives it, so that
// equal values print alike: integers in decimal, strings quoted, decimals
// with their scale's three digits, timestamps as microseconds since the
// epoch.
func canon(kind string, v any) string {
	if v == nil {
		return "NULL"
	}
	bad := func() string { return fmt.Sprintf("?%s:%T:%v", kind, v, v) }
	switch kind {
	case "int":
		switch x := v.(type) {
		case int32:
			return strconv.FormatInt(int64(x), 10)
		case int64:
			return strconv.FormatInt(x, 10)
		case json.Number:
			return x.String()
		case string:
			return x
		}
	case "str":
		if x, ok := v.(string); ok {
			return strconv.Quote(x)
		}
	case "bool":
		switch x := v.(type) {
		case bool:
			return strconv.FormatBool(x)
		case string:
			return x // PostgreSQL's text form: true, false
		}
	case "dec3":
		var f float64
		var err error
		switch x := v.(type) {
		case duckdb.Decimal:
			f = x.Float64()
		case json.Number:
			f, err = x.Float64()
		case string:
			f, err = strconv.ParseFloat(x, 64)
		default:
			return bad()
		}
		if err != nil {
			return bad()
		}
		return strconv.FormatFloat(f, 'f', 3, 64)
	case "ts":
		switch x := v.(type) {
		case time.Time:
			return strconv.FormatInt(x.UnixMicro(), 10)
		case map[string]any:
			if us, ok := x["ts_us"].(string); ok {
				return us
			}
		case string:
			return x
		}
	case "list":
		if x, ok := v.([]any); ok {
			parts := make([]string, len(x))
			for i, el := range x {
				parts[i] = canon("str", el)
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
	}
	return bad()
}

func openDuck(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "?autoinstall_known_extensions=false&autoload_known_extensions=false")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// replayChangelog applies the change rows in (__lsn, __seq) order, those
// before the LSN before only when it is not -1: a T removes every row, a D
// its key, an I or U sets its key's row, a column it lists in __unchanged
// keeping the key's previous value. It returns the live rows (the table's
// columns) in canonical form, by id.
func replayChangelog(t *testing.T, rows []map[string]any, before int64) []string {
	t.Helper()
	type change struct {
		lsn, seq int64
		r        map[string]any
	}
	num := func(r map[string]any, name string) int64 {
		n, err := strconv.ParseInt(canon("int", r[name]), 10, 64)
		if err != nil {
			t.Fatalf("change row %v: %s: %v", r, name, err)
		}
		return n
	}
	changes := make([]change, len(rows))
	changes = changes[:0]
	for _, r := range rows {
		if lsn := num(r, "__lsn"); before == -1 || lsn < before {
			changes = append(changes, change{lsn, num(r, "__seq"), r})
		}
	}
	slices.SortStableFunc(changes, func(a, b change) int {
		if a.lsn != b.lsn {
			return cmpInt(a.lsn, b.lsn)
		}
		return cmpInt(a.seq, b.seq)
	})
	state := map[int64]map[string]any{}
	for _, c := range changes {
		switch op := c.r["__op"]; op {
		case "T":
			state = map[int64]map[string]any{}
		case "D":
			delete(state, num(c.r, "id"))
		case "I", "U":
			id := num(c.r, "id")
			next := maps.Clone(c.r)
			unchanged, _ := c.r["__unchanged"].([]any)
			for _, name := range unchanged {
				if prev := state[id]; prev != nil {
					next[name.(string)] = prev[name.(string)]
				}
			}
			state[id] = next
		default:
			t.Fatalf("change row with __op %v: %v", op, c.r)
		}
	}
	var out []string
	for _, id := range slices.Sorted(maps.Keys(state)) {
		r := state[id]
		out = append(out, canonRow(tableCols, func(c iceCol) any { return r[c.name] }))
	}
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// iceSourceRows reads the test table from PostgreSQL now, in canonical form,
// by id.
func iceSourceRows(t *testing.T, e *env) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.conn.Query(ctx, `SELECT id::text, big::text, title, doc, amount::text,
		(extract(epoch FROM at) * 1000000)::bigint::text, flag::text, qty::text, extra FROM ice ORDER BY ice.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	var out []string
	for res.Next() {
		vals := make([]*string, len(tableCols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := res.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, canonRow(tableCols, func(c iceCol) any {
			i := slices.IndexFunc(tableCols, func(tc iceCol) bool { return tc.name == c.name })
			if vals[i] == nil {
				return nil
			}
			return *vals[i]
		}))
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// runTimed runs a pg-cdc command to completion within timeout and returns
// its standard output; a non-zero exit or the timeout fails the test.
func runTimed(t *testing.T, e *env, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"-c", e.config}, args...)...)
	cmd.Env = append(append(os.Environ(), quietMetrics), e.procEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("pg-cdc %v: %v (timeout %s)\n%s\n%s", args, err, timeout, stdout.String(), lines(withoutDebug(stderr.String()), 40))
	}
	return stdout.String()
}

// icebirdRead is what scripts/icebird-read.mjs prints.
type icebirdRead struct {
	Schema []struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
		Type any    `json:"type"` // a primitive's name, or a nested type's object
	} `json:"schema"`
	Rows             []map[string]any `json:"rows"`
	InflateFallbacks int              `json:"inflate_fallbacks"`
}

// readIcebird reads the Iceberg table at a metadata location with icebird.
func readIcebird(t *testing.T, mods, metadata string) icebirdRead {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot(t), "scripts", "icebird-read.mjs"), mods, metadata)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("icebird read of %s: %v\n%s", metadata, err, stderr.String())
	}
	var out icebirdRead
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("icebird read of %s: %v\n%s", metadata, err, stderr.String())
	}
	t.Logf("icebird read %d rows (%d Avro blocks inflated by zlib after gunzip failed)", len(out.Rows), out.InflateFallbacks)
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find the repository's root")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ensureIcebird installs icebird (scripts/ensure-icebird.sh) and returns
// its node_modules directory; without node or npm the test fails under
// CI=true and is skipped elsewhere (npmtest).
func ensureIcebird(t *testing.T) string {
	t.Helper()
	return npmtest.Ensure(t, "ensure-icebird.sh", "the Iceberg reader test")
}
