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
