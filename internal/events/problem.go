package events

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// problem is an RFC 9457 problem document, as the REST API writes them
// (internal/api): a stable code and the members some codes carry.
type problem struct {
	Type         string   `json:"type"`
	Title        string   `json:"title"`
	Status       int      `json:"status"`
	Detail       string   `json:"detail"`
	Instance     string   `json:"instance,omitempty"`
	Code         string   `json:"code"`
	Parameter    string   `json:"parameter,omitempty"`
	Closest      []string `json:"closest,omitempty"`
	OldestCursor string   `json:"oldest_cursor,omitempty"`
}

// apiError is an error answered as a problem of the handler's choosing.
type apiError struct {
	p   problem
	err error
}

func (e *apiError) Error() string {
	if e.err != nil {
		return e.p.Detail + ": " + e.err.Error()
	}
	return e.p.Detail
}
func (e *apiError) Unwrap() error { return e.err }

// fail answers a stream that cannot start with its problem, and records
// the error for the audit record.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	p := classify(r, err)
	if p.Status >= 500 {
		h.o.Log.Warn("event stream failed", "path", r.URL.Path, "err", err)
	}
	access.RecordFrom(r.Context()).Error = err.Error()
	writeProblem(w, r, p)
}

func classify(r *http.Request, err error) problem {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.p
	case errors.Is(err, changefeed.ErrCursor):
		return problem{Status: http.StatusBadRequest, Code: "bad_cursor", Parameter: "after", Detail: err.Error()}
	case errors.Is(err, readpath.ErrCollected):
		return problem{Status: http.StatusServiceUnavailable, Code: "collected", Detail: "files of the version were collected while the request ran; ask again"}
	case errors.Is(err, readpath.ErrClosed), errors.Is(err, readpath.ErrNoEngine):
		return problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: err.Error()}
	case errors.Is(err, context.DeadlineExceeded) || r.Context().Err() != nil:
		return problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the request was cancelled or timed out"}
	}
	// Not the caller's: its text may name paths of the data.
	return problem{Status: http.StatusInternalServerError, Code: "internal", Detail: "internal error; the server's log has the cause"}
}

func writeProblem(w http.ResponseWriter, r *http.Request, p problem) {
	if p.Type == "" {
		p.Type = "urn:pg-cdc:problem:" + p.Code
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	p.Instance = r.URL.Path
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
}

// jsonValue is a value as the REST API's JSON holds it (docs/api.md):
// integers as numbers, decimals and UUIDs as strings, timestamps in RFC
// 3339 (UTC), dates as YYYY-MM-DD, times as HH:MM:SS[.ffffff], bytes in
// base64, lists as arrays and structs as objects; the rest as the read
// path's JSON form. (The same rules as internal/api's.)
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

// closest returns up to three of names nearest to name by edit distance
// (case-insensitive), nearest first, within a third of its length.
func closest(name string, names []string) []string {
	type cand struct {
		n string
		d int
	}
	var cs []cand
	limit := max(2, len(name)/3)
	for _, n := range names {
		if d := distance(strings.ToLower(name), strings.ToLower(n)); d <= limit {
			cs = append(cs, cand{n, d})
		}
	}
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && (cs[j].d < cs[j-1].d || cs[j].d == cs[j-1].d && cs[j].n < cs[j-1].n); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
	var out []string
	for i := 0; i < len(cs) && i < 3; i++ {
		out = append(out, cs[i].n)
	}
	return out
}

func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 256 || len(rb) > 256 {
		return 1 << 30
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
