package changefeed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// Reader is the read path the feed needs (internal/query.Reader is one):
// points resolved to versions, and SQL over a version's views.
type Reader interface {
	// Resolve finds a point: "" for the newest version, "N" for manifest
	// version N; a version the history no longer holds is an error of
	// class manifest.ErrOutsideRetention.
	Resolve(ctx context.Context, point string) (readpath.At, error)
	Query(ctx context.Context, at readpath.At, sql string, args ...any) (*readpath.Result, error)
}

// ViewNamer is an optional capability of a Reader: the name a table's
// views have in the engine when that is not its PostgreSQL schema and name
// (tables whose names differ only in case get aliases, as DuckDB matches
// names without regard to case). Without it the views are
// changes."<schema>"."<name>".
type ViewNamer interface {
	ViewName(m *manifest.Manifest, table string) (schema, name string)
}

// changesView is the quoted name of table's change rows in at's engine.
func changesView(r Reader, m *manifest.Manifest, table string) string {
	mt := m.Tables[table]
	schema, name := mt.Schema, mt.Name
	if n, ok := r.(ViewNamer); ok {
		schema, name = n.ViewName(m, table)
	}
	return "changes." + mergesql.Ident(schema) + "." + mergesql.Ident(name)
}

// History is what the feed needs of the history log (manifest.History is
// one): the oldest version still readable.
type History interface {
	Oldest(ctx context.Context) (manifest.Header, error)
}

// Feed serves the change rows of the sink's tables in (__lsn, __seq) order,
// page by page, across manifest versions and compactions. It is safe for
// concurrent use: it holds no state of its own.
type Feed struct {
	r Reader
	h History
}

// New returns a feed over r and the history h.
func New(r Reader, h History) *Feed { return &Feed{r: r, h: h} }

// Errors of Page, besides the read path's own.
var (
	// ErrGone is the class of GoneError: the cursor is older than every
	// change the retained history holds in full.
	ErrGone = errors.New("cursor is past the change feed's retention")
	// ErrUnknownTable is the class of an error for a table the newest
	// version does not capture.
	ErrUnknownTable = errors.New("unknown table")
	// ErrLimit is the class of an error for a limit below 1.
	ErrLimit = errors.New("bad limit")
)

// GoneError is a cursor no retained version serves completely: compaction
// folded the changes after it into a base that keeps only each key's newest
// version, and the versions before that compaction left history.retention.
// Oldest is the oldest cursor the feed still serves for the table.
type GoneError struct {
	Table         string
	Cursor        Cursor
	Oldest        Cursor
	OldestVersion uint64
	lost          error // the read of an older version that failed, if any
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("change feed of %s: cursor %s is older than the history retains in full (history.retention); the oldest cursor served is %s (version %d): "+
		"read the table's rows and follow the feed from the cursor they give", e.Table, e.Cursor, e.Oldest, e.OldestVersion)
}

func (e *GoneError) Is(target error) bool { return target == ErrGone }
func (e *GoneError) Unwrap() error        { return e.lost }

// Change is one change row.
type Change struct {
	// Cursor is the row's (__lsn, __seq): a page's Next is its last row's.
	Cursor     Cursor
	Op         string // I, U, D, or T (a truncate: table columns null)
	XID        int64
	CommitTime time.Time
	// Unchanged lists the columns whose unchanged TOAST value was not sent
	// and could not be filled (their value is null here).
	Unchanged []string
	// Values holds the table's columns, in Page.Columns order.
	Values []any
}

// Page is one page of a table's change feed.
type Page struct {
	Table string
	// Columns are the table's columns in its newest schema version (the
	// metadata columns are Change's fields).
	Columns []readpath.Column
	Changes []Change
	// Next is the cursor to ask the next page after: the last change's, or
	// the asked cursor when the page is empty.
	Next Cursor
	// More is set when changes after Next were already committed when the
	// page was read: ask again at once. When unset the consumer has every
	// change of the newest version; new ones arrive with new versions.
	More bool
	// Version is the newest manifest version when the page was read.
	Version uint64
}

