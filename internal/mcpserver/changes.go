package mcpserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// ChangeFeed is what get_changes needs (*changefeed.Feed): a table's
// change rows after a cursor, a page at a time. A cursor past retention is
// a *changefeed.GoneError naming the oldest cursor served.
type ChangeFeed interface {
	Page(ctx context.Context, table string, after changefeed.Cursor, limit int) (*changefeed.Page, error)
}

type ChangesInput struct {
	Table string `json:"table" jsonschema:"the table: schema.table, or its bare name when one schema has it"`
	After string `json:"after,omitempty" jsonschema:"the cursor to read after: a next_cursor (or a change's cursor) as given; empty for the oldest change the history holds"`
	Limit int    `json:"limit,omitempty" jsonschema:"the most changes to return (default and most: the server's row cap)"`
}

// ChangeRow is one change row.
type ChangeRow struct {
	Cursor     string   `json:"cursor" jsonschema:"the change's position (__lsn, __seq): reading after it gives the changes that follow"`
	Op         string   `json:"op" jsonschema:"I (insert), U (update), D (delete: key columns only) or T (truncate: no columns)"`
	XID        int64    `json:"xid"`
	CommitTime string   `json:"commit_time,omitempty"`
	Unchanged  []string `json:"unchanged,omitempty" jsonschema:"columns whose unchanged TOAST value could not be filled (null here)"`
	Values     []Value  `json:"values" jsonschema:"the table's columns, in the columns' order"`
}

type ChangesOutput struct {
	Table      string         `json:"table"`
	Columns    []ResultColumn `json:"columns" jsonschema:"the table's columns in its newest schema version"`
	Changes    []ChangeRow    `json:"changes"`
	NextCursor string         `json:"next_cursor" jsonschema:"pass it as after for the next page: the last change's cursor, or after itself when the page is empty"`
	More       bool           `json:"more" jsonschema:"more changes were already committed: ask again at once; when false the feed is caught up with the newest version"`
	Version    uint64         `json:"version" jsonschema:"the newest manifest version when the page was read"`
}

func (s *Server) changes(ctx context.Context, in ChangesInput) (ChangesOutput, error) {
	limit := in.Limit
	switch {
	case limit == 0:
		limit = s.o.MaxRows
	case limit < 0 || limit > s.o.MaxRows:
		return ChangesOutput{}, fmt.Errorf("limit = %d: ask for 1 to %d changes, and page with next_cursor", limit, s.o.MaxRows)
	}
	after, err := changefeed.ParseCursor(in.After)
	if err != nil {
		return ChangesOutput{}, fmt.Errorf("%w; pass after as a next_cursor or a change's cursor gave it, or leave it empty to start at the oldest change", err)
	}
	newest, err := s.resolve(ctx, "")
	if err != nil {
		return ChangesOutput{}, err
	}
	key, _, err := lookupTable(newest.Manifest, in.Table)
	if err != nil {
		return ChangesOutput{}, err
	}
	rec := access.RecordFrom(ctx)
	rec.Tables = []string{key}
	rec.Point = in.After
	p, err := s.o.Changes.Page(ctx, key, after, limit)
	var gone *changefeed.GoneError
	switch {
	case errors.As(err, &gone):
		return ChangesOutput{}, fmt.Errorf("%w. To go on: read the table's current state (query) and follow from after=%s, or from the oldest cursor served, after=%s, accepting the gap", err, endCursor(newest), gone.Oldest)
	case errors.Is(err, changefeed.ErrCursor):
		return ChangesOutput{}, fmt.Errorf("%w; pass after as a next_cursor gave it", err)
	case err != nil:
		return ChangesOutput{}, callError(err)
	}
	out := ChangesOutput{Table: p.Table, Columns: resultColumns(p.Columns), Changes: []ChangeRow{}, NextCursor: p.Next.String(), More: p.More, Version: p.Version}
	for _, c := range p.Changes {
		vals := make([]Value, len(c.Values))
		for i, v := range c.Values {
			vals[i] = cell(v)
		}
		out.Changes = append(out.Changes, ChangeRow{Cursor: c.Cursor.String(), Op: c.Op, XID: c.XID, CommitTime: timeText(c.CommitTime), Unchanged: c.Unchanged, Values: vals})
	}
	rec.Rows, rec.Truncated = int64(len(out.Changes)), out.More
	return out, nil
}

// endCursor is the cursor after every change of the newest version, where
// a consumer that has just read the current state follows from.
func endCursor(newest readpath.At) string {
	c, ok := changefeed.After(newest)
	if !ok {
		return "(none)"
	}
	return c.String()
}

func resultColumns(cs []readpath.Column) []ResultColumn {
	out := make([]ResultColumn, len(cs))
	for i, c := range cs {
		out[i] = ResultColumn{Name: c.Name, Type: c.Type}
	}
	return out
}
