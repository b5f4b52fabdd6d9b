//go:build !nodb

package events_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/changefeed/changefeedtest"
	"github.com/pg-cdc/pg-cdc/internal/events"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/query"
	"github.com/pg-cdc/pg-cdc/internal/serve"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The read path's reader and the feed serve the ports.
var (
	_ events.Reader = (*query.Reader)(nil)
	_ events.Feed   = (*changefeed.Feed)(nil)
)

const table = "public.orders"

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
)

// env is a sink, the real read path over it, and the streams served by
// internal/serve's handler.
type env struct {
	sink   *changefeedtest.Sink
	reader *query.Reader
	feed   *changefeed.Feed
	srv    *serve.Server
	url    string
	client *http.Client
	audit  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// newEnv builds the env; wrap, when set, wraps the feed and the handler.
func newEnv(t *testing.T, o events.Options, wrapFeed func(events.Feed) events.Feed, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	e := &env{sink: changefeedtest.New(t, []string{table, "shop.items"}), audit: &syncBuffer{}}
	r, err := query.NewReader(query.ReaderOptions{Sink: e.sink.Store, TempDir: filepath.Join(t.TempDir(), "query"), Engines: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	e.reader, e.feed = r, changefeed.New(r, manifest.NewHistory(e.sink.Store))
	o.Reader = r
	o.Feed = e.feed
	if wrapFeed != nil {
		o.Feed = wrapFeed(e.feed)
	}
	o.Poll = cmpOr(o.Poll, 20*time.Millisecond)
	o.Heartbeat = cmpOr(o.Heartbeat, time.Hour)
	var h http.Handler = events.New(o)
	if wrap != nil {
		h = wrap(h)
	}
	e.srv, err = serve.New(serve.Options{Listen: "127.0.0.1:0", Events: h, MaxConcurrent: 1,
		Log: slog.New(slog.NewJSONHandler(e.audit, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.client = &http.Client{Transport: &http.Transport{}}
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

func cmpOr[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// start serves e's handler on an httptest server.
func (e *env) start(t *testing.T) {
	t.Helper()
	ts := httptest.NewServer(e.srv.Handler())
	t.Cleanup(ts.Close)
	e.url = ts.URL
}

// event is one server-sent event as the wire format defines it, parsed
// here independently of the server's writer; a comment line is an event
// with only Comment set.
type event struct {
	ID, Name, Data string
	Comment        string
	Retry          string
}

// sse is an open event stream.
type sse struct {
	resp   *http.Response
	events chan event
	cancel context.CancelFunc
	done   chan struct{}
}

// open opens path with the headers given (name, value, ...). A response
// that is not 200 is returned with its body read (stream nil).
func (e *env) open(t *testing.T, path string, headers ...string) (*sse, int, []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, b
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	s := &sse{resp: resp, events: make(chan event, 1000), cancel: cancel, done: make(chan struct{})}
	go s.read()
	t.Cleanup(s.close)
	return s, resp.StatusCode, nil
}

// mustOpen opens a stream that must start.
func (e *env) mustOpen(t *testing.T, path string, headers ...string) *sse {
	t.Helper()
	s, code, body := e.open(t, path, headers...)
	if s == nil {
		t.Fatalf("%s: %d %s", path, code, body)
	}
	return s
}

// read parses the stream: lines ending in LF (or CRLF); "field: value" or
// "field:value"; a line starting with a colon is a comment; a blank line
// dispatches the event being built.
func (s *sse) read() {
	defer close(s.done)
	defer close(s.events)
	sc := bufio.NewScanner(s.resp.Body)
	var ev event
	var data []string
	dirty := false
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			if dirty {
				ev.Data = strings.Join(data, "\n")
				s.events <- ev
			}
			ev, data, dirty = event{}, nil, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			s.events <- event{Comment: strings.TrimPrefix(strings.TrimPrefix(line, ":"), " ")}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Name = value
		case "data":
			data = append(data, value)
		case "retry":
			s.events <- event{Retry: value}
			continue
		}
		dirty = true
	}
}

func (s *sse) close() {
	s.cancel()
	s.resp.Body.Close()
	<-s.done
}

// next is the next event that is not a comment (nor retry), within d.
func (s *sse) next(t *testing.T, d time.Duration) (event, bool) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return event{}, false
			}
			if ev.Comment != "" || ev.Retry != "" {
				continue
			}
			return ev, true
		case <-timer.C:
			t.Fatalf("no event within %s", d)
			return event{}, false
		}
	}
}

// ended waits for the stream's end (EOF), skipping events.
func (s *sse) ended(t *testing.T, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("the stream did not end within %s", d)
		}
	}
}

type statusData struct {
	Version     uint64     `json:"version"`
	Epoch       uint64     `json:"epoch"`
	EndLSN      string     `json:"end_lsn"`
	FreshAsOf   *time.Time `json:"fresh_as_of"`
	IsStale     bool       `json:"is_stale"`
	CommittedAt time.Time  `json:"committed_at"`
}

func decode[T any](t *testing.T, ev event) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(ev.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("event %s %q: %v", ev.Name, ev.Data, err)
	}
	return v
}