// After is the cursor after every change a resolved point holds, for a
// consumer that loads a table's state at the point and then follows its
// changes. A point bounded by commit time has no such cursor (ok false).
func After(at readpath.At) (c Cursor, ok bool) {
	switch {
	case !at.Bound.Time.IsZero():
		return Cursor{}, false
	case at.Bound.LSN != 0:
		return endOf(at.Bound.LSN), true
	}
	return endOf(at.Manifest.EndLSN), true
}

// Page returns the changes of table (its manifest key, "schema.name") after
// the cursor, in (__lsn, __seq) order, at most limit of them.
//
// A version's change rows are complete after a cursor only when the
// table's base ends at or before it: compaction folds deltas into a base
// that keeps each key's newest version only. So the page is read from the
// newest version whose base the cursor is not behind, found by bisection
// over the retained versions (whether a version serves a cursor only ever
// goes from yes to no as versions grow, compactions moving the base
// forward), and continues through newer versions up to the newest. A
// cursor no retained version serves is a GoneError; the zero cursor
// starts at the oldest cursor served.
//
// Duplicate rows (a transaction replayed into a second delta) are served
// once.
func (f *Feed) Page(ctx context.Context, table string, after Cursor, limit int) (*Page, error) {
	p, err := f.page(ctx, table, after, limit)
	var gone *GoneError
	if after.IsZero() && errors.As(err, &gone) {
		// The start of the feed is the oldest cursor served.
		return f.page(ctx, table, gone.Oldest, limit)
	}
	return p, err
}

func (f *Feed) page(ctx context.Context, table string, after Cursor, limit int) (*Page, error) {
	if limit < 1 {
		return nil, fmt.Errorf("change feed of %s: %w: limit %d, want at least 1", table, ErrLimit, limit)
	}
	if err := after.Check(); err != nil {
		return nil, fmt.Errorf("change feed of %s: %w", table, err)
	}
	newest, err := f.r.Resolve(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("change feed of %s: newest version: %w", table, err)
	}
	mt := newest.Manifest.Tables[table]
	if mt == nil {
		return nil, fmt.Errorf("change feed: %w %q", ErrUnknownTable, table)
	}
	// The newest version's end LSN is the newest committed position: every
	// cursor the server gives (a change's, endOf of a point or of a base)
	// is at or before it. One past it, whatever its sequence number, names
	// changes the sink does not have: a cursor of another sink, or made up.
	if after.LSN > newest.Manifest.EndLSN {
		return nil, fmt.Errorf("change feed of %s: %w %s: LSN %s is past the newest committed position, LSN %s (version %d); a cursor of another sink?",
			table, ErrCursor, after, after.LSN, newest.Manifest.EndLSN, newest.Version())
	}
	page := &Page{Table: table, Next: after, Version: newest.Version()}
	if page.Columns, err = columns(mt); err != nil {
		return nil, fmt.Errorf("change feed of %s: %w", table, err)
	}
	at, err := f.start(ctx, table, newest, page.Next)
	if err != nil {
		return nil, f.gone(table, newest, after, err)
	}
	for {
		need := limit - len(page.Changes)
		rows, truncated, err := f.read(ctx, at, mt, page.Columns, page.Next, need+1)
		if err != nil {
			if len(page.Changes) > 0 && lost(err) {
				page.More = true // the next page says what is gone
				return page, nil
			}
			return nil, f.gone(table, newest, after, err)
		}
		if len(rows) > need {
			rows, page.More = rows[:need], true
		}
		if truncated {
			page.More = true
			if len(rows) == 0 {
				return nil, fmt.Errorf("change feed of %s: one change row after %s is larger than the read path's byte cap (query.max_bytes)", table, page.Next)
			}
		}
		page.Changes = append(page.Changes, rows...)
		if len(rows) > 0 {
			page.Next = rows[len(rows)-1].Cursor
		}
		if page.More || at.Version() >= newest.Version() {
			return page, nil
		}
		// This version is exhausted and newer ones exist: the newest of
		// them that serves the cursor now.
		next, found, err := f.newestServing(ctx, table, newest, at.Version(), page.Next)
		if err != nil {
			if len(page.Changes) > 0 && lost(err) {
				page.More = true
				return page, nil
			}
			return nil, f.gone(table, newest, after, err)
		}
		if !found {
			if len(page.Changes) > 0 {
				page.More = true
				return page, nil
			}
			return nil, fmt.Errorf("change feed of %s: version %d holds no change after %s and version %d folded changes past it", table, at.Version(), page.Next, at.Version()+1)
		}
		at = next
	}
}

