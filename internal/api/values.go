package api

import (
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// jsonValue is a value as the API's JSON holds it (readpath.WireValue).
func jsonValue(v any, typ string) any { return readpath.WireValue(v, typ) }

// column is a result column in responses.
type column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

func columnsOf(cs []readpath.Column) []column {
	out := make([]column, len(cs))
	for i, c := range cs {
		out[i] = column{c.Name, c.Type}
	}
	return out
}

// object is a row as a JSON object of its columns.
func object(cols []readpath.Column, row []any) map[string]any {
	o := make(map[string]any, len(cols))
	for i, c := range cols {
		if i < len(row) {
			o[c.Name] = jsonValue(row[i], c.Type)
		}
	}
	return o
}
