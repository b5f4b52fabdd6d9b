package mergesql

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Changes is the SELECT of the table's change rows at the version: every
// row of its base and deltas (inside the Bound), in the newest schema, with
// the metadata columns (__op, __lsn, __seq, __xid, __op_ts, __unchanged).
// ErrNoFiles when the table has no file.
func Changes(in Input) (string, error) {
	src, err := readSource(in)
	if err != nil {
		return "", err
	}
	cols := append(quoted(src.newest.Columns), metadata...)
	return fmt.Sprintf("SELECT %s FROM (%s)", strings.Join(cols, ", "), src.union()), nil
}

// union is every row, base and deltas.
func (s *source) union() string {
	switch {
	case s.base == "":
		return s.deltas
	case s.deltas == "":
		return s.base
	}
	return s.base + "\nUNION ALL\n" + s.deltas
}

// State is the SELECT of the table's current state at the version (inside
// the Bound): its newest columns, in table order, one row per live key (a
// keyless table: every insert not removed by a truncate, once per
// (__lsn, __seq)). ErrNoFiles when the table has no file. The rules are
// those of internal/merge (design.md §7):
//
//   - a T row removes every version older than itself (and so does the
//     truncate a base folded, manifest.Base.Truncate);
//   - per key the newest version by (__lsn, __seq) wins, the base's row
//     before a replayed copy of its own version; a D winner is no row;
//   - a column the winner lists in __unchanged takes its value from the
//     key's newest older I or U version that sent it, since the key's last
//     D and no further back than its base row (the base's fold of every
//     older version); with none, it stays NULL.
//
// The base holds one row per key (a snapshot, or compaction's fold), so only
// the keys the deltas touch are merged: the others are the base's rows as
// they are.
func State(in Input) (string, error) {
	src, err := readSource(in)
	if err != nil {
		return "", err
	}
	mt := in.Table
	watermark := truncateWatermark(src, in)
	if len(mt.PrimaryKey) == 0 {
		return keyless(src, watermark), nil
	}
	for _, k := range mt.PrimaryKey {
		if !slices.ContainsFunc(src.newest.Columns, func(c manifest.Column) bool { return c.Name == k }) {
			return "", fmt.Errorf("table %s: key column %q is not in the newest schema version", mt.ID(), k)
		}
	}
	return keyed(src, mt.PrimaryKey, watermark, mt.Base), nil
}

// watermark is the newest truncate as a condition rows must meet to
// survive it, "true" without one.
type watermark struct {
	from string // ", (SELECT …) wm": the one-row relation that computes it, or ""
	keep string // the condition on a row (columns __lsn, __seq)
}

// truncateWatermark finds the newest T row (of the bounded rows) and the
// truncate a base folded.
func truncateWatermark(src *source, in Input) watermark {
	var folded string
	if b := in.Table.Base; b != nil && b.Truncate != nil {
		folded = fmt.Sprintf("UNION ALL SELECT %d, %d", int64(b.Truncate.LSN), b.Truncate.Seq)
	}
	if src.deltas == "" && folded == "" {
		return watermark{keep: "true"}
	}
	rows := "SELECT __lsn, __seq FROM (" + src.union() + ") WHERE __op = 'T'"
	from := fmt.Sprintf(", (SELECT max_by(l, (l, s)) AS wl, max_by(s, (l, s)) AS ws FROM (%s %s) t(l, s)) wm", rows, folded)
	keep := "(wm.wl IS NULL OR __lsn > wm.wl OR (__lsn = wm.wl AND __seq > wm.ws))"
	return watermark{from: from, keep: keep}
}

// keyless keeps every I row not removed by a truncate, once per
// (__lsn, __seq).
func keyless(src *source, wm watermark) string {
	cols := strings.Join(quoted(src.newest.Columns), ", ")
	return fmt.Sprintf(`SELECT %s FROM (
  SELECT *, row_number() OVER (PARTITION BY __lsn, __seq) AS __n
  FROM (%s) r%s
  WHERE __op = 'I' AND %s
) WHERE __n = 1`, cols, src.union(), wm.from, wm.keep)
}

