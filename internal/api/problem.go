package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// problem is an RFC 9457 problem document with a stable code, and the
// extension members some codes carry.
type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance,omitempty"`
	Code     string `json:"code"`
	// Parameter names the query parameter or body field at fault.
	Parameter string `json:"parameter,omitempty"`
	// Did you mean: the closest table or column names.
	Closest []string `json:"closest,omitempty"`
	// Rule is the read path's rule a refused query broke.
	Rule string `json:"rule,omitempty"`
	// OldestCursor is the oldest change-feed cursor still served (gone).
	OldestCursor string `json:"oldest_cursor,omitempty"`
	// Oldest and Newest are the history's window (outside_retention).
	Oldest *manifest.Header `json:"oldest,omitempty"`
	Newest *manifest.Header `json:"newest,omitempty"`
	// RetryAfter is in seconds, as the header says (collected).
	RetryAfter int `json:"retry_after,omitempty"`
}

// apiError is an error a handler answers as a problem of its choosing.
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

// bad is a 400 for a parameter.
func bad(code, param, format string, args ...any) error {
	return &apiError{p: problem{Status: http.StatusBadRequest, Code: code, Parameter: param, Detail: fmt.Sprintf(format, args...)}}
}

// classify maps an error to its problem: the handler's own, or the read
// path's classes.
func (a *api) classify(r *http.Request, err error) problem {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.p
	}
	var gone *changefeed.GoneError
	var outside *manifest.OutsideRetentionError
	var refused *readpath.RefusedError
	switch {
	case errors.As(err, &gone):
		return problem{Status: http.StatusGone, Code: "gone", Parameter: "after", Detail: err.Error(), OldestCursor: gone.Oldest.String()}
	case errors.Is(err, changefeed.ErrCursor):
		return problem{Status: http.StatusBadRequest, Code: "bad_cursor", Parameter: "after", Detail: err.Error()}
	case errors.As(err, &outside):
		status := http.StatusGone
		if outside.After {
			status = http.StatusBadRequest
		}
		return problem{Status: status, Code: "outside_retention", Parameter: "as_of", Detail: err.Error(), Oldest: &outside.Oldest, Newest: &outside.Newest}
	case errors.Is(err, manifest.ErrOutsideRetention), errors.Is(err, manifest.ErrNoVersion):
		return problem{Status: http.StatusGone, Code: "outside_retention", Parameter: "as_of", Detail: err.Error()}
	case errors.Is(err, readpath.ErrPoint):
		return problem{Status: http.StatusBadRequest, Code: "bad_point", Parameter: "as_of", Detail: err.Error()}
	case errors.As(err, &refused):
		return problem{Status: http.StatusBadRequest, Code: "query_refused", Parameter: "sql", Rule: refused.Rule, Detail: err.Error()}
	case errors.Is(err, readpath.ErrRefused):
		return problem{Status: http.StatusBadRequest, Code: "query_refused", Parameter: "sql", Detail: err.Error()}
	case errors.Is(err, readpath.ErrInvalid):
		return problem{Status: http.StatusBadRequest, Code: "invalid_query", Detail: err.Error()}
	case errors.Is(err, readpath.ErrLimit):
		return problem{Status: http.StatusUnprocessableEntity, Code: "limit", Detail: err.Error()}
	case errors.Is(err, readpath.ErrCollected):
		return problem{Status: http.StatusServiceUnavailable, Code: "collected", RetryAfter: 1,
			Detail: "files of the version were collected while the request ran (it left history.retention); ask again"}
	case errors.Is(err, readpath.ErrClosed), errors.Is(err, readpath.ErrNoEngine):
		return problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: err.Error()}
	case errors.Is(err, context.DeadlineExceeded) || r.Context().Err() != nil:
		return problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the request was cancelled or timed out"}
	}
	// Not the caller's: its text may name paths of the data, so it goes to
	// the log, not the response.
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
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(p.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
}

// writeJSON answers 200 with v.
func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}