// lost reports whether err says an older version is no longer readable:
// it left the history, or garbage collection took its files (the history
// log may keep a version a little longer than its files, back to the
// checkpoint the oldest retained version is rebuilt from).
func lost(err error) bool {
	return errors.Is(err, readpath.ErrCollected) || errors.Is(err, manifest.ErrOutsideRetention)
}

// gone turns an older version's loss into a GoneError naming the oldest
// cursor the newest version serves (the zero cursor's page is read from
// there instead, by the caller's retry); other errors pass.
func (f *Feed) gone(table string, newest readpath.At, after Cursor, err error) error {
	if !lost(err) || errors.Is(err, ErrGone) {
		return err
	}
	return &GoneError{Table: table, Cursor: after, Oldest: firstServed(newest.Manifest.Tables[table]), OldestVersion: newest.Version(), lost: err}
}

// start returns the version a page after c starts in.
func (f *Feed) start(ctx context.Context, table string, newest readpath.At, c Cursor) (readpath.At, error) {
	ok, err := f.serves(ctx, newest, table, c)
	if err != nil || ok {
		return newest, err
	}
	oldestHd, err := f.h.Oldest(ctx)
	if err != nil {
		return readpath.At{}, fmt.Errorf("change feed of %s: oldest version: %w", table, err)
	}
	oldest, err := f.version(ctx, oldestHd.Version)
	if err != nil {
		return readpath.At{}, fmt.Errorf("change feed of %s: %w", table, err)
	}
	if ok, err := f.serves(ctx, oldest, table, c); err != nil {
		return readpath.At{}, err
	} else if !ok {
		return readpath.At{}, &GoneError{Table: table, Cursor: c, Oldest: firstServed(oldest.Manifest.Tables[table]), OldestVersion: oldest.Version()}
	}
	at, found, err := f.newestServing(ctx, table, newest, oldest.Version(), c)
	switch {
	case err != nil:
		return readpath.At{}, err
	case !found:
		return oldest, nil
	}
	return at, nil
}

// newestServing bisects (lo, newest] for the newest version that serves c,
// given that lo does; found is false when only lo does.
func (f *Feed) newestServing(ctx context.Context, table string, newest readpath.At, lo uint64, c Cursor) (readpath.At, bool, error) {
	if ok, err := f.serves(ctx, newest, table, c); err != nil || ok {
		return newest, ok, err
	}
	hi := newest.Version()
	var best readpath.At
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		at, err := f.version(ctx, mid)
		if err != nil {
			return readpath.At{}, false, fmt.Errorf("change feed of %s: %w", table, err)
		}
		ok, err := f.serves(ctx, at, table, c)
		if err != nil {
			return readpath.At{}, false, err
		}
		if ok {
			lo, best = mid, at
		} else {
			hi = mid
		}
	}
	return best, best.Manifest != nil, nil
}

// version resolves manifest version v. One that left the retention
// meanwhile is the outside-retention error, which the caller reports.
func (f *Feed) version(ctx context.Context, v uint64) (readpath.At, error) {
	at, err := f.r.Resolve(ctx, strconv.FormatUint(v, 10))
	if err != nil {
		return readpath.At{}, fmt.Errorf("version %d: %w", v, err)
	}
	return at, nil
}