// keyed is the per-key merge, as two parts:
//
//   - untouched: the base rows of the keys no delta row names, as they are
//     (the base holds one row per key);
//   - touched: the merge of the keys the deltas name (mergeTouched).
//
// The shape is for DuckDB's optimizer, and it matters (BENCHMARKS.md, "Read
// path"): the untouched part is almost all the table, so a query's filters
// and its projection must reach the base's read_parquet — a count(*) then
// reads the key column only, a filter prunes row groups and rows before
// the other columns are read. DuckDB pushes both through the UNION ALL and
// the ANTI JOIN, but not out of a WITH: a CTE at the top of the view keeps
// every column of whatever is below it (and a CTE read twice is
// materialized, all of it). So the untouched part names no CTE: it reads
// the base, the deltas' key column (the keys to leave out) and the
// truncate watermark inline, each scan reading only what it needs. The
// touched part is small (the deltas' rows and at most one base row per key
// they name) and has CTEs of its own, inside its subquery.
func keyed(src *source, pk []string, wm watermark, base *manifest.Base) string {
	cols := quoted(src.newest.Columns)
	keys := make([]string, len(pk))
	for i, k := range pk {
		keys[i] = Ident(k)
	}
	keyList := strings.Join(keys, ", ")
	if src.deltas == "" {
		return fmt.Sprintf("SELECT %s FROM (%s) b%s WHERE __op <> 'D' AND %s", strings.Join(cols, ", "), src.base, wm.from, wm.keep)
	}
	touched := mergeTouched(src, keys, wm, base)
	if src.base == "" {
		return touched
	}
	untouched := fmt.Sprintf(`SELECT %s FROM (%s) b
  ANTI JOIN (SELECT %s FROM (%s) WHERE __op <> 'T') dk USING (%s)%s
  WHERE __op <> 'D' AND %s`, strings.Join(cols, ", "), src.base, keyList, src.deltas, keyList, wm.from, wm.keep)
	return untouched + "\nUNION ALL\n" + touched
}

