package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// The soak's end check by an independent reader (issue 29, "Must show"):
// DuckDB reads the Parquet files that _pgcdc/manifest.json names for a
// table (its base and its deltas), the merge of design.md §7 is written
// out here, on purpose apart from pg-cdc's own merge SQL (internal/mergesql,
// which pg-cdc dump and query use), and the result is compared with
// PostgreSQL's rows value by value. pg-cdc dump against COPY is pg-cdc
// reading what pg-cdc wrote: a mistake made alike by the writer and its
// reader would pass it, not this.
//
// The merge covers what the soak's tables can hold and refuses the rest
// rather than guess: a truncate (the soak issues none) and a winning
// version that lists a column as unchanged (TOAST; the soak's rows are far
// too small for it) make the table's check fail with the reason.

// soakRow is one row of a soak table (id bigint, a int, b text,
// c numeric(12,2), d timestamptz) rendered as text the same way from
// either side, so that equal text is equal value: id and a in decimal, b
// Go-quoted (so the text "NULL" stays apart from a null), c as
// numeric(12,2)'s own text (two decimals, from PostgreSQL's ::text and
// DuckDB's cast of DECIMAL(12,2) alike), d in UTC with all six decimals of
// its microseconds; a null is NULL.
type soakRow []string

const soakNull = "NULL"

// soakTimeLayout renders d: both sides hold microseconds (timestamptz,
// Parquet TIMESTAMP(us,UTC)), so six fixed decimals lose nothing and never
// depend on how either side trims zeros.
const soakTimeLayout = "2006-01-02 15:04:05.000000Z07:00"

func renderSoakRow(id, a *int64, b, c *string, d *time.Time) soakRow {
	row := soakRow{soakNull, soakNull, soakNull, soakNull, soakNull}
	if id != nil {
		row[0] = strconv.FormatInt(*id, 10)
	}
	if a != nil {
		row[1] = strconv.FormatInt(*a, 10)
	}
	if b != nil {
		row[2] = strconv.Quote(*b)
	}
	if c != nil {
		row[3] = *c
	}
	if d != nil {
		row[4] = d.UTC().Format(soakTimeLayout)
	}
	return row
}

