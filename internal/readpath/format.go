package readpath

import (
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Formats of Result.Write.
const (
	FormatTable = "table"
	FormatCSV   = "csv"
	FormatJSON  = "json"
)

// Write writes the result as an aligned table (NULL for nulls, a note when
// truncated), CSV with a header (empty for nulls), or one JSON object
// (columns with their types, rows as arrays, truncated).
func (r *Result) Write(w io.Writer, format string) error {
	switch format {
	case FormatTable:
		return r.writeTable(w)
	case FormatCSV:
		return r.writeCSV(w)
	case FormatJSON:
		return r.writeJSON(w)
	}
	return fmt.Errorf("output format %q: want table, csv or json", format)
}

func (r *Result) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	names := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		names[i] = c.Name
	}
	fmt.Fprintln(tw, strings.Join(names, "\t"))
	for _, row := range r.Rows {
		cells := make([]string, len(row))
		for i, v := range row {
			if v == nil {
				cells[i] = "NULL"
				continue
			}
			cells[i] = strings.NewReplacer("\t", `\t`, "\n", `\n`).Replace(Text(v, r.Columns[i].Type))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	note := fmt.Sprintf("(%d rows", len(r.Rows))
	if len(r.Rows) == 1 {
		note = "(1 row"
	}
	if r.Truncated {
		note += "; truncated at the row or byte cap"
	}
	_, err := fmt.Fprintln(w, note+")")
	return err
}

func (r *Result) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	names := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		names[i] = c.Name
	}
	if err := cw.Write(names); err != nil {
		return err
	}
	for _, row := range r.Rows {
		cells := make([]string, len(row))
		for i, v := range row {
			if v != nil {
				cells[i] = Text(v, r.Columns[i].Type)
			}
		}
		if err := cw.Write(cells); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func (r *Result) writeJSON(w io.Writer) error {
	rows := make([][]any, len(r.Rows))
	for i, row := range r.Rows {
		rows[i] = make([]any, len(row))
		for j, v := range row {
			rows[i][j] = JSONValue(v)
		}
	}
	type column struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	cols := make([]column, len(r.Columns))
	for i, c := range r.Columns {
		cols[i] = column{c.Name, c.Type}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(struct {
		Columns   []column `json:"columns"`
		Rows      [][]any  `json:"rows"`
		Truncated bool     `json:"truncated"`
	}{cols, rows, r.Truncated})
}

// Text is a value's display text for a column of DuckDB type t: numbers
// exact, times in UTC in SQL's form (±infinity as PostgreSQL prints it:
// infinity, -infinity), bytes as \x and hex, lists, structs and maps as
// JSON.
func Text(v any, t string) string {
	switch x := v.(type) {
	case string:
		return x
	case time.Time:
		return timeText(x, t)
	case Infinity:
		return x.String()
	case []byte:
		return `\x` + hex.EncodeToString(x)
	case float32:
		return floatText(float64(x), 32)
	case float64:
		return floatText(x, 64)
	case Interval:
		return intervalText(x)
	case *big.Int:
		return x.String()
	case bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, int, uint:
		return fmt.Sprint(x)
	}
	b, err := json.Marshal(JSONValue(v))
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func timeText(t time.Time, typ string) string {
	switch {
	case typ == "DATE":
		return t.Format("2006-01-02")
	case strings.HasPrefix(typ, "TIME") && !strings.HasPrefix(typ, "TIMESTAMP"):
		return t.Format("15:04:05.999999")
	case strings.Contains(typ, "TIME ZONE") || typ == "TIMESTAMPTZ":
		return t.UTC().Format("2006-01-02 15:04:05.999999") + "+00"
	}
	return t.Format("2006-01-02 15:04:05.999999")
}

// intervalText is PostgreSQL's form of an interval: "1 mon 2 days
// 03:04:05.5", the parts that are not zero.
func intervalText(iv Interval) string {
	var parts []string
	plural := func(n int64, unit string) string {
		if n == 1 || n == -1 {
			return fmt.Sprintf("%d %s", n, unit)
		}
		return fmt.Sprintf("%d %ss", n, unit)
	}
	if y, m := iv.Months/12, iv.Months%12; y != 0 {
		parts = append(parts, plural(int64(y), "year"))
		iv.Months = m
	}
	if iv.Months != 0 {
		parts = append(parts, plural(int64(iv.Months), "mon"))
	}
	if iv.Days != 0 {
		parts = append(parts, plural(int64(iv.Days), "day"))
	}
	if iv.Micros != 0 || len(parts) == 0 {
		us, sign := iv.Micros, ""
		if us < 0 {
			us, sign = -us, "-"
		}
		clock := fmt.Sprintf("%s%02d:%02d:%02d", sign, us/3_600_000_000, us/60_000_000%60, us/1_000_000%60)
		if frac := us % 1_000_000; frac != 0 {
			clock += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
		}
		parts = append(parts, clock)
	}
	return strings.Join(parts, " ")
}

func floatText(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// JSONValue is a value as the JSON output holds it: numbers as numbers
// (NaN and infinities, which JSON has not, as their names; huge integers
// as numbers too, exactly), decimals and UUIDs as the strings the engine
// gives, times as RFC 3339 in UTC (±infinity as the strings "infinity"
// and "-infinity", as PostgreSQL's to_json has them), bytes as \x and hex,
// lists as arrays, structs as objects, maps as arrays of {key, value} (a
// key need not be a string), intervals as {months, days, micros}.
func JSONValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, int, uint:
		return x
	case float32:
		return jsonFloat(float64(x), 32)
	case float64:
		return jsonFloat(x, 64)
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case Infinity:
		return x.String()
	case []byte:
		return `\x` + hex.EncodeToString(x)
	case *big.Int:
		return json.Number(x.String())
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = JSONValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = JSONValue(e)
		}
		return out
	case []MapEntry:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = map[string]any{"key": JSONValue(e.Key), "value": JSONValue(e.Value)}
		}
		return out
	case Interval:
		return map[string]any{"months": x.Months, "days": x.Days, "micros": x.Micros}
	}
	return fmt.Sprint(v)
}

func jsonFloat(f float64, bits int) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return floatText(f, bits)
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, bits))
}

// ValidFormat reports whether f is an output format Write knows.
func ValidFormat(f string) bool { return f == FormatTable || f == FormatCSV || f == FormatJSON }
