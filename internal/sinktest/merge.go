package sinktest

import (
	"database/sql"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// MergedRows returns the current state of table ("schema.name") in the
// filesystem sink rooted at root: the files the manifest names for it (base
// and deltas), read with DuckDB and merged by design.md §7:
//
//   - a T row removes every version with (__lsn, __seq) older than itself;
//   - per primary key the newest version by (__lsn, __seq) wins, and a D
//     winner means the key is absent; replayed duplicates (same key and
//     order token) count once;
//   - a column listed in the winner's __unchanged takes its value from the
//     newest older I or U version of the key, since its last D, where it
//     was not unchanged (a D's values are not values; a version after a
//     delete of its key is a new row);
//   - a base's row is the fold of its key's versions up to its own: older
//     versions (replays of deltas compaction folded) add nothing to it, and
//     it counts rather than a replayed copy of its own version;
//   - a table without a primary key keeps every I row not removed by a T,
//     once per (__lsn, __seq).
//
// It returns the current schema version's column names in table order and
// the rows, sorted by primary key in DuckDB's (byte-wise) order, or by
// (__lsn, __seq) without one. Values are as DuckDB's database/sql driver
// returns them, except that UUID columns, which the driver returns as
// 16-byte []byte, are returned as duckdb.UUID so Canonical can tell them
// from bytea.
func MergedRows(tb testing.TB, root, table string) (cols []string, rows [][]any) {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(manifest.Key)))
	if err != nil {
		tb.Fatalf("read manifest: %v", err)
	}
	m, err := manifest.Decode(data)
	if err != nil {
		tb.Fatalf("sink %s: %v", root, err)
	}
	mt := m.Tables[table]
	if mt == nil {
		tb.Fatalf("table %s is not in the manifest of %s", table, root)
	}
	schema := mt.CurrentSchema()
	if schema == nil {
		tb.Fatalf("table %s has no schema version %d in the manifest", table, mt.SchemaVersion)
	}
	for _, c := range schema.Columns {
		cols = append(cols, c.Name)
	}
	baseFiles, deltaFiles := tableFiles(tb, root, mt)
	if len(baseFiles)+len(deltaFiles) == 0 {
		return cols, nil
	}

	db := openSandboxed(tb, root)
	from := readParquet(slices.Concat(baseFiles, deltaFiles))
	present, types := fileColumns(tb, db, from)
	for _, k := range mt.PrimaryKey {
		if !present[k] {
			tb.Fatalf("table %s: key column %q is in no file", table, k)
		}
	}

	truncLSN, truncSeq, truncated := lastTruncate(tb, db, from)
	if b := mt.Base; b != nil && b.Truncate != nil {
		// A truncate compaction folded: the files no longer hold it.
		if l, s := int64(b.Truncate.LSN), b.Truncate.Seq; !truncated || after(l, s, truncLSN, truncSeq) {
			truncLSN, truncSeq, truncated = l, s, true
		}
	}

	// The versions, each marked as a base's or a delta's, read per schema
	// version (design.md §8): a current column whose field id the files'
	// version lacks (added after them, or dropped and added again under its
	// name) reads its recorded missing value, else NULL; a dropped column
	// is not read.
	var parts []string
	for _, g := range versionGroups(tb, root, mt) {
		sel := []string{"__op", "__lsn", "__seq", "__unchanged", fmt.Sprintf("%t AS %s", g.base, baseCol)}
		sv := mt.SchemaAt(g.version)
		if sv == nil {
			tb.Fatalf("table %s: files of schema version %d, which the manifest does not hold", table, g.version)
		}
		// The group's own column for c: the same field id, under any name
		// (a rename); without field ids (an older manifest), the same name.
		own := func(c manifest.Column) *manifest.Column {
			for i, vc := range sv.Columns {
				if (c.FieldID != 0 && vc.FieldID == c.FieldID) || (c.FieldID == 0 && vc.FieldID == 0 && vc.Name == c.Name) {
					return &sv.Columns[i]
				}
			}
			return nil
		}
		for _, c := range schema.Columns {
			oc := own(c)
			switch {
			case oc != nil && present[oc.Name] && oc.ParquetType != c.ParquetType:
				// A type change: the value cast as PostgreSQL cast it.
				to := duckTypes[c.ParquetType]
				if to == "" {
					tb.Fatalf("table %s column %q: no cast from %s to %s", table, c.Name, oc.ParquetType, c.ParquetType)
				}
				sel = append(sel, "CAST("+ident(oc.Name)+" AS "+to+") AS "+ident(c.Name))
			case oc != nil && present[oc.Name]:
				sel = append(sel, ident(oc.Name)+" AS "+ident(c.Name))
			case c.MissingValue != nil && types[c.Name] != "":
				sel = append(sel, "CAST("+literal(*c.MissingValue)+" AS "+types[c.Name]+") AS "+ident(c.Name))
			case c.MissingValue != nil:
				sel = append(sel, literal(*c.MissingValue)+" AS "+ident(c.Name))
			case types[c.Name] != "":
				sel = append(sel, "CAST(NULL AS "+types[c.Name]+") AS "+ident(c.Name))
			default:
				// A column added after every file was written.
				sel = append(sel, "NULL AS "+ident(c.Name))
			}
		}
		parts = append(parts, "SELECT "+strings.Join(sel, ", ")+" FROM "+readParquet(g.files))
	}
	versionsFrom := "(" + strings.Join(parts, " UNION ALL BY NAME ") + ")"
	sel := []string{"__op", "__lsn", "__seq", "__unchanged", baseCol}
	for _, c := range cols {
		sel = append(sel, ident(c))
	}
	var order []string
	for _, k := range mt.PrimaryKey {
		order = append(order, ident(k))
	}
	// A base's row before a replayed copy of its version: the copy is the
	// duplicate.
	order = append(order, "__lsn", "__seq", baseCol+" DESC")
	q := "SELECT " + strings.Join(sel, ", ") + " FROM " + versionsFrom + " WHERE __op <> 'T' ORDER BY " + strings.Join(order, ", ")
	versions := queryVersions(tb, db, q, len(cols))

	var kept []version
	for _, v := range versions {
		if truncated && !after(v.lsn, v.seq, truncLSN, truncSeq) {
			continue
		}
		kept = append(kept, v)
	}
	uuidCols := map[int]bool{}
	for i, c := range schema.Columns {
		if c.ParquetType == "UUID" {
			uuidCols[i] = true
		}
	}
	if len(mt.PrimaryKey) == 0 {
		rows = mergeInsertOnly(tb, table, kept)
	} else {
		keyIdx := make([]int, len(mt.PrimaryKey))
		for i, k := range mt.PrimaryKey {
			keyIdx[i] = indexOf(cols, k)
			if keyIdx[i] < 0 {
				tb.Fatalf("table %s: key column %q is not in the current schema", table, k)
			}
		}
		rows = mergeByKey(kept, keyIdx, cols)
	}
	for _, r := range rows {
		for i := range uuidCols {
			if b, ok := r[i].([]byte); ok && len(b) == 16 {
				r[i] = duckdb.UUID(b)
			}
		}
	}
	return cols, rows
}

