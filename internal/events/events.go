// Package events serves the read path's server-sent events under
// /v1/stream/ (design.md §11, docs/api.md "Event streams"):
//
//   - GET /v1/stream/status: an event "status" at once, then whenever a new
//     manifest version is committed or is_stale flips; id is the version.
//   - GET /v1/stream/changes?table=schema.table[&after=cursor]: one event
//     "change" per change row, in (__lsn, __seq) order, each committed
//     change once, as versions land; id is the row's change-feed cursor, so
//     a client that reconnects with Last-Event-ID (which takes precedence
//     over after=) resumes after the last row it received. A cursor past
//     the retention is a 410 problem before the stream starts, or an event
//     "error" with code gone and the oldest cursor, after which the stream
//     ends.
//
// Both send a comment (": keepalive") when they have been quiet for a
// while, so proxies keep the connection open. They follow the manifest by
// polling the newest version through the Reader port (once per Poll,
// shared by every stream of the handler) and read change rows through the
// change feed (internal/changefeed); the package imports no DuckDB. A
// stream ends when its request's context does: the client went away, or
// the server shut down. The server (internal/serve) authenticates,
// rate-limits and writes the audit record each stream fills in
// (access.RecordFrom) when it ends; it exempts streams from its
// concurrency slots and its write timeout.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// Reader is the read path the streams need (internal/query.Reader is
// one): the newest version, resolved.
type Reader interface {
	// Resolve("") is the newest manifest version.
	Resolve(ctx context.Context, point string) (readpath.At, error)
}

// Feed is the change feed the changes stream reads (*changefeed.Feed is
// one).
type Feed interface {
	Page(ctx context.Context, table string, after changefeed.Cursor, limit int) (*changefeed.Page, error)
}

// Options configure the streams.
type Options struct {
	Reader Reader
	// Feed serves /v1/stream/changes (nil: it answers 501).
	Feed Feed
	// StaleAfter is the freshness objective: a status says is_stale when
	// fresh_as_of is older than this (0: never stale).
	StaleAfter time.Duration
	// Poll is how often the newest version is read (0: DefaultPoll).
	Poll time.Duration
	// Heartbeat is how long a stream stays quiet before it sends a
	// keepalive comment (0: DefaultHeartbeat).
	Heartbeat time.Duration
	// PageSize bounds the change rows read at once (0: DefaultPageSize).
	PageSize int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger
}

// Defaults of Options.
const (
	DefaultPoll      = time.Second
	DefaultHeartbeat = 15 * time.Second
	DefaultPageSize  = 500
	// Retry is the reconnection delay the streams advise (retry: field).
	Retry = 2 * time.Second
)

// Patterns are the streams' routes.
var Patterns = []string{"GET /v1/stream/status", "GET /v1/stream/changes"}

type handler struct {
	o   Options
	mux *http.ServeMux

	mu      sync.Mutex
	newest  readpath.At
	fetched time.Time
}

// New returns the streams' handler, to be mounted at /v1/stream/.
func New(o Options) http.Handler {
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	h := &handler{o: o, mux: http.NewServeMux()}
	h.mux.HandleFunc(Patterns[0], h.status)
	h.mux.HandleFunc(Patterns[1], h.changes)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/stream/status" || r.URL.Path == "/v1/stream/changes" {
			w.Header().Set("Allow", "GET, HEAD")
			writeProblem(w, r, problem{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
				Detail: "method " + r.Method + " is not allowed here; use GET"})
			return
		}
		writeProblem(w, r, problem{Status: http.StatusNotFound, Code: "not_found",
			Detail: "no stream at " + strconv.Quote(trimmed(r.URL.Path)) + "; the streams are /v1/stream/status and /v1/stream/changes"})
	})
	return h
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// latest is the newest version, read at most once per half Poll for all
// the handler's streams.
func (h *handler) latest(ctx context.Context) (readpath.At, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.newest.Manifest != nil && time.Since(h.fetched) < h.o.Poll/2 {
		return h.newest, nil
	}
	at, err := h.o.Reader.Resolve(ctx, "")
	if err != nil {
		return readpath.At{}, err
	}
	if h.newest.Manifest == nil || at.Version() >= h.newest.Version() {
		h.newest, h.fetched = at, time.Now()
	}
	return h.newest, nil
}