// pgSoakRows reads a soak table from PostgreSQL, ordered by id.
func pgSoakRows(ctx context.Context, c *pgx.Conn, table string) ([]soakRow, error) {
	rows, err := c.Query(ctx, "SELECT id, a, b, c::text, d FROM "+pgx.Identifier{table}.Sanitize()+" ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	defer rows.Close()
	var out []soakRow
	for rows.Next() {
		var (
			id, a *int64
			b, cv *string
			d     *time.Time
		)
		if err := rows.Scan(&id, &a, &b, &cv, &d); err != nil {
			return nil, fmt.Errorf("read %s: %w", table, err)
		}
		out = append(out, renderSoakRow(id, a, b, cv, d))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	return out, nil
}

// openOracle opens an in-memory DuckDB for the check: no extension is
// installed or loaded on demand (parquet is linked into the driver), and
// a spill goes to tmp.
func openOracle(ctx context.Context, tmp string) (*sql.DB, error) {
	db, err := sql.Open("duckdb", "?autoinstall_known_extensions=false&autoload_known_extensions=false")
	if err != nil {
		return nil, fmt.Errorf("open duckdb: %w", err)
	}
	for _, s := range []string{
		"SET temp_directory = " + sqlLiteral(tmp),
		fmt.Sprintf("SET threads = %d", readLimits.Threads),
		fmt.Sprintf("SET memory_limit = '%dB'", readLimits.MemoryBytes),
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			db.Close()
			return nil, fmt.Errorf("duckdb %s: %w", s, err)
		}
	}
	return db, nil
}

// oracleInfo is what the check learned about a table's files besides its
// rows.
type oracleInfo struct {
	files int // files read: base and deltas
	// dupChanges counts delta rows that repeat another's (key, __lsn,
	// __seq): a replayed change the merge folds into one (design.md §1.1
	// rule 4). Not a loss nor a duplicate of the table's state.
	dupChanges int64
}

// errOracleUnfit is a table this check cannot judge (see the file's
// comment); it fails the table's check with its reason.
var errOracleUnfit = errors.New("beyond this check's merge")

// oracleSource is the SELECT of every version of a soak table that the
// manifest's files hold: the metadata columns (parquetfile's names), a
// flag for the base's rows, the count of columns the version lists as
// unchanged, and the table's columns. "" when the manifest names no file.
func oracleSource(sink string, mt *manifest.Table) (string, int) {
	lit := func(files []manifest.File) []string {
		out := make([]string, len(files))
		for i, f := range files {
			out[i] = sqlLiteral(filepath.Join(sink, filepath.FromSlash(f.Path)))
		}
		return out
	}
	var base, deltas []string
	if mt.Base != nil {
		base = lit(mt.Base.Files)
	}
	for _, d := range mt.Deltas {
		deltas = append(deltas, lit(d.Files)...)
	}
	part := func(files []string, isBase bool) string {
		return fmt.Sprintf("SELECT %s, %s, %s, %t AS is_base, coalesce(len(%s), 0) AS n_unchanged, id, a, b, c, d FROM read_parquet([%s], union_by_name = true)",
			parquetfile.ColOp, parquetfile.ColLSN, parquetfile.ColSeq, isBase, parquetfile.ColUnchanged, strings.Join(files, ", "))
	}
	var parts []string
	if len(base) > 0 {
		parts = append(parts, part(base, true))
	}
	if len(deltas) > 0 {
		parts = append(parts, part(deltas, false))
	}
	return strings.Join(parts, "\nUNION ALL\n"), len(base) + len(deltas)
}

// oracleStateSQL is the table's current state from the versions src
// selects: per id the newest version by (__lsn, __seq) wins, a base's row
// before a delta row at the same position (the same change, replayed); a
// winning delete is no row. The winner's op and its unchanged count come
// along so the caller can refuse what it cannot judge.
func oracleStateSQL(src string) string {
	return fmt.Sprintf(`SELECT op, n_unchanged, id, a, b, CAST(c AS VARCHAR), d FROM (
  SELECT %[1]s AS op, n_unchanged, id, a, b, c, d FROM (%[4]s) v
  WHERE %[1]s <> 'T'
  QUALIFY row_number() OVER (PARTITION BY id ORDER BY %[2]s DESC, %[3]s DESC, is_base DESC) = 1
) WHERE op <> 'D'
ORDER BY id`, parquetfile.ColOp, parquetfile.ColLSN, parquetfile.ColSeq, src)
}

// oracleChecksSQL counts the truncate markers among the versions and the
// delta rows that repeat another's (key, __lsn, __seq).
func oracleChecksSQL(src string) string {
	return fmt.Sprintf(`SELECT
  (SELECT count(*) FROM (%[4]s) WHERE %[1]s = 'T'),
  (SELECT coalesce(sum(n - 1), 0) FROM (
     SELECT count(*) AS n FROM (%[4]s) WHERE NOT is_base AND %[1]s <> 'T' GROUP BY id, %[2]s, %[3]s HAVING count(*) > 1))`,
		parquetfile.ColOp, parquetfile.ColLSN, parquetfile.ColSeq, src)
}

// oracleRows reads a soak table's current state from the files the
// manifest names, ordered by id.
func oracleRows(ctx context.Context, db *sql.DB, sink string, mt *manifest.Table) ([]soakRow, oracleInfo, error) {
	var info oracleInfo
	if mt.Base != nil && mt.Base.Truncate != nil {
		return nil, info, fmt.Errorf("its base folded a truncate: %w", errOracleUnfit)
	}
	src, files := oracleSource(sink, mt)
	info.files = files
	if files == 0 {
		return nil, info, nil
	}
	var truncates int64
	if err := db.QueryRowContext(ctx, oracleChecksSQL(src)).Scan(&truncates, &info.dupChanges); err != nil {
		return nil, info, fmt.Errorf("duckdb: %w", err)
	}
	if truncates > 0 {
		return nil, info, fmt.Errorf("%d truncate markers: %w", truncates, errOracleUnfit)
	}
	rows, err := db.QueryContext(ctx, oracleStateSQL(src))
	if err != nil {
		return nil, info, fmt.Errorf("duckdb: %w", err)
	}
	defer rows.Close()
	var out []soakRow
	for rows.Next() {
		var (
			op        string
			unchanged int64
			id, a     *int64
			b, c      *string
			d         *time.Time
		)
		if err := rows.Scan(&op, &unchanged, &id, &a, &b, &c, &d); err != nil {
			return nil, info, fmt.Errorf("duckdb: %w", err)
		}
		row := renderSoakRow(id, a, b, c, d)
		switch {
		case op != "I" && op != "U":
			return nil, info, fmt.Errorf("id %s: the newest version's __op is %q: %w", row[0], op, errOracleUnfit)
		case unchanged > 0:
			return nil, info, fmt.Errorf("id %s: the newest version lists %d columns as unchanged (TOAST): %w", row[0], unchanged, errOracleUnfit)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, info, fmt.Errorf("duckdb: %w", err)
	}
	return out, info, nil
}

// diffSoakRows compares PostgreSQL's rows with the sink's, each keyed by
// its first cell (id), and returns how many differences there are and
// the first few (at most limit), in PostgreSQL's order then the sink's:
// a row differing in any value, a row missing from the sink, a row the
// sink holds that PostgreSQL does not, an id the sink holds twice.
func diffSoakRows(pg, sink []soakRow, limit int) (int, []string) {
	var (
		n     int
		first []string
	)
	report := func(format string, args ...any) {
		n++
		if len(first) < limit {
			first = append(first, fmt.Sprintf(format, args...))
		}
	}
	bySink := make(map[string]soakRow, len(sink))
	for _, r := range sink {
		if _, dup := bySink[r[0]]; dup {
			report("id %s: twice in the sink", r[0])
			continue
		}
		bySink[r[0]] = r
	}
	inPG := make(map[string]bool, len(pg))
	for _, w := range pg {
		inPG[w[0]] = true
		g, ok := bySink[w[0]]
		switch {
		case !ok:
			report("id %s: in PostgreSQL, not in the sink: %s", w[0], strings.Join(w, ", "))
		case !sameRow(w, g):
			report("id %s: PostgreSQL (%s), the sink (%s)", w[0], strings.Join(w, ", "), strings.Join(g, ", "))
		}
	}
	for _, g := range sink {
		if !inPG[g[0]] {
			inPG[g[0]] = true // once per id, a twice-held one included
			report("id %s: in the sink, not in PostgreSQL: %s", g[0], strings.Join(g, ", "))
		}
	}
	return n, first
}

func sameRow(a, b soakRow) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sqlLiteral quotes s as a SQL string literal.
func sqlLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
