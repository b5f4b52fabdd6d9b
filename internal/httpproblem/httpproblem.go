// Package httpproblem is the one RFC 9457 problem document every HTTP
// surface of the read path answers errors with (REST, event streams, the
// server's own refusals): a stable code, and the members some codes carry.
package httpproblem

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Problem is an RFC 9457 problem document (application/problem+json).
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance,omitempty"`
	// Code is the stable name of the problem (docs/api.md lists them).
	Code string `json:"code"`
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
	// RetryAfter is in seconds, as the header says.
	RetryAfter int `json:"retry_after,omitempty"`
}

// Error is an error answered as a problem of the handler's choosing; Err
// is its cause, if any, for the log and errors.Is.
type Error struct {
	P   Problem
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.P.Detail + ": " + e.Err.Error()
	}
	return e.P.Detail
}

func (e *Error) Unwrap() error { return e.Err }

// Write answers r with p: the type and title filled in from the code and
// status when empty, the instance r's path, Retry-After when p says.
func Write(w http.ResponseWriter, r *http.Request, p Problem) {
	if p.Type == "" {
		p.Type = "urn:pg-cdc:problem:" + p.Code
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if r != nil {
		p.Instance = r.URL.Path
	}
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
}
