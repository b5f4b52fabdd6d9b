package sinktest

import (
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func TestSourceQuery(t *testing.T) {
	types := map[string]columnType{
		"id":     {oid: 20, typmod: -1},
		"name":   {oid: 25, typmod: -1, collatable: true},
		"pad":    {oid: 1042, typmod: 7, collatable: true},
		"amount": {oid: 1700, typmod: 12<<16 | 3 + 4},
		"free":   {oid: 1700, typmod: -1},
		"at":     {oid: 1083, typmod: -1}, // time: TIME(us)
		"doc":    {oid: 114, typmod: -1},
		"tags":   {oid: 1009, typmod: -1, collatable: true}, // text[]: LIST<STRING>
		`we"ird`: {oid: 23, typmod: -1},
	}
	id := cdc.TableID{Schema: "app", Name: "Orders"}
	cols := []string{"id", "name", "pad", "amount", "free", "at", "doc", "tags", `we"ird`}
	q, err := sourceQuery(id, `ONLY "app"."Orders"`, cols, []string{"name", "id", "doc", "free", "tags"}, types)
	if err != nil {
		t.Fatal(err)
	}
	want := `SELECT "id", "name", "pad", "amount", "free"::text, "at", "doc", "tags", "we""ird" FROM ONLY "app"."Orders"` +
		` ORDER BY "name" COLLATE "C", "id", "doc"::text COLLATE "C", "free"::text COLLATE "C", "tags" COLLATE "C"`
	if q != want {
		t.Errorf("query:\n got %s\nwant %s", q, want)
	}
	if _, err := sourceQuery(id, `"app"."Orders"`, []string{"nope"}, nil, types); err == nil {
		t.Error("an unknown column was accepted")
	}
	if _, err := sourceQuery(id, `"app"."Orders"`, []string{"id"}, []string{"nope"}, types); err == nil {
		t.Error("an unknown order column was accepted")
	}
}
