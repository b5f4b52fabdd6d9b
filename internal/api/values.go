package api

import (
	"encoding/base64"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// jsonValue is a value as the API's JSON holds it (docs/api.md): integers
// as JSON numbers (int64 exactly: a client parsing numbers as doubles
// loses precision past 2^53), decimals and UUIDs as strings, timestamps in
// RFC 3339 (UTC), dates as YYYY-MM-DD, times as HH:MM:SS[.ffffff], bytes
// in base64, lists as arrays and structs as objects; the rest as the read
// path's JSON form.
func jsonValue(v any, typ string) any {
	switch x := v.(type) {
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		switch {
		case typ == "DATE":
			return x.Format("2006-01-02")
		case strings.HasPrefix(typ, "TIME") && !strings.HasPrefix(typ, "TIMESTAMP"):
			return x.Format("15:04:05.999999")
		}
		return x.UTC().Format(time.RFC3339Nano)
	case []any:
		out := make([]any, len(x))
		elem := strings.TrimSuffix(typ, "[]")
		for i, e := range x {
			out[i] = jsonValue(e, elem)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e, "")
		}
		return out
	}
	return readpath.JSONValue(v)
}

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
