package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

type QueryInput struct {
	SQL     string `json:"sql" jsonschema:"one SELECT statement (DuckDB dialect) over the views \"schema\".\"table\" (current state) and changes.\"schema\".\"table\" (change rows)"`
	AsOf    string `json:"as_of,omitempty" jsonschema:"the point to read: a manifest version N, epoch:N, lsn:X/Y, an RFC 3339 time, main, staging or raw@<RFC 3339 time>; empty for the newest version"`
	MaxRows int    `json:"max_rows,omitempty" jsonschema:"the most rows to return (default and most: the server's row cap)"`
	// Cursor continues a truncated result: the same sql, the next rows, at
	// the same point.
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of a truncated result, with the same sql: the next rows at the same point (as_of is then ignored)"`
}

type QueryOutput struct {
	At         AtOutput       `json:"at"`
	Columns    []ResultColumn `json:"columns"`
	Rows       [][]Value      `json:"rows" jsonschema:"the rows, each an array of cells in the columns' order"`
	Truncated  bool           `json:"truncated" jsonschema:"rows were left out at max_rows or the server's row or byte cap: next_cursor reads on"`
	Offset     int64          `json:"offset" jsonschema:"the index of the first row returned in the whole result"`
	NextCursor string         `json:"next_cursor,omitempty" jsonschema:"when truncated: pass it as cursor, with the same sql, for the next rows; the order is stable when the query has an ORDER BY"`
}

// queryCursor is what a cursor carries: the point pinned (so the next
// page reads the same version), the offset, and a hash of the SQL (so a
// cursor is not used with another query).
type queryCursor struct {
	Point  string `json:"p"`
	Offset int64  `json:"o"`
	SQL    string `json:"h"`
}

func sqlHash(sql string) string {
	h := sha256.Sum256([]byte(strings.TrimSpace(sql)))
	return hex.EncodeToString(h[:8])
}

func encodeCursor(c queryCursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (queryCursor, error) {
	var c queryCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.Offset < 0 {
		return queryCursor{}, errors.New("cursor is not one this server gave: pass next_cursor as it came, or no cursor for the first rows")
	}
	return c, nil
}

// page is sql with a window of rows: one more than asked, to know
// whether more follow. The SQL goes inside a subquery on lines of its
// own, so a trailing comment cannot swallow the parenthesis; a trailing
// semicolon is dropped. Anything else the engine checks as it checks the
// SQL alone: one statement, a query.
func page(sql string, limit int, offset int64) string {
	body := strings.TrimSpace(sql)
	for strings.HasSuffix(body, ";") {
		body = strings.TrimSpace(strings.TrimSuffix(body, ";"))
	}
	return fmt.Sprintf("SELECT * FROM (\n%s\n) AS q\nLIMIT %d OFFSET %d", body, limit+1, offset)
}

func (s *Server) query(ctx context.Context, in QueryInput) (QueryOutput, error) {
	// The audit record holds the question before anything can refuse it.
	rec := access.RecordFrom(ctx)
	rec.SQL = in.SQL
	if strings.TrimSpace(in.SQL) == "" {
		return QueryOutput{}, errors.New("sql is required: one SELECT statement, e.g. SELECT * FROM \"public\".\"orders\" LIMIT 10 (list_tables names the views)")
	}
	limit := in.MaxRows
	switch {
	case limit == 0:
		limit = s.o.MaxRows
	case limit < 0 || limit > s.o.MaxRows:
		return QueryOutput{}, fmt.Errorf("max_rows = %d: ask for 1 to %d rows, and page with next_cursor", limit, s.o.MaxRows)
	}
	point, offset := in.AsOf, int64(0)
	if in.Cursor != "" {
		c, err := decodeCursor(in.Cursor)
		if err != nil {
			return QueryOutput{}, err
		}
		if c.SQL != sqlHash(in.SQL) {
			return QueryOutput{}, errors.New("cursor belongs to another query: send the same sql with it, or drop the cursor to start this one")
		}
		point, offset = c.Point, c.Offset
	}
	at, err := s.resolve(ctx, point)
	if err != nil {
		return QueryOutput{}, err
	}
	res, err := s.o.Reader.Query(ctx, at, page(in.SQL, limit, offset))
	if errors.Is(err, readpath.ErrInvalid) || errors.Is(err, readpath.ErrRefused) {
		// The SQL as sent, alone: its own error is the one to word (a
		// refusal runs nothing), and SQL the paging wrapper broke (a
		// comment after the last semicolon) is answered from the
		// engine's capped result instead.
		alone, err2 := s.o.Reader.Query(ctx, at, in.SQL)
		res, err = alone, err2
		if err == nil {
			res.Rows = res.Rows[min(offset, int64(len(res.Rows))):]
		}
	}
	if err != nil {
		if refused := (*readpath.RefusedError)(nil); errors.As(err, &refused) {
			rec.Rule = refused.Rule
		}
		return QueryOutput{}, callError(err)
	}
	rs := rowsOf(res, limit)
	out := QueryOutput{At: atOutput(at), Columns: rs.columns, Rows: rs.rows, Truncated: rs.truncated, Offset: offset}
	if out.Truncated {
		if len(out.Rows) == 0 {
			return QueryOutput{}, errors.New("one row is larger than the server's byte cap: select fewer or smaller columns")
		}
		out.NextCursor = encodeCursor(queryCursor{Point: out.At.Point, Offset: offset + int64(len(out.Rows)), SQL: sqlHash(in.SQL)})
	}
	rec.Rows, rec.Truncated = int64(len(out.Rows)), out.Truncated
	return out, nil
}
