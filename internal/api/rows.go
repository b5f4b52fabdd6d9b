package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// rowsCursor is the state of a paginated read of rows: the manifest version
// (and bound) of its first page, so every page reads the same version
// while new ones land; where the last page ended (the primary key of its
// last row, or for a keyless table how many rows were served); and a
// fingerprint of the request, so a cursor is not used for another one. Its
// text is base64url of its JSON: opaque to clients.
type rowsCursor struct {
	Version  uint64   `json:"v"`
	BoundLSN uint64   `json:"l,omitempty"`
	BoundT   int64    `json:"t,omitempty"` // Unix µs
	Key      []string `json:"k,omitempty"`
	Offset   int64    `json:"o,omitempty"`
	Hash     string   `json:"h"`
}

const maxCursorText = 8192

func (c rowsCursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseRowsCursor(s string) (rowsCursor, error) {
	badCursor := func(why string) error {
		return bad("bad_cursor", "cursor", "cursor: %s; pass the next_cursor of the previous page unchanged", why)
	}
	if len(s) > maxCursorText {
		return rowsCursor{}, badCursor("too long")
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return rowsCursor{}, badCursor("not base64url")
	}
	var c rowsCursor
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Version == 0 || c.Hash == "" || c.Offset < 0 {
		return rowsCursor{}, badCursor("not a rows cursor")
	}
	return c, nil
}

// fingerprint names what a rows request asks, apart from where it is.
func fingerprint(table, asOf string, columns []string, filters []string) string {
	h := sha256.New()
	for _, part := range append(append([]string{table, asOf, strconv.Itoa(len(columns))}, columns...), filters...) {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// rowsResponse is a page of a table's rows.
type rowsResponse struct {
	Table   string           `json:"table"`
	Version uint64           `json:"version"`
	AsOf    string           `json:"as_of,omitempty"`
	Columns []column         `json:"columns"`
	Rows    []map[string]any `json:"rows"`
	// NextCursor asks the next page; null on the last.
	NextCursor *string `json:"next_cursor"`
	// Truncated: the read path's byte cap cut this page short (the next
	// cursor continues after what it holds).
	Truncated bool `json:"truncated"`
	// ChangesCursor is the change-feed cursor after the state this page
	// reads: follow /changes?after= it to stay current (null for a point
	// bounded by commit time).
	ChangesCursor *string `json:"changes_cursor"`
}

func (a *api) rows(w http.ResponseWriter, r *http.Request) error {
	ps, err := queryParams(r, []string{"as_of", "columns", "limit", "cursor"}, "filter")
	if err != nil {
		return err
	}
	limit, err := limitParam(ps["limit"], a.o.MaxRows)
	if err != nil {
		return err
	}
	rec := access.RecordFrom(r.Context())
	var cur *rowsCursor
	var at readpath.At
	if s := ps["cursor"]; s != "" {
		c, err := parseRowsCursor(s)
		if err != nil {
			return err
		}
		cur = &c
		if ps["as_of"] != "" {
			rec.Point = ps["as_of"]
		}
		if at, err = a.o.Reader.Resolve(r.Context(), strconv.FormatUint(c.Version, 10)); err != nil {
			if p := a.classify(r, err); p.Code == "outside_retention" {
				return &apiError{P: problem{Status: http.StatusGone, Code: "gone", Parameter: "cursor",
					Detail: fmt.Sprintf("the cursor reads version %d, which has left history.retention; start again without a cursor", c.Version)}, Err: err}
			}
			return err
		}
		at.Name = ps["as_of"]
		at.Bound.LSN = cdc.LSN(c.BoundLSN)
		if c.BoundT != 0 {
			at.Bound.Time = time.UnixMicro(c.BoundT).UTC()
		}
	} else if at, err = a.resolve(r, ps["as_of"]); err != nil {
		return err
	}
	key, mt, err := lookup(r, at.Manifest, r.PathValue("table"))
	if err != nil {
		return err
	}
	cols, err := tableColumns(mt)
	if err != nil {
		return err
	}
	proj := cols
	var names []string
	if s, ok := ps["columns"]; ok {
		if proj, names, err = projection(s, cols); err != nil {
			return err
		}
	}
	rawFilters := r.URL.Query()["filter"]
	if len(rawFilters) > MaxFilters {
		return bad("bad_filter", "filter", "%d filters, at most %d", len(rawFilters), MaxFilters)
	}
	var filters []filter
	for _, s := range rawFilters {
		f, _, err := parseFilter(s, cols)
		if err != nil {
			return err
		}
		filters = append(filters, f)
	}
	rec.Columns, rec.Filters = names, rawFilters
	fp := fingerprint(key, ps["as_of"], names, rawFilters)
	if cur != nil && cur.Hash != fp {
		return bad("bad_cursor", "cursor", "the cursor belongs to another request: pass the same table, as_of, columns and filters as the first page")
	}

	// The SQL: projected columns, then the key (or, keyless, every column)
	// to order and continue by.
	keyed := len(mt.PrimaryKey) > 0
	var order []readpath.Column
	if keyed {
		for _, k := range mt.PrimaryKey {
			i := slices.IndexFunc(cols, func(c readpath.Column) bool { return c.Name == k })
			if i < 0 {
				return fmt.Errorf("table %s: primary key column %q is not a column", key, k)
			}
			order = append(order, cols[i])
		}
	} else {
		order = cols
	}
	sel := make([]string, 0, len(proj)+len(order))
	for _, c := range proj {
		sel = append(sel, mergesql.Ident(c.Name))
	}
	orderBy := make([]string, len(order))
	for i, c := range order {
		if keyed {
			sel = append(sel, fmt.Sprintf("%s AS %s", mergesql.Ident(c.Name), mergesql.Ident(fmt.Sprintf("__pgcdc_key_%d", i))))
		}
		orderBy[i] = mergesql.Ident(c.Name)
	}
	cond, args := where(filters, cols)
	var conds []string
	if cond != "" {
		conds = append(conds, cond)
	}
	var offset int64
	if cur != nil {
		switch {
		case keyed && len(cur.Key) == len(order):
			k, kargs := after(order, cur.Key)
			conds, args = append(conds, k), append(args, kargs...)
		case !keyed:
			offset = cur.Offset
		default:
			return bad("bad_cursor", "cursor", "the cursor's key has %d parts, the table's primary key %d", len(cur.Key), len(order))
		}
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM " + a.view(at.Manifest, key)
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	q += " ORDER BY " + strings.Join(orderBy, ", ") + fmt.Sprintf(" LIMIT %d", limit+1)
	if offset > 0 {
		q += fmt.Sprintf(" OFFSET %d", offset)
	}
	res, err := a.o.Reader.Query(r.Context(), at, q, args...)
	if err != nil {
		if p := a.classify(r, err); p.Code == "invalid_query" && len(filters) > 0 {
			// The SQL is ours; what DuckDB rejects is a filter's value
			// (a conversion to the column's type).
			return &apiError{P: problem{Status: http.StatusBadRequest, Code: "bad_filter", Parameter: "filter",
				Detail: "a filter's value does not fit its column's type: " + firstLine(err.Error())}, Err: err}
		}
		return err
	}
	rows := res.Rows
	more := len(rows) > limit || res.Truncated
	if len(rows) > limit {
		rows = rows[:limit]
	}
	out := rowsResponse{Table: key, Version: at.Version(), AsOf: ps["as_of"], Columns: columnsOf(proj), Rows: make([]map[string]any, len(rows)), Truncated: res.Truncated}
	for i, row := range rows {
		out.Rows[i] = object(proj, row)
	}
	if more && len(rows) > 0 {
		next := rowsCursor{Version: at.Version(), BoundLSN: uint64(at.Bound.LSN), Hash: fp}
		if !at.Bound.Time.IsZero() {
			next.BoundT = at.Bound.Time.UnixMicro()
		}
		if keyed {
			last := rows[len(rows)-1][len(proj):]
			for i, v := range last {
				next.Key = append(next.Key, keyText(v, order[i].Type))
			}
		} else {
			next.Offset = offset + int64(len(rows))
		}
		s := next.String()
		out.NextCursor = &s
	}
	if c, ok := changefeed.After(at); ok {
		s := c.String()
		out.ChangesCursor = &s
	}
	rec.Rows, rec.Truncated = int64(len(rows)), more
	return writeJSON(w, out)
}

// projection parses columns=a,b: known columns, each once.
func projection(s string, cols []readpath.Column) ([]readpath.Column, []string, error) {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	var proj []readpath.Column
	var asked []string
	for _, n := range strings.Split(s, ",") {
		i := slices.Index(names, n)
		switch {
		case n == "":
			return nil, nil, bad("bad_columns", "columns", "columns %q: an empty name; want names separated by commas", trimmed(s))
		case i < 0:
			return nil, nil, &apiError{P: problem{Status: http.StatusBadRequest, Code: "unknown_column", Parameter: "columns", Closest: readpath.Closest(n, names),
				Detail: fmt.Sprintf("columns: the table has no column %q", trimmed(n))}}
		case slices.Contains(asked, n):
			return nil, nil, bad("bad_columns", "columns", "columns: %q is named twice", n)
		}
		proj, asked = append(proj, cols[i]), append(asked, n)
	}
	return proj, asked, nil
}

// after is the keyset condition "(k1, k2, …) > (v1, v2, …)" expanded, each
// value a parameter cast to its column's type.
func after(key []readpath.Column, vals []string) (string, []any) {
	var ors []string
	var args []any
	for i := range key {
		var ands []string
		for j := 0; j < i; j++ {
			ands = append(ands, mergesql.Ident(key[j].Name)+" = CAST(? AS "+key[j].Type+")")
			args = append(args, vals[j])
		}
		ands = append(ands, mergesql.Ident(key[i].Name)+" > CAST(? AS "+key[i].Type+")")
		args = append(args, vals[i])
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return "(" + strings.Join(ors, " OR ") + ")", args
}

// keyText is a key value as text that CAST(… AS its type) reads back
// exactly: the read path's text form, except bytes, which DuckDB reads as
// one \xHH escape per byte.
func keyText(v any, typ string) string {
	if b, ok := v.([]byte); ok {
		var sb strings.Builder
		for _, c := range b {
			fmt.Fprintf(&sb, "\\x%02X", c)
		}
		return sb.String()
	}
	return readpath.Text(v, typ)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
