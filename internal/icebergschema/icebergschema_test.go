package icebergschema

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

func TestOf(t *testing.T) {
	cols := []manifest.Column{
		{Name: "id", ParquetType: "INT64", FieldID: 1},
		{Name: "amount", ParquetType: "DECIMAL(12,3)", FieldID: 2},
		{Name: "tags", ParquetType: "LIST<STRING>", FieldID: 7},
		{Name: "at", ParquetType: "TIMESTAMP(us,UTC)", FieldID: 3},
		{Name: "doc", ParquetType: "JSON", FieldID: 4},
	}
	s, err := Of(3, cols)
	if err != nil {
		t.Fatal(err)
	}
	got := string(s.JSON())
	for _, want := range []string{
		`"schema-id":3`,
		`{"id":2000000001,"name":"__op","required":true,"type":"string"`,
		`{"id":1,"name":"id","required":false,"type":"long"}`,
		`{"id":2,"name":"amount","required":false,"type":"decimal(12, 3)"}`,
		`{"id":7,"name":"tags","required":false,"type":{"type":"list","element-id":1000000007,"element":"string","element-required":false}}`,
		`{"id":3,"name":"at","required":false,"type":"timestamptz"}`,
		`{"id":4,"name":"doc","required":false,"type":"string"}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("schema lacks %s:\n%s", want, got)
		}
	}
	var back map[string]any
	if err := json.Unmarshal(s.JSON(), &back); err != nil || len(back["fields"].([]any)) != 6+len(cols) {
		t.Errorf("round trip: %v, %v", back, err)
	}
}

func TestOfRefuses(t *testing.T) {
	for _, c := range []struct {
		col  manifest.Column
		want string
	}{
		{manifest.Column{Name: "x", ParquetType: "INT64"}, `column "x": field id 0`},
		{manifest.Column{Name: "x", ParquetType: "INT64", FieldID: ElementBase}, `column "x": field id 1000000000`},
		{manifest.Column{Name: "w", ParquetType: "INTERVAL", FieldID: 1}, `column "w": parquet type "INTERVAL" has no Iceberg type`},
		{manifest.Column{Name: "d", ParquetType: "DECIMAL(40,2)", FieldID: 1}, `column "d": parquet type "DECIMAL(40,2)"`},
	} {
		if _, err := Of(1, []manifest.Column{c.col}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Of(%+v) = %v, want %q", c.col, err, c.want)
		}
	}
}
