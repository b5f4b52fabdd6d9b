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
	return keyed(src, mt.PrimaryKey, watermark), nil
}

// watermark is the newest truncate as a condition rows must meet to
// survive it, "true" without one.
type watermark struct {
	cte  string // the WITH part that computes it, or ""
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
	cte := fmt.Sprintf("wm AS (SELECT max_by(l, (l, s)) AS wl, max_by(s, (l, s)) AS ws FROM (%s %s) t(l, s))", rows, folded)
	keep := "(wm.wl IS NULL OR __lsn > wm.wl OR (__lsn = wm.wl AND __seq > wm.ws))"
	return watermark{cte: cte, keep: keep}
}

// keyless keeps every I row not removed by a truncate, once per
// (__lsn, __seq).
func keyless(src *source, wm watermark) string {
	cols := strings.Join(quoted(src.newest.Columns), ", ")
	with, from := "", ""
	if wm.cte != "" {
		with, from = "WITH "+wm.cte+" ", ", wm"
	}
	return fmt.Sprintf(`%sSELECT %s FROM (
  SELECT *, row_number() OVER (PARTITION BY __lsn, __seq) AS __n
  FROM (%s) r%s
  WHERE __op = 'I' AND %s
) WHERE __n = 1`, with, cols, src.union(), from, wm.keep)
}

// keyed is the per-key merge.
func keyed(src *source, pk []string, wm watermark) string {
	keys := make([]string, len(pk))
	for i, k := range pk {
		keys[i] = Ident(k)
	}
	keyList := strings.Join(keys, ", ")
	cols := quoted(src.newest.Columns)
	var ctes []string
	if wm.cte != "" {
		ctes = append(ctes, wm.cte)
	}
	wmFrom := ""
	if wm.cte != "" {
		wmFrom = ", wm"
	}
	// The rows of the keys the deltas touch: their delta versions and, if
	// any, their base row.
	var touched, untouched string
	switch {
	case src.deltas == "":
		untouched = fmt.Sprintf("SELECT %s FROM (%s) b%s WHERE __op <> 'D' AND %s", strings.Join(cols, ", "), src.base, wmFrom, wm.keep)
	default:
		ctes = append(ctes, "d AS ("+src.deltas+")", fmt.Sprintf("dk AS (SELECT DISTINCT %s FROM d WHERE __op <> 'T')", keyList))
		touched = "SELECT * FROM d WHERE __op <> 'T'"
		if src.base != "" {
			ctes = append(ctes, "b AS ("+src.base+")")
			touched += fmt.Sprintf(" UNION ALL SELECT * FROM b SEMI JOIN dk USING (%s)", keyList)
			untouched = fmt.Sprintf("SELECT %s FROM b ANTI JOIN dk USING (%s)%s WHERE __op <> 'D' AND %s", strings.Join(cols, ", "), keyList, wmFrom, wm.keep)
		}
	}
	var parts []string
	if untouched != "" {
		parts = append(parts, untouched)
	}
	if touched != "" {
		parts = append(parts, mergeTouched(src, keyList, touched, wmFrom, wm.keep))
	}
	with := ""
	if len(ctes) > 0 {
		with = "WITH " + strings.Join(ctes, ",\n") + "\n"
	}
	return with + strings.Join(parts, "\nUNION ALL\n")
}

// mergeTouched folds the versions of each touched key: the winner, its
// unchanged columns filled from the key's newest earlier I/U version that
// sent them, since its last D.
func mergeTouched(src *source, keyList, touched, wmFrom, keep string) string {
	order := "__lsn, __seq, __base"
	var fills []string
	for _, c := range src.newest.Columns {
		name := Ident(c.Name)
		fills = append(fills, fmt.Sprintf(`CASE WHEN list_contains(coalesce(__unchanged, []), %s)
      THEN (last_value(CASE WHEN __op IN ('I', 'U') AND NOT list_contains(coalesce(__unchanged, []), %s) THEN {'v': %s} END IGNORE NULLS)
            OVER (PARTITION BY %s, __seg ORDER BY %s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)).v
      ELSE %s END AS %s`, Literal(c.Name), Literal(c.Name), name, keyList, order, name, name))
	}
	return fmt.Sprintf(`SELECT %s FROM (
  SELECT %s, __op,
    row_number() OVER (PARTITION BY %s ORDER BY __lsn DESC, __seq DESC, __base DESC) AS __n
  FROM (
    SELECT *, sum(CASE WHEN __op = 'D' OR __base THEN 1 ELSE 0 END) OVER (PARTITION BY %s ORDER BY %s ROWS UNBOUNDED PRECEDING) AS __seg
    FROM (%s) v%s
    WHERE %s
  )
) WHERE __n = 1 AND __op <> 'D'`, strings.Join(quoted(src.newest.Columns), ", "), strings.Join(fills, ",\n    "), keyList, keyList, order, touched, wmFrom, keep)
}

func quoted(cols []manifest.Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = Ident(c.Name)
	}
	return out
}