// stream is one open event stream.
type stream struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wrote time.Time // the last write, for heartbeats
}

// open starts the event stream: after it, errors are events.
func open(w http.ResponseWriter) (*stream, error) {
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: http.NewResponseController(w)}
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", Retry.Milliseconds()); err != nil {
		return nil, err
	}
	return s, s.flush()
}

// event writes one event (not flushed). data must be one line: JSON is.
func (s *stream) event(name, id string, data []byte) error {
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + name + "\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	_, err := s.w.Write([]byte(b.String()))
	return err
}

func (s *stream) flush() error {
	s.wrote = time.Now()
	return s.rc.Flush()
}

// keepalive sends the heartbeat comment if the stream was quiet for d.
func (s *stream) keepalive(d time.Duration) error {
	if time.Since(s.wrote) < d {
		return nil
	}
	if _, err := s.w.Write([]byte(": keepalive\n\n")); err != nil {
		return err
	}
	return s.flush()
}

// errorEvent is the data of an event "error".
type errorEvent struct {
	Code         string `json:"code"`
	Detail       string `json:"detail"`
	OldestCursor string `json:"oldest_cursor,omitempty"`
}

func marshal(v any) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"code":"internal","detail":"encoding an event failed"}`)
	}
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

// status is the data of an event "status".
type status struct {
	Version     uint64     `json:"version"`
	Epoch       uint64     `json:"epoch"`
	EndLSN      cdc.LSN    `json:"end_lsn"`
	FreshAsOf   *time.Time `json:"fresh_as_of"`
	IsStale     bool       `json:"is_stale"`
	CommittedAt time.Time  `json:"committed_at"`
}

func (h *handler) statusOf(m *manifest.Manifest) status {
	s := status{Version: m.Version, Epoch: m.Epoch, EndLSN: m.EndLSN, CommittedAt: m.CommittedAt.UTC()}
	if t := m.Freshness(); !t.IsZero() {
		t = t.UTC()
		s.FreshAsOf = &t
		s.IsStale = h.o.StaleAfter > 0 && h.o.Now().Sub(t) > h.o.StaleAfter
	} else {
		s.IsStale = h.o.StaleAfter > 0 // nothing is known to be fresh yet
	}
	return s
}

func (h *handler) status(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rec := access.RecordFrom(ctx)
	rec.Surface, rec.Endpoint = access.SurfaceSSE, Patterns[0]
	if _, err := params(r, nil); err != nil {
		h.fail(w, r, err)
		return
	}
	at, err := h.latest(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	s, err := open(w)
	if err != nil {
		return
	}
	last := h.statusOf(at.Manifest)
	send := func(st status) error {
		rec.Rows++
		if err := s.event("status", strconv.FormatUint(st.Version, 10), marshal(st)); err != nil {
			return err
		}
		return s.flush()
	}
	if send(last) != nil {
		return
	}
	poll := time.NewTicker(h.o.Poll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
		at, err := h.latest(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			h.o.Log.Warn("status stream: reading the newest version", "err", err)
		} else if st := h.statusOf(at.Manifest); st.Version != last.Version || st.IsStale != last.IsStale {
			last = st
			if send(st) != nil {
				return
			}
			continue
		}
		if s.keepalive(h.o.Heartbeat) != nil {
			return
		}
	}
}

// change is the data of an event "change": a row as GET
// /v1/tables/{table}/changes gives it, with its table and the newest
// version when it was read.
type change struct {
	Table      string         `json:"table"`
	Cursor     string         `json:"cursor"`
	Op         string         `json:"op"`
	LSN        cdc.LSN        `json:"lsn"`
	Seq        int64          `json:"seq"`
	XID        int64          `json:"xid"`
	CommitTime *time.Time     `json:"commit_time"`
	Unchanged  []string       `json:"unchanged,omitempty"`
	Row        map[string]any `json:"row"`
	Version    uint64         `json:"version"`
}

func (h *handler) changes(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rec := access.RecordFrom(ctx)
	rec.Surface, rec.Endpoint = access.SurfaceSSE, Patterns[1]
	ps, err := params(r, []string{"table", "after"})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	text, param := ps["after"], "after"
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		text, param = id, "Last-Event-ID"
	}
	c, err := changefeed.ParseCursor(text)
	if err != nil {
		h.fail(w, r, &apiError{P: problem{Status: http.StatusBadRequest, Code: "bad_cursor", Parameter: param, Detail: err.Error()}})
		return
	}
	if text != "" {
		rec.Filters = append(rec.Filters, "after:"+text) // a cursor, not an as-of point (as the REST feed records it)
	}
	if ps["table"] == "" {
		h.fail(w, r, &apiError{P: problem{Status: http.StatusBadRequest, Code: "missing_parameter", Parameter: "table",
			Detail: "parameter table is required: table=schema.table (GET /v1/tables lists them)"}})
		return
	}
	if h.o.Feed == nil {
		h.fail(w, r, &apiError{P: problem{Status: http.StatusNotImplemented, Code: "unavailable", Detail: "this server has no change feed"}})
		return
	}
	newest, err := h.latest(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	key, err := lookup(newest.Manifest, ps["table"])
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rec.Tables = []string{key}
	p, err := h.page(ctx, key, c)
	if err != nil {
		if errors.Is(err, changefeed.ErrUnknownTable) {
			_, err = lookup(&manifest.Manifest{}, key)
		}
		var gone *changefeed.GoneError
		switch {
		case errors.As(err, &gone):
			err = &apiError{P: problem{Status: http.StatusGone, Code: "gone", Parameter: param, Detail: err.Error(), OldestCursor: gone.Oldest.String()}, Err: err}
		case errors.Is(err, changefeed.ErrCursor):
			err = &apiError{P: problem{Status: http.StatusBadRequest, Code: "bad_cursor", Parameter: param, Detail: err.Error()}, Err: err}
		}
		h.fail(w, r, err)
		return
	}
	s, err := open(w)
	if err != nil {
		return
	}
	poll := time.NewTicker(h.o.Poll)
	defer poll.Stop()
	for {
		for _, ch := range p.Changes {
			if s.event("change", ch.Cursor.String(), marshal(changeOf(key, p, ch))) != nil {
				return
			}
			rec.Rows++
		}
		if len(p.Changes) > 0 && s.flush() != nil {
			return
		}
		c = p.Next
		// Caught up: wait for a version newer than the one the page saw.
		for !p.More {
			select {
			case <-ctx.Done():
				return
			case <-poll.C:
			}
			at, err := h.latest(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				h.o.Log.Warn("change stream: reading the newest version", "table", key, "err", err)
			} else if at.Version() > p.Version {
				break
			}
			if s.keepalive(h.o.Heartbeat) != nil {
				return
			}
		}
		if p, err = h.page(ctx, key, c); err != nil {
			if ctx.Err() != nil {
				return
			}
			h.streamError(s, r, key, c, err)
			return
		}
	}
}

// page reads one page of the change feed inside a slot of the server's
// concurrency cap (access.Gate): a stream waits without one, but its reads
// are queries like any request's.
func (h *handler) page(ctx context.Context, key string, c changefeed.Cursor) (*changefeed.Page, error) {
	release, err := access.Enter(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return h.o.Feed.Page(ctx, key, c, h.o.PageSize)
}

// streamError ends a change stream with an event "error".
func (h *handler) streamError(s *stream, r *http.Request, table string, c changefeed.Cursor, err error) {
	rec := access.RecordFrom(r.Context())
	rec.Error = err.Error()
	ev := errorEvent{Code: "unavailable", Detail: "reading the change feed failed; reconnect with Last-Event-ID to resume"}
	var gone *changefeed.GoneError
	switch {
	case errors.As(err, &gone):
		ev = errorEvent{Code: "gone", Detail: err.Error(), OldestCursor: gone.Oldest.String()}
	case errors.Is(err, changefeed.ErrUnknownTable):
		ev = errorEvent{Code: "unknown_table", Detail: "table " + strconv.Quote(table) + " is no longer captured"}
	case errors.Is(err, access.ErrBusy):
		ev = errorEvent{Code: "busy", Detail: "the server is busy; reconnect with Last-Event-ID to resume"}
	default:
		h.o.Log.Warn("change stream ended by an error", "table", table, "cursor", c.String(), "err", err)
	}
	if s.event("error", "", marshal(ev)) == nil {
		_ = s.flush()
	}
}

// changeOf is a change row as its event's data.
func changeOf(table string, p *changefeed.Page, ch changefeed.Change) change {
	o := change{Table: table, Cursor: ch.Cursor.String(), Op: ch.Op, LSN: ch.Cursor.LSN, Seq: ch.Cursor.Seq, XID: ch.XID,
		Unchanged: ch.Unchanged, Row: make(map[string]any, len(p.Columns)), Version: p.Version}
	if !ch.CommitTime.IsZero() {
		t := ch.CommitTime.UTC()
		o.CommitTime = &t
	}
	for i, col := range p.Columns {
		if i < len(ch.Values) {
			o.Row[col.Name] = readpath.WireValue(ch.Values[i], col.Type)
		}
	}
	return o
}

// lookup finds a table by its key (schema.table), or by its name when one
// schema has it, as the REST API does.
func lookup(m *manifest.Manifest, name string) (string, error) {
	if m.Tables[name] != nil {
		return name, nil
	}
	var found []string
	for key, mt := range m.Tables {
		if mt.Name == name {
			found = append(found, key)
		}
	}
	slices.Sort(found)
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return "", &apiError{P: problem{Status: http.StatusNotFound, Code: "ambiguous_table", Parameter: "table", Closest: found,
			Detail: "table " + strconv.Quote(trimmed(name)) + " is in several schemas; name it as schema.table: " + strings.Join(found, ", ")}}
	}
	names := make([]string, 0, len(m.Tables))
	for key := range m.Tables {
		names = append(names, key)
	}
	slices.Sort(names)
	return "", &apiError{P: problem{Status: http.StatusNotFound, Code: "unknown_table", Parameter: "table", Closest: readpath.Closest(name, names),
		Detail: "no captured table " + strconv.Quote(trimmed(name)) + " (GET /v1/tables lists them)"}}
}

// params are the query parameters, each at most once; any other is a 400.
func params(r *http.Request, known []string) (map[string]string, error) {
	out := map[string]string{}
	for name, vals := range r.URL.Query() {
		if !slices.Contains(known, name) {
			takes := "no parameter"
			if len(known) > 0 {
				takes = strings.Join(known, ", ")
			}
			return nil, &apiError{P: problem{Status: http.StatusBadRequest, Code: "unknown_parameter", Parameter: trimmed(name),
				Detail: fmt.Sprintf("unknown parameter %q; this stream takes %s", trimmed(name), takes)}}
		}
		if len(vals) > 1 {
			return nil, &apiError{P: problem{Status: http.StatusBadRequest, Code: "repeated_parameter", Parameter: name,
				Detail: fmt.Sprintf("parameter %s is given %d times; give it once", name, len(vals))}}
		}
		out[name] = vals[0]
	}
	return out, nil
}

// trimmed is s cut to a length fit for a message.
func trimmed(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
