package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/extsort"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/render"
)

// Defaults of the report's caps.
const (
	DefaultMaxRanges   = 20
	DefaultMaxExamples = 10
)

// maxValueText is how much of a value's text a report shows.
const maxValueText = 64

// Range is a run of consecutive keys, in key order, that all differ: no key
// between First and Last is the same on both sides.
type Range struct {
	First   string `json:"first"` // key text, PostgreSQL's form: (id)=(42)
	Last    string `json:"last"`
	Keys    int64  `json:"keys"`
	Missing int64  `json:"missing_in_sink"`
	Extra   int64  `json:"extra_in_sink"`
	Changed int64  `json:"values_differ"`
}

// Example is one value difference, for the report.
type Example struct {
	Key    string `json:"key"`
	Column string `json:"column"`
	Source string `json:"source"` // value text, NULL as "NULL", cut to 64 bytes
	Sink   string `json:"sink"`
	// Unrecovered: the sink lists the column in __unchanged: PostgreSQL did
	// not send the value (unchanged TOAST) and no earlier version held it.
	Unrecovered bool `json:"unrecovered_toast,omitempty"`
}

// Counts are the outcome of comparing one table's rows.
type Counts struct {
	SourceRows int64 `json:"source_rows"`
	SinkRows   int64 `json:"sink_rows"`
	Matching   int64 `json:"matching"`
	Missing    int64 `json:"missing_in_sink"`
	Extra      int64 `json:"extra_in_sink"`
	Changed    int64 `json:"values_differ"`
	// Columns counts, per column, the rows whose value of it differs.
	Columns map[string]int64 `json:"columns_differ,omitempty"`
	// Unrecovered counts the differing values the sink itself marks as
	// never sent (unchanged TOAST without an earlier version).
	Unrecovered int64 `json:"unrecovered_toast,omitempty"`
	// Ranges lists the first ranges of differing keys; MoreRanges counts
	// those beyond the cap.
	Ranges     []Range   `json:"ranges,omitempty"`
	MoreRanges int64     `json:"more_ranges,omitempty"`
	Examples   []Example `json:"examples,omitempty"`
}

// Differs reports whether anything differs.
func (c *Counts) Differs() bool { return c.Missing+c.Extra+c.Changed > 0 }

// rowIter yields rows in key order; a row is valid until the next call;
// io.EOF ends it.
type rowIter interface {
	Next() (parquet.Row, error)
}

// comparer merge-joins the source's rows with the sink's, both sorted by
// cmpKey, and counts what differs. It holds no more than the current range's
// last key besides the two current rows.
type comparer struct {
	table       *render.Table
	cmpKey      func(a, b parquet.Row) int
	keyCols     []int // table columns that name a row in the report
	maxRanges   int
	maxExamples int

	c        Counts
	inRange  bool
	cur      Range
	lastKey  parquet.Row // the current range's last differing row, key columns only
	lastA    extsort.Arena
	srcCols  [][]parquet.Value
	sinkCols [][]parquet.Value
	keyBuf   [][]parquet.Value
	keyRow   parquet.Row
}

// firstDataLeaf is the leaf of a row's first table column.
const firstDataLeaf = parquetfile.FirstDataLeaf

func newComparer(t *render.Table, cmpKey func(a, b parquet.Row) int, keyCols []int, maxRanges, maxExamples int) *comparer {
	if maxRanges <= 0 {
		maxRanges = DefaultMaxRanges
	}
	switch {
	case maxExamples == 0:
		maxExamples = DefaultMaxExamples
	case maxExamples < 0:
		maxExamples = 0
	}
	return &comparer{table: t, cmpKey: cmpKey, keyCols: keyCols, maxRanges: maxRanges, maxExamples: maxExamples}
}

// run compares every row of src with every row of sink. Rows whose keys
// compare equal pair off in order, so a key (or, for a table without a
// primary key, a whole row) present n times on one side and m on the other
// counts min(n, m) pairs and |n-m| missing or extra rows.
func (cp *comparer) run(src, sink rowIter) (Counts, error) {
	s, err := next(src)
	if err != nil {
		return cp.c, fmt.Errorf("read source rows: %w", err)
	}
	k, err := next(sink)
	if err != nil {
		return cp.c, fmt.Errorf("read sink rows: %w", err)
	}
	for s != nil || k != nil {
		var c int
		switch {
		case s == nil:
			c = 1
		case k == nil:
			c = -1
		default:
			c = cp.cmpKey(s, k)
		}
		switch {
		case c < 0:
			cp.c.SourceRows++
			cp.c.Missing++
			cp.differs(s, 'm')
		case c > 0:
			cp.c.SinkRows++
			cp.c.Extra++
			cp.differs(k, 'e')
		default:
			cp.c.SourceRows++
			cp.c.SinkRows++
			same, err := cp.sameValues(s, k)
			if err != nil {
				return cp.c, err
			}
			if same {
				cp.c.Matching++
				cp.closeRange()
			} else {
				cp.c.Changed++
				cp.differs(s, 'c')
			}
		}
		if c <= 0 {
			if s, err = next(src); err != nil {
				return cp.c, fmt.Errorf("read source rows: %w", err)
			}
		}
		if c >= 0 {
			if k, err = next(sink); err != nil {
				return cp.c, fmt.Errorf("read sink rows: %w", err)
			}
		}
	}
	cp.closeRange()
	return cp.c, nil
}

// next returns the iterator's next row, or nil at its end.
func next(it rowIter) (parquet.Row, error) {
	row, err := it.Next()
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	return row, err
}