// baseCol marks the versions read from the base files.
const baseCol = "__sinktest_base"

// readParquet reads files (SQL literals) as one table.
func readParquet(files []string) string {
	return "read_parquet([" + strings.Join(files, ", ") + "], union_by_name = true)"
}

// tableFiles returns the absolute paths of the table's base files and of
// its delta files as SQL literals, refusing paths that would leave the sink
// root.
func tableFiles(tb testing.TB, root string, mt *manifest.Table) (base, deltas []string) {
	tb.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		tb.Fatalf("sink root %s: %v", root, err)
	}
	lit := func(f manifest.File) string {
		p := f.Path
		if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.HasPrefix(p, "../") || p == ".." {
			tb.Fatalf("manifest file path %q is not a clean relative key", p)
		}
		return literal(filepath.Join(abs, filepath.FromSlash(p)))
	}
	if mt.Base != nil {
		for _, f := range mt.Base.Files {
			base = append(base, lit(f))
		}
	}
	for _, d := range mt.Deltas {
		for _, f := range d.Files {
			deltas = append(deltas, lit(f))
		}
	}
	return base, deltas
}

// fileColumns returns the names of the columns the files hold, together,
// and their DuckDB types.
func fileColumns(tb testing.TB, db *sql.DB, from string) (map[string]bool, map[string]string) {
	tb.Helper()
	rows, err := db.Query("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM " + from + ")")
	if err != nil {
		tb.Fatalf("describe sink files: %v", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	types := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			tb.Fatalf("describe sink files: %v", err)
		}
		out[name] = true
		types[name] = typ
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("describe sink files: %v", err)
	}
	return out, types
}

// duckTypes are the DuckDB types of the Parquet types a column may change
// to (replicate's readableTypeChange).
var duckTypes = map[string]string{"INT16": "SMALLINT", "INT32": "INTEGER", "INT64": "BIGINT", "STRING": "VARCHAR"}

// fileGroup is files of one kind (base or delta) and schema version.
type fileGroup struct {
	base    bool
	version int
	files   []string // SQL literals
}

// versionGroups groups the table's files by kind and schema version, in
// manifest order.
func versionGroups(tb testing.TB, root string, mt *manifest.Table) []fileGroup {
	tb.Helper()
	var out []fileGroup
	add := func(base bool, version int, files []manifest.File) {
		if len(files) == 0 {
			return
		}
		if version == 0 && len(mt.Schemas) > 0 {
			version = mt.Schemas[0].Version
		}
		one := &manifest.Table{Base: &manifest.Base{Files: files}}
		lits, _ := tableFiles(tb, root, one)
		for i := range out {
			if out[i].base == base && out[i].version == version {
				out[i].files = append(out[i].files, lits...)
				return
			}
		}
		out = append(out, fileGroup{base: base, version: version, files: lits})
	}
	if mt.Base != nil {
		add(true, mt.Base.SchemaVersion, mt.Base.Files)
	}
	for _, d := range mt.Deltas {
		add(false, d.SchemaVersion, d.Files)
	}
	return out
}

