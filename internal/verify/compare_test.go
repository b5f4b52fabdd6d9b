package verify

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/merge"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/render"
)

// testTable: id bigint primary key, f float8, s text, arr int4[].
var testTable = &cdc.Table{
	ID:              cdc.TableID{Schema: "public", Name: "t"},
	OID:             16384,
	PrimaryKey:      []string{"id"},
	ReplicaIdentity: cdc.ReplicaIdentityDefault,
	Columns: []cdc.Column{
		{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", NotNull: true, FieldID: 1},
		{Name: "f", TypeOID: 701, TypeMod: -1, PGType: "double precision", FieldID: 2},
		{Name: "s", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 3},
		{Name: "arr", TypeOID: 1007, TypeMod: -1, PGType: "integer[]", ElemTypeOID: 23, FieldID: 4},
	},
}

// tr is one row of the test table; a nil field is NULL, unset leaves s
// unchanged (TOAST).
type tr struct {
	id    int64
	f     *string
	s     *string
	arr   *string
	unset bool
}

func p(s string) *string { return &s }

func datum(s *string) cdc.Datum {
	if s == nil {
		return cdc.Datum{Kind: cdc.DatumNull}
	}
	return cdc.Datum{Kind: cdc.DatumText, Text: []byte(*s)}
}

// fixture is the schema and the comparer's inputs for the test table (or a
// copy of it without a primary key).
type fixture struct {
	t      *testing.T
	table  *cdc.Table
	schema *parquetfile.Schema
	render *render.Table
	order  merge.Order
	key    []int
}

func newFixture(t *testing.T, keyless bool) *fixture {
	t.Helper()
	table := testTable
	if keyless {
		c := *testTable
		c.PrimaryKey = nil
		table = &c
	}
	s, err := parquetfile.NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := render.NewTable(s.ManifestColumns(table))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, table: table, schema: s, render: rt}
	if keyless {
		f.key = []int{0, 1, 2, 3}
	} else {
		f.key = []int{0}
	}
	f.order = merge.NewOrder(f.key)
	return f
}

// rows converts test rows to Parquet rows through the writer, sorted.
func (f *fixture) rows(in ...tr) []parquet.Row {
	f.t.Helper()
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, f.schema)
	for i, r := range in {
		vals := []cdc.Datum{datum(p(strconv.FormatInt(r.id, 10))), datum(r.f), datum(r.s), datum(r.arr)}
		if r.unset {
			vals[2] = cdc.Datum{Kind: cdc.DatumUnchanged}
		}
		if err := w.Write(cdc.RowMeta{Op: cdc.OpInsert, Seq: int64(i)}, vals); err != nil {
			f.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		f.t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		f.t.Fatal(err)
	}
	r := parquet.NewReader(pf)
	defer r.Close()
	out := make([]parquet.Row, len(in))
	n, err := r.ReadRows(out)
	if err != nil && !errors.Is(err, io.EOF) || n != len(in) {
		f.t.Fatalf("read back %d of %d rows: %v", n, len(in), err)
	}
	for i := range out {
		out[i] = out[i].Clone()
	}
	slices.SortStableFunc(out, f.order.Compare)
	return out
}

type sliceIter struct {
	rows []parquet.Row
	i    int
}

func (s *sliceIter) Next() (parquet.Row, error) {
	if s.i >= len(s.rows) {
		return nil, io.EOF
	}
	s.i++
	return s.rows[s.i-1], nil
}