// differs records a differing row (kind m: missing in sink, e: extra in
// sink, c: values differ) in the current range, opening one if needed.
func (cp *comparer) differs(row parquet.Row, kind byte) {
	if !cp.inRange {
		cp.inRange = true
		cp.cur = Range{}
		if len(cp.c.Ranges) < cp.maxRanges {
			cp.cur.First = cp.keyText(row)
		}
	}
	cp.cur.Keys++
	switch kind {
	case 'm':
		cp.cur.Missing++
	case 'e':
		cp.cur.Extra++
	default:
		cp.cur.Changed++
	}
	if len(cp.c.Ranges) < cp.maxRanges {
		cp.lastA.Reset()
		cp.lastKey = cp.lastA.Clone(cp.keyOnly(row))
	}
}

// closeRange ends the current range, if any.
func (cp *comparer) closeRange() {
	if !cp.inRange {
		return
	}
	cp.inRange = false
	if len(cp.c.Ranges) >= cp.maxRanges {
		cp.c.MoreRanges++
		return
	}
	cp.cur.Last = cp.keyText(cp.lastKey)
	cp.c.Ranges = append(cp.c.Ranges, cp.cur)
}

// keyOnly returns the values of row's key columns, in keyCols order: a
// sub-row that keyText renders. It shares row's values.
func (cp *comparer) keyOnly(row parquet.Row) parquet.Row {
	cols, err := cp.table.Split(row, cp.keyBuf[:0])
	cp.keyBuf = cols
	if err != nil {
		return nil
	}
	out := cp.keyRow[:0]
	for _, c := range cp.keyCols {
		out = append(out, cols[c]...)
	}
	cp.keyRow = out
	return out
}

// keyText renders a row's key as PostgreSQL names one in its messages:
// (a, b)=(1, x). row is a whole row or a keyOnly sub-row.
func (cp *comparer) keyText(row parquet.Row) string {
	if len(row) > 0 && row[0].Column() < firstDataLeaf {
		row = cp.keyOnly(row)
	}
	names := cp.table.Names()
	var n, v strings.Builder
	n.WriteByte('(')
	for j, c := range cp.keyCols {
		if j > 0 {
			n.WriteString(", ")
			v.WriteString(", ")
		}
		n.WriteString(names[c])
		// The sub-row holds each key column's values (one, or an array's
		// elements) under its own leaf index, in keyCols order.
		leaf := firstDataLeaf + c
		i := 0
		for i < len(row) && row[i].Column() == leaf {
			i++
		}
		v.WriteString(cp.valueText(c, row[:i]))
		row = row[i:]
	}
	return n.String() + ")=(" + v.String() + ")"
}

// valueText renders one column's values for the report.
func (cp *comparer) valueText(col int, vals []parquet.Value) string {
	if len(vals) == 0 {
		return "?"
	}
	text, null, err := cp.table.Text(col, vals)
	switch {
	case err != nil:
		return "<" + err.Error() + ">"
	case null:
		return "NULL"
	case len(text) > maxValueText:
		return text[:maxValueText] + "…"
	}
	return text
}

// sameValues compares every table column of a source and a sink row with
// the same key, recording the columns that differ.
func (cp *comparer) sameValues(src, sink parquet.Row) (bool, error) {
	var err error
	if cp.srcCols, err = cp.table.Split(src, cp.srcCols); err != nil {
		return false, fmt.Errorf("source row: %w", err)
	}
	if cp.sinkCols, err = cp.table.Split(sink, cp.sinkCols); err != nil {
		return false, fmt.Errorf("sink row: %w", err)
	}
	same := true
	var unchanged []string
	for i := range cp.srcCols {
		if valuesEqual(cp.srcCols[i], cp.sinkCols[i]) {
			continue
		}
		if same {
			same = false
			if m, err := render.ReadMeta(sink); err == nil {
				unchanged = m.Unchanged
			}
		}
		name := cp.table.Names()[i]
		if cp.c.Columns == nil {
			cp.c.Columns = map[string]int64{}
		}
		cp.c.Columns[name]++
		unrecovered := slices.Contains(unchanged, name)
		if unrecovered {
			cp.c.Unrecovered++
		}
		if len(cp.c.Examples) < cp.maxExamples {
			cp.c.Examples = append(cp.c.Examples, Example{
				Key: cp.keyText(src), Column: name,
				Source: cp.valueText(i, cp.srcCols[i]), Sink: cp.valueText(i, cp.sinkCols[i]),
				Unrecovered: unrecovered,
			})
		}
	}
	return same, nil
}

// valuesEqual compares one column's values exactly: the same levels (so a
// NULL array, an empty array and an array of one NULL differ), the same
// kind, and the same bits (so NaN equals NaN, and -0 differs from +0, as
// the Parquet files hold them).
func valuesEqual(a, b []parquet.Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.RepetitionLevel() != y.RepetitionLevel() || x.DefinitionLevel() != y.DefinitionLevel() ||
			x.IsNull() != y.IsNull() {
			return false
		}
		if x.IsNull() {
			continue
		}
		if x.Kind() != y.Kind() {
			return false
		}
		switch x.Kind() {
		case parquet.Boolean:
			if x.Boolean() != y.Boolean() {
				return false
			}
		case parquet.Int32:
			if x.Int32() != y.Int32() {
				return false
			}
		case parquet.Int64:
			if x.Int64() != y.Int64() {
				return false
			}
		case parquet.Float:
			if math.Float32bits(x.Float()) != math.Float32bits(y.Float()) {
				return false
			}
		case parquet.Double:
			if math.Float64bits(x.Double()) != math.Float64bits(y.Double()) {
				return false
			}
		default:
			if !bytes.Equal(x.ByteArray(), y.ByteArray()) {
				return false
			}
		}
	}
	return true
}
