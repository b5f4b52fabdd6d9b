package events

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

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
	case errors.Is(err, access.ErrBusy):
		return problem{Status: http.StatusServiceUnavailable, Code: "busy", Detail: err.Error()}
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
