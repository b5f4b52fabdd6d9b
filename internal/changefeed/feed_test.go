//go:build !nodb

package changefeed_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/changefeed/changefeedtest"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

// The read path's reader serves the feed's port.
var _ changefeed.Reader = (*query.Reader)(nil)
var _ changefeed.History = (*manifest.History)(nil)

const table = "public.orders"

func newFeed(t *testing.T, s *changefeedtest.Sink) *changefeed.Feed {
	t.Helper()
	r, err := query.NewReader(query.ReaderOptions{Sink: s.Store, TempDir: filepath.Join(t.TempDir(), "query"), Engines: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return changefeed.New(r, manifest.NewHistory(s.Store))
}

// seen is a change as a test compares it.
type seen struct {
	LSN    cdc.LSN
	Seq    int64
	Op     string
	ID     any
	Status any
}

func (s seen) String() string {
	return fmt.Sprintf("%s/%d %s id=%v %v", s.LSN, s.Seq, s.Op, s.ID, s.Status)
}

func want(rows ...[]changefeedtest.Row) []seen {
	var out []seen
	for _, rs := range rows {
		for _, r := range rs {
			w := seen{LSN: r.LSN, Seq: r.Seq, Op: string(r.Op), ID: r.ID, Status: r.Status}
			if r.Op == cdc.OpDelete {
				w.Status = nil
			}
			out = append(out, w)
		}
	}
	return out
}

// follow reads pages of at most limit from c until one says no more, and
// returns what they held and the last cursor.
func follow(t *testing.T, f *changefeed.Feed, c changefeed.Cursor, limit int) ([]seen, changefeed.Cursor) {
	t.Helper()
	var out []seen
	for range 1000 {
		p, err := f.Page(context.Background(), table, c, limit)
		if err != nil {
			t.Fatalf("page after %s: %v", c, err)
		}
		if len(p.Changes) > limit {
			t.Fatalf("page after %s: %d changes, limit %d", c, len(p.Changes), limit)
		}
		out = append(out, page(p)...)
		c = p.Next
		if !p.More {
			return out, c
		}
	}
	t.Fatal("the feed never ends")
	return nil, c
}

func page(p *changefeed.Page) []seen {
	var out []seen
	for _, ch := range p.Changes {
		out = append(out, seen{LSN: ch.Cursor.LSN, Seq: ch.Cursor.Seq, Op: ch.Op, ID: ch.Values[0], Status: ch.Values[1]})
	}
	return out
}

func same(t *testing.T, what string, got, want []seen) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %v\n want %v", what, got, want)
	}
}

func ch(op cdc.Op, lsn cdc.LSN, seq, id int64, status string) changefeedtest.Row {
	return changefeedtest.Row{Op: op, LSN: lsn, Seq: seq, ID: id, Status: status}
}

var (
	e1 = []changefeedtest.Row{ch(cdc.OpInsert, 0x200, 0, 1, "new"), ch(cdc.OpInsert, 0x200, 1, 2, "new"), ch(cdc.OpInsert, 0x200, 2, 3, "new"),
		ch(cdc.OpInsert, 0x210, 0, 4, "new"), ch(cdc.OpInsert, 0x210, 1, 5, "new")}
	e2 = []changefeedtest.Row{ch(cdc.OpUpdate, 0x300, 0, 1, "paid"), ch(cdc.OpUpdate, 0x300, 1, 2, "paid"), ch(cdc.OpDelete, 0x300, 2, 3, "")}
	// One transaction changes key 1 twice: a compacted base keeps only the
	// second.
	e3 = []changefeedtest.Row{ch(cdc.OpUpdate, 0x400, 0, 4, "paid"), ch(cdc.OpUpdate, 0x400, 1, 1, "shipped"), ch(cdc.OpUpdate, 0x400, 2, 1, "done")}
	e4 = []changefeedtest.Row{ch(cdc.OpInsert, 0x500, 0, 6, "new"), ch(cdc.OpDelete, 0x500, 1, 2, "")}
	e5 = []changefeedtest.Row{ch(cdc.OpUpdate, 0x600, 0, 6, "paid")}
)