// TestStatusStream: a status at once, one per new version (id the
// version), one when is_stale flips on an idle sink, and keepalive
// comments while quiet.
func TestStatusStream(t *testing.T) {
	var now atomic.Pointer[time.Time]
	e := newEnv(t, events.Options{StaleAfter: time.Minute, Heartbeat: 100 * time.Millisecond,
		Now: func() time.Time { return *now.Load() }}, nil, nil)
	t0 := e.sink.Now.Add(time.Second)
	now.Store(&t0)
	e.start(t)
	s, code, body := e.open(t, "/v1/stream/status")
	if s == nil {
		t.Fatalf("status: %d %s", code, body)
	}
	ev, _ := s.next(t, 5*time.Second)
	st := decode[statusData](t, ev)
	if ev.Name != "status" || ev.ID != "1" || st.Version != 1 || st.IsStale || st.FreshAsOf == nil || !st.FreshAsOf.Equal(e.sink.Now) {
		t.Fatalf("first status: %+v %+v", ev, st)
	}
	m := e.sink.Flush(1, map[string][]changefeedtest.Row{table: e1})
	ev, _ = s.next(t, 5*time.Second)
	st = decode[statusData](t, ev)
	if ev.ID != "2" || st.Version != 2 || st.Epoch != 1 || st.EndLSN != m.EndLSN.String() || !st.FreshAsOf.Equal(e.sink.Now) ||
		!st.CommittedAt.Equal(m.CommittedAt) || st.IsStale {
		t.Fatalf("status after a flush: %+v %+v (manifest end %s, committed %s)", ev, st, m.EndLSN, m.CommittedAt)
	}
	// Quiet: keepalive comments, no status.
	deadline := time.After(5 * time.Second)
	for keepalives := 0; keepalives < 2; {
		select {
		case ev := <-s.events:
			if ev.Comment == "keepalive" {
				keepalives++
			} else if ev.Retry == "" {
				t.Fatalf("while quiet: %+v", ev)
			}
		case <-deadline:
			t.Fatal("no keepalive")
		}
	}
	// An idle sink goes stale: a status with the same version.
	later := e.sink.Now.Add(2 * time.Minute)
	now.Store(&later)
	ev, _ = s.next(t, 5*time.Second)
	if st = decode[statusData](t, ev); ev.ID != "2" || !st.IsStale {
		t.Fatalf("stale: %+v %+v", ev, st)
	}
}

type changeData struct {
	Table      string    `json:"table"`
	Cursor     string    `json:"cursor"`
	Op         string    `json:"op"`
	LSN        string    `json:"lsn"`
	Seq        int64     `json:"seq"`
	XID        int64     `json:"xid"`
	CommitTime time.Time `json:"commit_time"`
	Row        struct {
		ID     int64   `json:"id"`
		Status *string `json:"status"`
		Amount *string `json:"amount"`
		At     *string `json:"at"`
	} `json:"row"`
	Version uint64 `json:"version"`
}

func (c changeData) String() string {
	st := "<nil>"
	if c.Row.Status != nil {
		st = *c.Row.Status
	}
	return fmt.Sprintf("%s %s id=%d %s", c.Cursor, c.Op, c.Row.ID, st)
}

func want(rows ...[]changefeedtest.Row) []string {
	var out []string
	for _, rs := range rows {
		for _, r := range rs {
			st := r.Status
			if r.Op == cdc.OpDelete {
				st = "<nil>"
			}
			c := changefeed.Cursor{LSN: r.LSN, Seq: r.Seq}
			out = append(out, fmt.Sprintf("%s %s id=%d %s", c, r.Op, r.ID, st))
		}
	}
	return out
}

// take reads n change events, checking each one's id is its cursor.
func take(t *testing.T, s *sse, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ev, ok := s.next(t, 10*time.Second)
		if !ok {
			t.Fatalf("the stream ended after %v", out)
		}
		c := decode[changeData](t, ev)
		if ev.Name != "change" || ev.ID != c.Cursor || c.Table != table {
			t.Fatalf("event %+v", ev)
		}
		out = append(out, c.String())
	}
	return out
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
	}
}

