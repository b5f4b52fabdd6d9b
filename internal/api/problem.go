package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pg-cdc/pg-cdc/internal/httpproblem"
	"net/http"

	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// problem and apiError are the read path's one problem document
// (internal/httpproblem).
type (
	problem  = httpproblem.Problem
	apiError = httpproblem.Error
)

// bad is a 400 for a parameter.
func bad(code, param, format string, args ...any) error {
	return &apiError{P: problem{Status: http.StatusBadRequest, Code: code, Parameter: param, Detail: fmt.Sprintf(format, args...)}}
}

// classify maps an error to its problem: the handler's own, or the read
// path's classes.
func (a *api) classify(r *http.Request, err error) problem {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.P
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

func writeProblem(w http.ResponseWriter, r *http.Request, p problem) { httpproblem.Write(w, r, p) }

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
