package readpath

import (
	"encoding/base64"
	"strings"
	"time"
)

// WireValue is a value as the read path's HTTP transports send it in JSON
// (docs/api.md; the REST API and the event streams): integers
// as JSON numbers (int64 exactly: a client parsing numbers as doubles
// loses precision past 2^53), decimals and UUIDs as strings, timestamps in
// RFC 3339 (UTC), dates as YYYY-MM-DD, times as HH:MM:SS[.ffffff], a date's
// or timestamp's ±infinity as "infinity" and "-infinity" (strings, as every
// date and time is), bytes in base64, lists as arrays and structs as
// objects; the rest as the read path's JSON form.
func WireValue(v any, typ string) any {
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
			out[i] = WireValue(e, elem)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = WireValue(e, "")
		}
		return out
	}
	return JSONValue(v)
}
