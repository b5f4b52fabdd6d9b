package replicate

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/pgoutput"
)

// TestDiffRelation pins the pure comparison of a Relation with a table's
// version: what it accepts (as added, dropped, retyped) and what it refuses
// as an unsupported change.
func TestDiffRelation(t *testing.T) {
	table := &cdc.Table{
		ID: cdc.TableID{Schema: "public", Name: "t"}, PrimaryKey: []string{"id"},
		Columns: []cdc.Column{
			{Name: "id", TypeOID: oidInt8, TypeMod: -1, PGType: "bigint"},
			{Name: "a", TypeOID: oidInt4, TypeMod: -1, PGType: "integer"},
			{Name: "b", TypeOID: oidText, TypeMod: -1, PGType: "text"},
			{Name: "flag", TypeOID: 16, TypeMod: -1, PGType: "boolean"},
		},
	}
	c := func(name string, oid uint32) pgoutput.RelationColumn {
		return pgoutput.RelationColumn{Name: name, TypeOID: oid, TypeMod: -1}
	}
	id, a, b, flag := c("id", oidInt8), c("a", oidInt4), c("b", oidText), c("flag", 16)
	for _, tc := range []struct {
		name string
		cols []pgoutput.RelationColumn
		want string // "added dropped retyped", or "unsupported"
	}{
		{"same", []pgoutput.RelationColumn{id, a, b, flag}, "[] [] []"},
		{"add at the end", []pgoutput.RelationColumn{id, a, b, flag, c("x", oidText)}, "[4] [] []"},
		{"drop in the middle", []pgoutput.RelationColumn{id, b, flag}, "[] [1] []"},
		{"add and drop", []pgoutput.RelationColumn{id, a, flag, c("x", oidText)}, "[3] [2] []"},
		{"int to bigint", []pgoutput.RelationColumn{id, c("a", oidInt8), b, flag}, "[] [] [1]"},
		{"int to text", []pgoutput.RelationColumn{id, c("a", oidText), b, flag}, "[] [] [1]"},
		{"text to int", []pgoutput.RelationColumn{id, a, c("b", oidInt4), flag}, "unsupported"},
		{"bool to text", []pgoutput.RelationColumn{id, a, b, c("flag", oidText)}, "unsupported"},
		{"bigint to int", []pgoutput.RelationColumn{c("id", oidInt4), a, b, flag}, "unsupported"},
		{"new name before a kept column", []pgoutput.RelationColumn{id, c("x", oidInt4), b, flag}, "unsupported"},
		{"columns reordered", []pgoutput.RelationColumn{id, b, a, flag}, "unsupported"},
		{"key dropped", []pgoutput.RelationColumn{a, b, flag}, "unsupported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := diffRelation(table, &pgoutput.Relation{Columns: tc.cols})
			got := fmt.Sprint(fmtInts(d.added), " ", fmtInts(d.dropped), " ", fmtInts(d.retyped))
			var u unsupported
			if errors.As(err, &u) {
				got = "unsupported"
			} else if err != nil {
				t.Fatalf("diffRelation: %v, want nil or an unsupported change", err)
			}
			if got != tc.want {
				t.Errorf("diffRelation: %s (err %v), want %s", got, err, tc.want)
			}
		})
	}
}

func fmtInts(v []int) string {
	if v == nil {
		return "[]"
	}
	return fmt.Sprint(v)
}