// mergeTouched folds the versions of each key the deltas name: the newest
// version by (__lsn, __seq, __base) wins, unless a D; a column the winner
// lists in __unchanged takes its value from the key's newest earlier I/U
// version that sent it, since the key's last D or base row (the segment
// the winner is in), or stays NULL.
//
// It is written with aggregates, not window functions: a window sorts
// every version of every key for each of its frames (of the winner, the
// segments and each column's fill), which cost more than all the rest of a
// query put together, while the fill is needed only for the few winners
// that list a column as unchanged.
//
//   - need: the keys whose base row can matter — one that a delta row of
//     the key might not be newer than (an __lsn at or before the base's
//     max_lsn: a replay of what the base folded), or one whose fill might
//     reach the base (a delta row lists a column as unchanged). For any
//     other key the newest delta row wins and sends every column, so its
//     base row is not read: mostly none is, and the base scan of this part
//     stops at once (an empty SEMI JOIN side). need reads the deltas' key,
//     __lsn and __unchanged columns on its own: a scan of a few narrow
//     columns costs less than holding all of them in one more CTE. It
//     relies on manifest.Base.MaxLSN being at or after every base row's
//     __lsn (a snapshot's LSN; compaction's newest folded __lsn); a base
//     without one (0) reads the base row of every touched key;
//   - v: every version of the touched keys that survives the truncate
//     watermark (the deltas' rows but T, which only set the watermark, and
//     the base rows of need), materialized once (so __rid is one row id
//     for all its readers), with __pos (its order) and __rid (identical
//     duplicates of the winning version tie on __pos, and one must win);
//   - w: the winner of each key (the version of the arg_max row id);
//   - s, f: for the winners that list a column as unchanged, the start of
//     their segment (the newest D or base row at or before them) and, per
//     column, the newest version in [start, winner) that sent it.
func mergeTouched(src *source, keys []string, wm watermark, base *manifest.Base) string {
	keyList := strings.Join(keys, ", ")
	var onVW, onVS []string
	for _, k := range keys {
		onVW = append(onVW, fmt.Sprintf("v.%s IS NOT DISTINCT FROM w.%s", k, k))
		onVS = append(onVS, fmt.Sprintf("v.%s IS NOT DISTINCT FROM s.%s", k, k))
	}
	var wKeys []string
	for _, k := range keys {
		wKeys = append(wKeys, "w."+k)
	}
	var ctes []string
	versions := "SELECT * FROM (" + src.deltas + ") WHERE __op <> 'T'"
	if src.base != "" {
		cond := "true" // without a known max_lsn, every base row of the touched keys
		if base != nil && base.MaxLSN != 0 {
			cond = fmt.Sprintf("__lsn <= %d OR len(__unchanged) > 0", int64(base.MaxLSN))
		}
		ctes = append(ctes, fmt.Sprintf("need AS (SELECT %s FROM (%s) WHERE __op <> 'T' AND (%s))", keyList, src.deltas, cond))
		versions += fmt.Sprintf(" UNION ALL SELECT * FROM (%s) b SEMI JOIN need USING (%s)", src.base, keyList)
	}
	ctes = append(ctes,
		fmt.Sprintf(`v AS MATERIALIZED (
    SELECT u.*, (__lsn, __seq, __base) AS __pos, row_number() OVER () AS __rid
    FROM (%s) u%s
    WHERE %s
  )`, versions, wm.from, wm.keep),
		fmt.Sprintf("w AS (SELECT v.* FROM v SEMI JOIN (SELECT arg_max(__rid, __pos) AS __rid FROM v GROUP BY %s) USING (__rid))", keyList))
	var fills, outs []string
	for i, c := range src.newest.Columns {
		name := Ident(c.Name)
		fills = append(fills, fmt.Sprintf("arg_max({'v': v.%s}, v.__pos) FILTER (WHERE v.__op IN ('I', 'U') AND NOT list_contains(coalesce(v.__unchanged, []), %s)) AS __f%d",
			name, Literal(c.Name), i))
		outs = append(outs, fmt.Sprintf("CASE WHEN list_contains(coalesce(w.__unchanged, []), %s) THEN f.__f%d.v ELSE w.%s END AS %s", Literal(c.Name), i, name, name))
	}
	ctes = append(ctes,
		fmt.Sprintf(`s AS (
    SELECT %s, w.__pos AS __wpos, max(v.__pos) FILTER (WHERE v.__op = 'D' OR v.__base) AS __start
    FROM w JOIN v ON %s AND v.__pos <= w.__pos
    WHERE w.__op <> 'D' AND len(w.__unchanged) > 0
    GROUP BY ALL
  )`, strings.Join(wKeys, ", "), strings.Join(onVW, " AND ")),
		fmt.Sprintf(`f AS (
    SELECT %s,
      %s
    FROM v JOIN s ON %s AND v.__pos < s.__wpos AND (s.__start IS NULL OR v.__pos >= s.__start)
    GROUP BY ALL
  )`, strings.Join(prefixed("v.", keys), ", "), strings.Join(fills, ",\n      "), strings.Join(onVS, " AND ")))
	return fmt.Sprintf(`SELECT * FROM (
  WITH %s
  SELECT %s
  FROM w LEFT JOIN f USING (%s)
  WHERE w.__op <> 'D'
)`, strings.Join(ctes, ",\n  "), strings.Join(outs, ",\n    "), keyList)
}

func prefixed(p string, xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = p + x
	}
	return out
}

func quoted(cols []manifest.Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = Ident(c.Name)
	}
	return out
}