// serves reports whether at's change rows of table hold every change after
// c: the table is absent (no change to lose), its base is nil or a
// snapshot (every row of a snapshot is a change: its insert), or the base
// ends before c — or at c's LSN with c at or after the last row of that
// transaction the base keeps (the newest row of a transaction is the newest
// of its key, so the base keeps it; a folded truncate marker is in
// Base.Truncate).
func (f *Feed) serves(ctx context.Context, at readpath.At, table string, c Cursor) (bool, error) {
	mt := at.Manifest.Tables[table]
	if mt == nil || mt.Base == nil {
		return true, nil
	}
	b := mt.Base
	switch {
	case b.CompactedAt == nil && len(b.SortedBy) == 0:
		return true, nil
	case b.MaxLSN < c.LSN:
		return true, nil
	case b.MaxLSN > c.LSN:
		return false, nil
	case c.Seq == math.MaxInt64:
		return true, nil
	}
	// Ask the base for the last row it keeps at c's LSN.
	q := fmt.Sprintf("SELECT max(__seq) FROM %s WHERE __lsn = ?", changesView(f.r, at.Manifest, table))
	res, err := f.r.Query(ctx, at, q, int64(c.LSN))
	if err != nil {
		return false, fmt.Errorf("change feed of %s: version %d: last row at %s: %w", table, at.Version(), c.LSN, err)
	}
	last := Cursor{LSN: c.LSN, Seq: math.MinInt64}
	if len(res.Rows) == 1 && len(res.Rows[0]) == 1 {
		if n, ok := res.Rows[0][0].(int64); ok {
			last.Seq = n
		}
	}
	if t := b.Truncate; t != nil && t.LSN == b.MaxLSN {
		last.Seq = max(last.Seq, t.Seq)
	}
	return !c.Less(last), nil
}

// firstServed is the oldest cursor a version serves for a table: the zero
// cursor, or the end of its compacted base.
func firstServed(mt *manifest.Table) Cursor {
	if mt == nil || mt.Base == nil || mt.Base.CompactedAt == nil && len(mt.Base.SortedBy) == 0 {
		return Cursor{}
	}
	return endOf(mt.Base.MaxLSN)
}

// columns are the table's columns in its newest schema version, typed as
// the views type them.
func columns(mt *manifest.Table) ([]readpath.Column, error) {
	sv := mt.CurrentSchema()
	if sv == nil {
		return nil, fmt.Errorf("no schema version %d in the manifest", mt.SchemaVersion)
	}
	out := make([]readpath.Column, len(sv.Columns))
	for i, c := range sv.Columns {
		t, err := mergesql.DuckType(c.ParquetType)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		out[i] = readpath.Column{Name: c.Name, Type: t}
	}
	return out, nil
}

// read returns at most n change rows of mt after c from at's changes view,
// each (__lsn, __seq) once, and whether the read path cut the result.
func (f *Feed) read(ctx context.Context, at readpath.At, mt *manifest.Table, cols []readpath.Column, c Cursor, n int) ([]Change, bool, error) {
	table := mt.Schema + "." + mt.Name
	if at.Manifest.Tables[table] == nil {
		return nil, false, nil
	}
	names := ""
	for _, col := range cols {
		names += mergesql.Ident(col.Name) + ", "
	}
	q := fmt.Sprintf(`SELECT %s__op, __lsn, __seq, __xid, __op_ts, __unchanged FROM %s
WHERE __lsn > ? OR (__lsn = ? AND __seq > ?)
QUALIFY row_number() OVER (PARTITION BY __lsn, __seq ORDER BY __op) = 1
ORDER BY __lsn, __seq LIMIT ?`, names, changesView(f.r, at.Manifest, table))
	res, err := f.r.Query(ctx, at, q, int64(c.LSN), int64(c.LSN), c.Seq, int64(n))
	if err != nil {
		return nil, false, fmt.Errorf("change feed of %s.%s: version %d: %w", mt.Schema, mt.Name, at.Version(), err)
	}
	out := make([]Change, 0, len(res.Rows))
	k := len(cols)
	for _, row := range res.Rows {
		if len(row) != k+6 {
			return nil, false, fmt.Errorf("change feed of %s.%s: version %d: %d columns, want %d", mt.Schema, mt.Name, at.Version(), len(row), k+6)
		}
		ch := Change{Values: row[:k:k]}
		ch.Op, _ = row[k].(string)
		lsn, _ := row[k+1].(int64)
		ch.Cursor = Cursor{LSN: cdc.LSN(lsn), Seq: asInt64(row[k+2])}
		ch.XID = asInt64(row[k+3])
		ch.CommitTime, _ = row[k+4].(time.Time)
		if l, ok := row[k+5].([]any); ok {
			for _, u := range l {
				if s, ok := u.(string); ok {
					ch.Unchanged = append(ch.Unchanged, s)
				}
			}
		}
		out = append(out, ch)
	}
	return out, res.Truncated, nil
}

func asInt64(v any) int64 {
	n, _ := v.(int64)
	return n
}