// TestChangesStream: change rows arrive as versions land, once and in
// order, across a compaction; a client that disconnects and reconnects
// with Last-Event-ID (over a stale after=) misses nothing and gets nothing
// twice, also when it resumes inside a transaction the compaction folded.
func TestChangesStream(t *testing.T) {
	e := newEnv(t, events.Options{PageSize: 2}, nil, nil)
	e.start(t)
	e.sink.Flush(1, map[string][]changefeedtest.Row{table: e1})
	e.sink.Flush(2, map[string][]changefeedtest.Row{table: e2, "shop.items": e1[:1]})

	s, code, body := e.open(t, "/v1/stream/changes?table="+table)
	if s == nil {
		t.Fatalf("changes: %d %s", code, body)
	}
	got := take(t, s, 6)
	same(t, "the first events", got, want(e1, e2[:1]))
	s.close() // the client goes away mid-feed

	// Reconnect: Last-Event-ID wins over after=.
	last := strings.Fields(got[len(got)-1])[0]
	s = e.mustOpen(t, "/v1/stream/changes?table="+table+"&after=0.0.0", "Last-Event-ID", last)
	got = append(got, take(t, s, 2)...)
	same(t, "resumed", got, want(e1, e2))
	// Caught up: the next version's rows, then a compaction and one more.
	e.sink.Flush(3, map[string][]changefeedtest.Row{table: e3[:2]})
	got = append(got, take(t, s, 2)...)
	s.close()
	e.sink.Flush(4, map[string][]changefeedtest.Row{table: e3[2:]})
	e.sink.Compact(table)
	e.sink.Flush(5, map[string][]changefeedtest.Row{table: e4})
	// Resume inside the transaction at 0x400 the compaction folded: the
	// version before it serves it.
	last = strings.Fields(got[len(got)-1])[0]
	s, code, body = e.open(t, "/v1/stream/changes?table="+table, "Last-Event-ID", last)
	if s == nil {
		t.Fatalf("resume after the compaction: %d %s", code, body)
	}
	got = append(got, take(t, s, 3)...)
	same(t, "across the compaction", got, want(e1, e2, e3, e4))
	// Nothing more until a version lands; then exactly its rows.
	select {
	case ev := <-s.events:
		if ev.Comment == "" && ev.Retry == "" {
			t.Fatalf("an extra event: %+v", ev)
		}
	case <-time.After(200 * time.Millisecond):
	}
	e5 := []changefeedtest.Row{ch(cdc.OpUpdate, 0x600, 0, 6, "paid")}
	e.sink.Flush(6, map[string][]changefeedtest.Row{table: e5})
	same(t, "the next version", take(t, s, 1), want(e5))

	// The whole feed from the start, in one stream.
	s2 := e.mustOpen(t, "/v1/stream/changes?table=orders") // a table by its name alone
	same(t, "from the start", take(t, s2, 14), want(e1, e2, e3, e4, e5))
	s.close()
	s2.close()
	// Each stream wrote one audit record, surface sse, with its rows.
	waitFor(t, func() bool { return strings.Count(e.audit.String(), `"surface":"sse"`) == 4 })
	var recs []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(e.audit.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, m)
	}
	rows, resumed := 0.0, 0
	for _, m := range recs {
		if strings.Contains(fmt.Sprint(m["filters"]), "after:") {
			resumed++ // the cursor a stream started after, as the REST feed records it
		}
		if m["endpoint"] != "GET /v1/stream/changes" || fmt.Sprint(m["tables"]) != "["+table+"]" || m["audit"] != true {
			t.Errorf("audit record %v", m)
		}
		rows += m["rows"].(float64)
	}
	// Events the server wrote that the client closed before reading may
	// count too: at least the 6+4+4+14 read.
	if resumed != 2 {
		t.Errorf("%d audit records name the cursor they resumed after, want 2", resumed)
	}
	if rows < 28 {
		t.Errorf("audit rows %v, want at least 28", rows)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for range 500 {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("timed out")
}

// gatedFeed holds every page after the first until the test opens gate.
type gatedFeed struct {
	events.Feed
	gate  chan struct{}
	calls atomic.Int32
}

func (g *gatedFeed) Page(ctx context.Context, table string, after changefeed.Cursor, limit int) (*changefeed.Page, error) {
	if g.calls.Add(1) > 1 {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Feed.Page(ctx, table, after, limit)
}

type problemData struct {
	Status       int      `json:"status"`
	Code         string   `json:"code"`
	Parameter    string   `json:"parameter"`
	Closest      []string `json:"closest"`
	OldestCursor string   `json:"oldest_cursor"`
	Instance     string   `json:"instance"`
	Detail       string   `json:"detail"`
}

// TestChangesGone: a cursor past the retention is a 410 problem with the
// oldest cursor before the stream starts, and an event "error" (code gone)
// that ends the stream when the retention passes it while it is open.
func TestChangesGone(t *testing.T) {
	g := &gatedFeed{gate: make(chan struct{})}
	e := newEnv(t, events.Options{}, func(f events.Feed) events.Feed { g.Feed = f; return g }, nil)
	e.start(t)
	e.sink.Flush(1, map[string][]changefeedtest.Row{table: e1})
	e.sink.Flush(2, map[string][]changefeedtest.Row{table: e2})
	s, code, body := e.open(t, "/v1/stream/changes?table="+table)
	if s == nil {
		t.Fatalf("changes: %d %s", code, body)
	}
	same(t, "before", take(t, s, 8), want(e1, e2))
	// While the stream waits, a compaction folds what follows its cursor
	// and the versions before it leave the retention.
	e.sink.Flush(3, map[string][]changefeedtest.Row{table: e3})
	e.sink.Compact(table)
	e.sink.Flush(4, map[string][]changefeedtest.Row{table: e4})
	e.sink.Expire()
	close(g.gate)
	ev, ok := s.next(t, 10*time.Second)
	if !ok || ev.Name != "error" || ev.ID != "" {
		t.Fatalf("want an error event: %+v", ev)
	}
	var ed struct{ Code, Detail, Oldest_cursor string }
	if err := json.Unmarshal([]byte(ev.Data), &ed); err != nil || ed.Code != "gone" || ed.Oldest_cursor != "0.400.9223372036854775807" {
		t.Fatalf("error event %q: %v", ev.Data, err)
	}
	s.ended(t, 5*time.Second)

	// Before the stream: 410, and the oldest cursor works.
	_, code, body = e.open(t, "/v1/stream/changes?table="+table, "Last-Event-ID", "0.210.0")
	var p problemData
	if err := json.Unmarshal(body, &p); err != nil || code != http.StatusGone || p.Code != "gone" || p.OldestCursor != ed.Oldest_cursor || p.Parameter != "Last-Event-ID" {
		t.Fatalf("gone before the stream: %d %s", code, body)
	}
	s = e.mustOpen(t, "/v1/stream/changes?table="+table, "Last-Event-ID", p.OldestCursor)
	same(t, "from the oldest cursor", take(t, s, 2), want(e4))
}

// TestChangesRefused: an unknown table is a 404 problem naming the closest
// ones; bad cursors and parameters are 400s; none opens a stream.
func TestChangesRefused(t *testing.T) {
	e := newEnv(t, events.Options{}, nil, nil)
	e.start(t)
	e.sink.Flush(1, map[string][]changefeedtest.Row{table: e1})
	for _, c := range []struct {
		path, id string
		status   int
		code     string
		param    string
	}{
		{"/v1/stream/changes?table=public.order", "", 404, "unknown_table", "table"},
		{"/v1/stream/changes?table=../../etc/passwd", "", 404, "unknown_table", "table"},
		{"/v1/stream/changes", "", 400, "missing_parameter", "table"},
		{"/v1/stream/changes?table=" + table + "&after=0.0.1'%20OR%201=1", "", 400, "bad_cursor", "after"},
		{"/v1/stream/changes?table=" + table, "junk", 400, "bad_cursor", "Last-Event-ID"},
		{"/v1/stream/changes?table=" + table, "FFFF.0.1", 400, "bad_cursor", "Last-Event-ID"}, // past the newest version
		// Cursors validated whole: never a wrap to the feed's start.
		{"/v1/stream/changes?table=" + table, "80000000.0.9223372036854775807", 400, "bad_cursor", "Last-Event-ID"}, // LSN 2^63
		{"/v1/stream/changes?table=" + table + "&after=80000000.0.0", "", 400, "bad_cursor", "after"},
		{"/v1/stream/changes?table=" + table, "7FFFFFFF.FFFFFFFF.9223372036854775807", 400, "bad_cursor", "Last-Event-ID"}, // no next position
		{"/v1/stream/changes?table=" + table, "FFFF.0.9223372036854775807", 400, "bad_cursor", "Last-Event-ID"},            // past the newest, end-of-LSN form
		{"/v1/stream/changes?table=" + table, "0.0.9223372036854775808", 400, "bad_cursor", "Last-Event-ID"},
		{"/v1/stream/changes?table=" + table + "&limit=5", "", 400, "unknown_parameter", "limit"},
		{"/v1/stream/changes?table=" + table + "&table=x", "", 400, "repeated_parameter", "table"},
		{"/v1/stream/status?x=1", "", 400, "unknown_parameter", "x"},
		{"/v1/stream/nope", "", 404, "not_found", ""},
	} {
		var hd []string
		if c.id != "" {
			hd = []string{"Last-Event-ID", c.id}
		}
		s, code, body := e.open(t, c.path, hd...)
		if s != nil {
			t.Errorf("%s: a stream opened", c.path)
			continue
		}
		var p problemData
		if err := json.Unmarshal(body, &p); err != nil || code != c.status || p.Status != c.status || p.Code != c.code || p.Parameter != c.param {
			t.Errorf("%s (Last-Event-ID %q): %d %s; want %d %s", c.path, c.id, code, body, c.status, c.code)
		}
		if c.code == "unknown_table" && strings.Contains(c.path, "order") && !slices.Contains(p.Closest, table) {
			t.Errorf("%s: closest %v", c.path, p.Closest)
		}
		if c.code == "bad_cursor" && c.id != "" && !strings.Contains(p.Detail, c.id) {
			t.Errorf("Last-Event-ID %q: the detail does not name the cursor: %s", c.id, p.Detail)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/stream/status", nil)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("POST: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestStreamEnds: a client that goes away ends its stream's handler; the
// server's shutdown ends every stream and the server returns at once.
func TestStreamEnds(t *testing.T) {
	var running atomic.Int32
	ended := make(chan string, 10)
	track := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			running.Add(1)
			defer func() { running.Add(-1); ended <- r.URL.Path }()
			h.ServeHTTP(w, r)
		})
	}
	e := newEnv(t, events.Options{}, nil, track)
	e.sink.Flush(1, map[string][]changefeedtest.Row{table: e1})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- e.srv.Serve(ctx, ln) }()
	e.url = "http://" + ln.Addr().String()

	for _, path := range []string{"/v1/stream/status", "/v1/stream/changes?table=" + table} {
		s, code, body := e.open(t, path)
		if s == nil {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		s.next(t, 5*time.Second)
		s.close()
		select {
		case p := <-ended:
			if !strings.HasPrefix(path, p) {
				t.Fatalf("ended %s", p)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the handler still runs after the client went away", path)
		}
	}
	// Shutdown: streams open, the server's context ends.
	s1 := e.mustOpen(t, "/v1/stream/status")
	s2 := e.mustOpen(t, "/v1/stream/changes?table="+table)
	s1.next(t, 5*time.Second)
	s2.next(t, 5*time.Second)
	started := time.Now()
	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	if d := time.Since(started); d > 2*time.Second {
		t.Errorf("shutdown took %s: the streams held it to its grace", d)
	}
	s1.ended(t, 5*time.Second)
	s2.ended(t, 5*time.Second)
	if n := running.Load(); n != 0 {
		t.Errorf("%d stream handlers still run", n)
	}
}

// TestStreamLimits: streams hold no concurrency slot (two streams and a
// REST request run beside max_concurrent 1), and outlive the server's
// read and write timeouts.
func TestStreamLimits(t *testing.T) {
	e := newEnv(t, events.Options{Heartbeat: 50 * time.Millisecond}, nil, nil)
	// Rebuild the server with a REST handler, behind timeouts shorter than
	// the test's streams.
	var err error
	ev := events.New(events.Options{Reader: e.reader, Feed: e.feed, Poll: 20 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
	rest := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	if e.srv, err = serve.New(serve.Options{Listen: "127.0.0.1:0", Events: ev, REST: rest, MaxConcurrent: 1, QueueWait: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(e.srv.Handler())
	ts.Config.ReadTimeout, ts.Config.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	ts.Start()
	t.Cleanup(ts.Close)
	e.url = ts.URL

	s1, code, body := e.open(t, "/v1/stream/status")
	if s1 == nil {
		t.Fatalf("status: %d %s", code, body)
	}
	s2, code, body := e.open(t, "/v1/stream/changes?table="+table)
	if s2 == nil {
		t.Fatalf("changes: %d %s", code, body)
	}
	s1.next(t, 5*time.Second)
	resp, err := e.client.Get(e.url + "/v1/tables")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("REST beside two streams: %d", resp.StatusCode)
	}
	// Past both timeouts, both streams still deliver.
	time.Sleep(time.Second)
	e.sink.Flush(1, map[string][]changefeedtest.Row{table: e1[:1]})
	if ev, ok := s1.next(t, 5*time.Second); !ok || ev.ID != "2" {
		t.Fatalf("status after the timeouts: %+v %v", ev, ok)
	}
	same(t, "changes after the timeouts", take(t, s2, 1), want(e1[:1]))
}
