package merge

import (
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// The group key a fold keeps is the metadata and the key columns only; with
// a key whose columns are not in table order it must still compare equal to
// the rows of its group and unequal to the others.
func TestFoldKeyOfCompositeKey(t *testing.T) {
	table := &cdc.Table{
		ID:         cdc.TableID{Schema: "public", Name: "t"},
		PrimaryKey: []string{"b", "a"},
		Columns: []cdc.Column{
			{Name: "a", TypeOID: 20, TypeMod: -1, PGType: "bigint", NotNull: true, FieldID: 1},
			{Name: "v", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
			{Name: "b", TypeOID: 25, TypeMod: -1, PGType: "text", NotNull: true, FieldID: 3},
		},
	}
	schema, err := parquetfile.NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	row := func(lsn int64, a int64, v, b string) parquet.Row {
		op := parquet.ByteArrayValue([]byte{byte(cdc.OpUpdate)})
		return parquet.Row{
			op.Level(0, 0, parquetfile.LeafOp),
			parquet.Int64Value(lsn).Level(0, 0, parquetfile.LeafLSN),
			parquet.Int64Value(1).Level(0, 0, parquetfile.LeafSeq),
			parquet.Int64Value(1).Level(0, 0, parquetfile.LeafXID),
			parquet.Int64Value(lsn).Level(0, 0, parquetfile.LeafOpTS),
			parquetfile.EmptyUnchanged(),
			parquet.Int64Value(a).Level(0, 0, parquetfile.FirstDataLeaf),
			parquet.ByteArrayValue([]byte(v)).Level(0, 1, parquetfile.FirstDataLeaf+1),
			parquet.ByteArrayValue([]byte(b)).Level(0, 0, parquetfile.FirstDataLeaf+2),
		}
	}
	o := NewOrder([]int{2, 0})
	var s foldState
	s.init(schema)
	first := row(10, 1, "x", "k")
	s.reset(first, o)
	clear(first) // the fold must not keep the iterator's row
	for _, tc := range []struct {
		row  parquet.Row
		same bool
	}{
		{row(20, 1, "y", "k"), true},
		{row(20, 2, "x", "k"), false},
		{row(20, 1, "x", "l"), false},
	} {
		if got := o.CompareKey(tc.row, s.key) == 0; got != tc.same {
			t.Errorf("row %v against the group key %v: same %v, want %v", tc.row, s.key, got, tc.same)
		}
	}
}

// A base's row is the fold of its key's versions up to its own. Against
// replays of deltas it folded, in either order of the versions that tie:
// its filled value counts rather than a replayed copy's unchanged one, and
// the value it lost is not taken from a version older than it.
func TestFoldBaseRowAgainstReplays(t *testing.T) {
	table := &cdc.Table{
		ID:         cdc.TableID{Schema: "public", Name: "t"},
		PrimaryKey: []string{"id"},
		Columns: []cdc.Column{
			{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", NotNull: true, FieldID: 1},
			{Name: "big", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
		},
	}
	schema, err := parquetfile.NewSchema(table)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{"id": 0, "big": 1}
	// row is a version of key 1; big "" leaves big unchanged.
	row := func(op cdc.Op, lsn int64, big string, base bool) parquet.Row {
		r := parquet.Row{
			parquet.ByteArrayValue([]byte{byte(op)}).Level(0, 0, parquetfile.LeafOp),
			parquet.Int64Value(lsn).Level(0, 0, parquetfile.LeafLSN),
			parquet.Int64Value(1).Level(0, 0, parquetfile.LeafSeq),
			parquet.Int64Value(lsn).Level(0, 0, parquetfile.LeafXID),
			parquet.Int64Value(lsn).Level(0, 0, parquetfile.LeafOpTS),
		}
		if big == "" {
			r = append(r, parquetfile.UnchangedValue([]byte("big"), 0))
		} else {
			r = append(r, parquetfile.EmptyUnchanged())
		}
		r = append(r, parquet.Int64Value(1).Level(0, 0, parquetfile.FirstDataLeaf))
		if big == "" {
			r = append(r, parquetfile.NullColumn(1))
		} else {
			r = append(r, parquet.ByteArrayValue([]byte(big)).Level(0, 1, parquetfile.FirstDataLeaf+1))
		}
		if base {
			markBase(r)
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		versions []parquet.Row
		big      string // "" when lost
	}{
		{"base row, then a replayed copy", []parquet.Row{row(cdc.OpUpdate, 20, "x", true), row(cdc.OpUpdate, 20, "", false)}, "x"},
		{"replayed copy, then the base row", []parquet.Row{row(cdc.OpUpdate, 20, "", false), row(cdc.OpUpdate, 20, "x", true)}, "x"},
		{"older replay, base row, replayed copy", []parquet.Row{row(cdc.OpInsert, 10, "x", false), row(cdc.OpUpdate, 20, "x", true), row(cdc.OpUpdate, 20, "", false)}, "x"},
		{"older replay, then a base row that lost the value", []parquet.Row{row(cdc.OpInsert, 10, "old", false), row(cdc.OpUpdate, 20, "", true)}, ""},
		{"older replay, replayed copy, base row that lost it", []parquet.Row{row(cdc.OpInsert, 10, "old", false), row(cdc.OpUpdate, 20, "", false), row(cdc.OpUpdate, 20, "", true)}, ""},
		{"a base row that lost the value, then a newer update", []parquet.Row{row(cdc.OpUpdate, 20, "", true), row(cdc.OpUpdate, 30, "", false)}, ""},
		{"a base row, then a newer update", []parquet.Row{row(cdc.OpUpdate, 20, "x", true), row(cdc.OpUpdate, 30, "", false)}, "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOrder([]int{0})
			var s foldState
			s.init(schema)
			s.reset(tc.versions[0], o)
			for _, v := range tc.versions {
				s.apply(v, names, o)
			}
			out, deleted := s.result(nil)
			if deleted {
				t.Fatal("deleted")
			}
			if op := opOf(out); op != cdc.OpUpdate {
				t.Errorf("__op %c, want U", op)
			}
			var big string
			var listed bool
			for _, v := range leafValues(out, parquetfile.LeafUnchanged) {
				listed = listed || (!v.IsNull() && string(v.ByteArray()) == "big")
			}
			if v := leafValues(out, parquetfile.FirstDataLeaf+1); !v[0].IsNull() {
				big = string(v[0].ByteArray())
			}
			if big != tc.big || listed != (tc.big == "") {
				t.Errorf("big %q, listed in __unchanged %v; want %q", big, listed, tc.big)
			}
		})
	}
	// A base's tombstone comes out as the D it is, not marked.
	o := NewOrder([]int{0})
	var s foldState
	s.init(schema)
	tomb := row(cdc.OpDelete, 20, "", true)
	s.reset(tomb, o)
	s.apply(row(cdc.OpInsert, 10, "x", false), names, o)
	s.apply(tomb, names, o)
	if out, deleted := s.result(nil); !deleted || opOf(out) != cdc.OpDelete {
		t.Errorf("a base's tombstone: deleted %v, __op %q", deleted, out[parquetfile.LeafOp].ByteArray())
	}
}