// lastTruncate returns the order token of the newest T row, if any.
func lastTruncate(tb testing.TB, db *sql.DB, from string) (lsn, seq int64, ok bool) {
	tb.Helper()
	err := db.QueryRow("SELECT __lsn, __seq FROM "+from+" WHERE __op = 'T' ORDER BY __lsn DESC, __seq DESC LIMIT 1").Scan(&lsn, &seq)
	if err == sql.ErrNoRows {
		return 0, 0, false
	}
	if err != nil {
		tb.Fatalf("find truncate markers: %v", err)
	}
	return lsn, seq, true
}

// version is one change row of a table.
type version struct {
	op        string
	lsn, seq  int64
	unchanged []string
	base      bool // read from the base
	values    []any
}

func queryVersions(tb testing.TB, db *sql.DB, q string, ncols int) []version {
	tb.Helper()
	rows, err := db.Query(q)
	if err != nil {
		tb.Fatalf("read sink rows: %v\n%s", err, q)
	}
	defer rows.Close()
	var out []version
	for rows.Next() {
		var v version
		var unchanged any
		v.values = make([]any, ncols)
		dest := []any{&v.op, &v.lsn, &v.seq, &unchanged, &v.base}
		for i := range v.values {
			dest = append(dest, &v.values[i])
		}
		if err := rows.Scan(dest...); err != nil {
			tb.Fatalf("read sink rows: %v", err)
		}
		list, _ := unchanged.([]any)
		for _, u := range list {
			if s, ok := u.(string); ok {
				v.unchanged = append(v.unchanged, s)
			}
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("read sink rows: %v", err)
	}
	return out
}

// after reports whether (lsn, seq) is newer than (lsn2, seq2).
func after(lsn, seq, lsn2, seq2 int64) bool {
	return lsn > lsn2 || (lsn == lsn2 && seq > seq2)
}

// mergeByKey folds versions sorted by (key, __lsn, __seq) into one row per
// live key.
func mergeByKey(versions []version, keyIdx []int, cols []string) [][]any {
	var out [][]any
	for start := 0; start < len(versions); {
		key := keyOf(versions[start], keyIdx)
		end := start + 1
		for end < len(versions) && keyOf(versions[end], keyIdx) == key {
			end++
		}
		if row := foldKey(versions[start:end], cols); row != nil {
			out = append(out, row)
		}
		start = end
	}
	return out
}

// foldKey applies one key's versions, oldest first, and returns its current
// row, or nil when the newest version is a delete.
func foldKey(versions []version, cols []string) []any {
	last := make([]any, len(cols)) // newest value of each column that was sent
	var cur []any
	var prevLSN, prevSeq int64 = -1, -1
	for _, v := range versions {
		if v.lsn == prevLSN && v.seq == prevSeq {
			continue // a replayed duplicate
		}
		prevLSN, prevSeq = v.lsn, v.seq
		if v.base {
			// Older versions are replays of what it folded; its values
			// are final, the ones it still lists lost included.
			last = make([]any, len(cols))
		}
		switch v.op {
		case "D":
			cur = nil
			last = make([]any, len(cols)) // a later version is a new row
		case "I", "U":
			row := make([]any, len(cols))
			copy(row, v.values)
			for _, name := range v.unchanged {
				if i := indexOf(cols, name); i >= 0 {
					row[i] = last[i]
				}
			}
			for i := range cols {
				if !contains(v.unchanged, cols[i]) {
					last[i] = v.values[i]
				}
			}
			cur = row
		}
	}
	return cur
}

// mergeInsertOnly keeps each I row once; versions are sorted by
// (__lsn, __seq).
func mergeInsertOnly(tb testing.TB, table string, versions []version) [][]any {
	tb.Helper()
	var out [][]any
	var prevLSN, prevSeq int64 = -1, -1
	for _, v := range versions {
		if v.op != "I" {
			tb.Fatalf("table %s has no primary key but holds a %s row at (%d, %d)", table, v.op, v.lsn, v.seq)
		}
		if v.lsn == prevLSN && v.seq == prevSeq {
			continue
		}
		prevLSN, prevSeq = v.lsn, v.seq
		out = append(out, v.values)
	}
	return out
}

func keyOf(v version, keyIdx []int) string {
	var b strings.Builder
	for _, i := range keyIdx {
		b.WriteString(Canonical(v.values[i]))
		b.WriteByte(0)
	}
	return b.String()
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func contains(list []string, s string) bool { return indexOf(list, s) >= 0 }