// TestFeedAcrossCompaction: a consumer reading small pages gets every
// change once and in order while new versions land and a compaction folds
// the changes it has not read yet; the pages after the compaction come from
// the version before it.
func TestFeedAcrossCompaction(t *testing.T) {
	ctx := context.Background()
	s := changefeedtest.New(t, []string{table, "public.items"})
	s.Flush(1, map[string][]changefeedtest.Row{table: e1})
	s.Flush(2, map[string][]changefeedtest.Row{table: e2, "public.items": e1[:1]})
	f := newFeed(t, s)

	p, err := f.Page(ctx, table, changefeed.Cursor{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "first page", page(p), want(e1[:2]))
	if !p.More || p.Next != (changefeed.Cursor{LSN: 0x200, Seq: 1}) {
		t.Fatalf("first page: more %v next %s", p.More, p.Next)
	}
	s.Flush(3, map[string][]changefeedtest.Row{table: e3})
	s.Compact(table)
	s.Flush(4, map[string][]changefeedtest.Row{table: e4})

	got, last := follow(t, f, p.Next, 2)
	same(t, "after the compaction", got, want(e1[2:], e2, e3, e4))
	if last != (changefeed.Cursor{LSN: 0x500, Seq: 1}) {
		t.Errorf("last cursor %s", last)
	}
	// Inside the transaction the base folded (key 1 changed twice): the
	// version before the compaction serves it.
	got, _ = follow(t, f, changefeed.Cursor{LSN: 0x400, Seq: 0}, 10)
	same(t, "inside the folded transaction", got, want(e3[1:], e4))
	// Caught up: an empty page, no more, the cursor unchanged; then the
	// next version's changes.
	p, err = f.Page(ctx, table, last, 10)
	if err != nil || len(p.Changes) != 0 || p.More || p.Next != last {
		t.Fatalf("caught up: %+v, %v", p, err)
	}
	s.Flush(5, map[string][]changefeedtest.Row{table: e5})
	got, _ = follow(t, f, last, 10)
	same(t, "the next version", got, want(e5))
	// The whole feed, in pages of 1 and of 100, from the start.
	for _, n := range []int{1, 3, 100} {
		got, _ = follow(t, f, changefeed.Cursor{}, n)
		same(t, fmt.Sprintf("from the start in pages of %d", n), got, want(e1, e2, e3, e4, e5))
	}
}

// TestFeedGone: once the versions before a compaction leave the retention,
// a cursor behind the base is gone (with the oldest cursor served), one at
// the end of the base's newest transaction is still served from the base,
// and the zero cursor starts at the oldest cursor served.
func TestFeedGone(t *testing.T) {
	ctx := context.Background()
	s := changefeedtest.New(t, []string{table})
	s.Flush(1, map[string][]changefeedtest.Row{table: e1})
	s.Flush(2, map[string][]changefeedtest.Row{table: e2})
	s.Flush(3, map[string][]changefeedtest.Row{table: e3})
	s.Compact(table)
	s.Flush(4, map[string][]changefeedtest.Row{table: e4})
	f := newFeed(t, s)
	// Inside retention, everything is served.
	got, _ := follow(t, f, changefeed.Cursor{LSN: 0x210, Seq: 0}, 2)
	same(t, "inside retention", got, want(e1[4:], e2, e3, e4))

	// The log keeps versions back to its checkpoint (version 1), but
	// their files are gone: they read as collected, which the feed treats
	// as gone too.
	if res := s.Expire(); res.Retired == 0 {
		t.Fatalf("collect deleted no retired file: %+v", res)
	}
	check := func(what string) {
		t.Helper()
		for _, c := range []changefeed.Cursor{{LSN: 0x210, Seq: 0}, {LSN: 0x400, Seq: 1}, {LSN: 0x100, Seq: 5}} {
			_, err := f.Page(ctx, table, c, 10)
			var gone *changefeed.GoneError
			if !errors.As(err, &gone) || !errors.Is(err, changefeed.ErrGone) {
				t.Fatalf("%s: cursor %s: %v, want GoneError", what, c, err)
			}
			if gone.Oldest != (changefeed.Cursor{LSN: 0x400, Seq: math.MaxInt64}) || gone.Table != table || gone.Cursor != c {
				t.Errorf("%s: gone: %+v", what, gone)
			}
			got, _ := follow(t, f, gone.Oldest, 10)
			same(t, what+": from the oldest cursor", got, want(e4))
		}
		got, _ := follow(t, f, changefeed.Cursor{LSN: 0x400, Seq: 2}, 10)
		same(t, what+": from the end of the base", got, want(e4))
		got, _ = follow(t, f, changefeed.Cursor{}, 10)
		same(t, what+": from the start", got, want(e4))
	}
	check("files collected")
	// The log trimmed too: the oldest readable version is after the
	// compaction.
	m, _, err := manifest.Load(ctx, s.Store)
	if err != nil {
		t.Fatal(err)
	}
	if err := manifest.NewHistory(s.Store).SetOldest(ctx, m.Version); err != nil {
		t.Fatal(err)
	}
	check("log trimmed")
}

// TestFeedInput: bad limits, unknown tables, a cursor past the newest
// version and replayed rows.
func TestFeedInput(t *testing.T) {
	ctx := context.Background()
	s := changefeedtest.New(t, []string{table})
	s.Flush(1, map[string][]changefeedtest.Row{table: e1})
	s.Flush(2, map[string][]changefeedtest.Row{table: e1[3:]}) // a replay of the transaction at 0x210
	f := newFeed(t, s)
	if _, err := f.Page(ctx, table, changefeed.Cursor{}, 0); !errors.Is(err, changefeed.ErrLimit) {
		t.Errorf("limit 0: %v", err)
	}
	if _, err := f.Page(ctx, "public.nope", changefeed.Cursor{}, 5); !errors.Is(err, changefeed.ErrUnknownTable) {
		t.Errorf("unknown table: %v", err)
	}
	if _, err := f.Page(ctx, table, changefeed.Cursor{LSN: 0xFFFF0000, Seq: 1}, 5); !errors.Is(err, changefeed.ErrCursor) {
		t.Errorf("a cursor past the newest version: %v", err)
	}
	got, _ := follow(t, f, changefeed.Cursor{}, 2)
	same(t, "a replayed transaction", got, want(e1))
	// An empty table: an empty page.
	s2 := changefeedtest.New(t, []string{table})
	p, err := newFeed(t, s2).Page(ctx, table, changefeed.Cursor{}, 5)
	if err != nil || len(p.Changes) != 0 || p.More {
		t.Errorf("empty table: %+v, %v", p, err)
	}
}