func (f *fixture) compare(maxRanges, maxExamples int, src, sink []parquet.Row) Counts {
	f.t.Helper()
	cp := newComparer(f.render, f.order.CompareKey, f.key, maxRanges, maxExamples)
	c, err := cp.run(&sliceIter{rows: src}, &sliceIter{rows: sink})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// plain returns rows 1..n with ordinary values.
func plain(ids ...int64) []tr {
	var out []tr
	for _, id := range ids {
		out = append(out, tr{id: id, f: p("1.5"), s: p("row " + strconv.FormatInt(id, 10)), arr: p("{1,2}")})
	}
	return out
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func TestCompareEqual(t *testing.T) {
	f := newFixture(t, false)
	rows := f.rows(append(plain(seq(1, 50)...),
		tr{id: 51, f: p("NaN"), s: p(""), arr: p("{}")},
		tr{id: 52, f: p("-0"), arr: p("{NULL}")},
		tr{id: 53, f: p("-Infinity"), s: p("é\t\\"), arr: nil},
	)...)
	c := f.compare(0, 0, rows, f.rows(append(plain(seq(1, 50)...),
		tr{id: 51, f: p("NaN"), s: p(""), arr: p("{}")},
		tr{id: 52, f: p("-0"), arr: p("{NULL}")},
		tr{id: 53, f: p("-Infinity"), s: p("é\t\\"), arr: nil},
	)...))
	want := Counts{SourceRows: 53, SinkRows: 53, Matching: 53}
	if !reflect.DeepEqual(c, want) || c.Differs() {
		t.Errorf("got %+v, want %+v", c, want)
	}
	// Both empty.
	if c := f.compare(0, 0, nil, nil); c.Differs() || c.SourceRows != 0 || len(c.Ranges) != 0 {
		t.Errorf("empty: %+v", c)
	}
}

// TestCompareRanges checks the counts and that differing keys group into
// runs with no matching key inside.
func TestCompareRanges(t *testing.T) {
	f := newFixture(t, false)
	src := plain(seq(1, 10)...)
	// Sink: 3 and 4 missing; 7 changed, 8 missing, 9 changed (one range:
	// no matching key between them); 12 and 13 extra after the last
	// source key.
	var sink []tr
	for _, r := range plain(seq(1, 10)...) {
		switch r.id {
		case 3, 4, 8:
			continue
		case 7:
			r.s = p("changed")
		case 9:
			r.f = p("2.5")
			r.arr = p("{1,2,3}")
		}
		sink = append(sink, r)
	}
	sink = append(sink, plain(12, 13)...)
	c := f.compare(0, 0, f.rows(src...), f.rows(sink...))

	want := Counts{
		SourceRows: 10, SinkRows: 9, Matching: 5, Missing: 3, Extra: 2, Changed: 2,
		Columns: map[string]int64{"s": 1, "f": 1, "arr": 1},
		Ranges: []Range{
			{First: "(id)=(3)", Last: "(id)=(4)", Keys: 2, Missing: 2},
			{First: "(id)=(7)", Last: "(id)=(9)", Keys: 3, Missing: 1, Changed: 2},
			{First: "(id)=(12)", Last: "(id)=(13)", Keys: 2, Extra: 2},
		},
		Examples: []Example{
			{Key: "(id)=(7)", Column: "s", Source: "row 7", Sink: "changed"},
			{Key: "(id)=(9)", Column: "f", Source: "1.5", Sink: "2.5"},
			{Key: "(id)=(9)", Column: "arr", Source: "{1,2}", Sink: "{1,2,3}"},
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if !c.Differs() {
		t.Error("Differs() = false")
	}

	// The same, the other way round: what was missing is extra.
	c = f.compare(0, 0, f.rows(sink...), f.rows(src...))
	if c.Missing != 2 || c.Extra != 3 || c.Changed != 2 || len(c.Ranges) != 3 ||
		c.Ranges[2] != (Range{First: "(id)=(12)", Last: "(id)=(13)", Keys: 2, Missing: 2}) {
		t.Errorf("reversed: %+v", c)
	}
}

func TestCompareCaps(t *testing.T) {
	f := newFixture(t, false)
	// Every odd key is missing from the sink: 50 ranges of one key.
	var sink []int64
	for i := int64(2); i <= 100; i += 2 {
		sink = append(sink, i)
	}
	c := f.compare(3, 2, f.rows(plain(seq(1, 100)...)...), f.rows(plain(sink...)...))
	if c.Missing != 50 || c.Matching != 50 || len(c.Ranges) != 3 || c.MoreRanges != 47 {
		t.Fatalf("got missing %d matching %d, %d ranges + %d more", c.Missing, c.Matching, len(c.Ranges), c.MoreRanges)
	}
	if c.Ranges[2] != (Range{First: "(id)=(5)", Last: "(id)=(5)", Keys: 1, Missing: 1}) {
		t.Errorf("third range: %+v", c.Ranges[2])
	}

	// Every row changed: one range, examples capped.
	var changed []tr
	for _, r := range plain(seq(1, 100)...) {
		r.s = p("other")
		changed = append(changed, r)
	}
	c = f.compare(3, 2, f.rows(plain(seq(1, 100)...)...), f.rows(changed...))
	if c.Changed != 100 || len(c.Examples) != 2 || len(c.Ranges) != 1 || c.MoreRanges != 0 ||
		c.Ranges[0] != (Range{First: "(id)=(1)", Last: "(id)=(100)", Keys: 100, Changed: 100}) {
		t.Errorf("all changed: %+v", c)
	}
}

// TestCompareValues checks the exactness of value comparison: bits of
// floats, NULL against empty, array shapes.
func TestCompareValues(t *testing.T) {
	f := newFixture(t, false)
	for _, tc := range []struct {
		name      string
		src, sink tr
		column    string // "" means equal
	}{
		{"NaN equals NaN", tr{id: 1, f: p("NaN")}, tr{id: 1, f: p("NaN")}, ""},
		{"-0 is not 0", tr{id: 1, f: p("-0")}, tr{id: 1, f: p("0")}, "f"},
		{"float last bit", tr{id: 1, f: p("0.1")}, tr{id: 1, f: p("0.10000000000000002")}, "f"},
		{"NULL is not empty", tr{id: 1, s: nil}, tr{id: 1, s: p("")}, "s"},
		{"NULL array is not empty", tr{id: 1, arr: nil}, tr{id: 1, arr: p("{}")}, "arr"},
		{"empty array is not {NULL}", tr{id: 1, arr: p("{}")}, tr{id: 1, arr: p("{NULL}")}, "arr"},
		{"element NULL is not 0", tr{id: 1, arr: p("{1,NULL}")}, tr{id: 1, arr: p("{1,0}")}, "arr"},
		{"array prefix", tr{id: 1, arr: p("{1,2}")}, tr{id: 1, arr: p("{1,2,3}")}, "arr"},
		{"text bytes", tr{id: 1, s: p("a")}, tr{id: 1, s: p("a ")}, "s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.compare(0, 0, f.rows(tc.src), f.rows(tc.sink))
			if tc.column == "" {
				if c.Differs() || c.Matching != 1 {
					t.Errorf("want equal: %+v", c)
				}
				return
			}
			if c.Changed != 1 || c.Columns[tc.column] != 1 || len(c.Columns) != 1 {
				t.Errorf("want column %s to differ: %+v", tc.column, c)
			}
		})
	}
}

func TestCompareUnrecoveredTOAST(t *testing.T) {
	f := newFixture(t, false)
	src := f.rows(tr{id: 1, s: p(strings.Repeat("x", 100))}, tr{id: 2, s: p("b")})
	sink := f.rows(tr{id: 1, unset: true}, tr{id: 2, s: p("b")})
	c := f.compare(0, 0, src, sink)
	if c.Changed != 1 || c.Unrecovered != 1 || len(c.Examples) != 1 {
		t.Fatalf("got %+v", c)
	}
	ex := c.Examples[0]
	if !ex.Unrecovered || ex.Sink != "NULL" || ex.Source != strings.Repeat("x", maxValueText)+"…" {
		t.Errorf("example: %+v", ex)
	}
}

// TestCompareMultiset compares a table without a primary key: duplicates
// count, and a "key" is the whole row.
func TestCompareMultiset(t *testing.T) {
	f := newFixture(t, true)
	a := tr{id: 1, s: p("a")}
	b := tr{id: 2, s: p("b")}
	cc := tr{id: 3, s: p("c")}
	c := f.compare(0, 0, f.rows(a, a, b, cc, cc), f.rows(cc, b, a, b, cc))
	want := Counts{
		SourceRows: 5, SinkRows: 5, Matching: 4, Missing: 1, Extra: 1,
		// The second a is missing and the second b extra, with a matching
		// b between them: two ranges.
		Ranges: []Range{
			{First: "(id, f, s, arr)=(1, NULL, a, NULL)", Last: "(id, f, s, arr)=(1, NULL, a, NULL)", Keys: 1, Missing: 1},
			{First: "(id, f, s, arr)=(2, NULL, b, NULL)", Last: "(id, f, s, arr)=(2, NULL, b, NULL)", Keys: 1, Extra: 1},
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}
