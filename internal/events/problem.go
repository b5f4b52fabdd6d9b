package events

import (
	"context"
	"errors"
	"github.com/pg-cdc/pg-cdc/internal/httpproblem"
	"net/http"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// problem and apiError are the read path's one problem document
// (internal/httpproblem), as the REST API writes them.
type (
	problem  = httpproblem.Problem
	apiError = httpproblem.Error
)

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
		return ae.P
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

func writeProblem(w http.ResponseWriter, r *http.Request, p problem) { httpproblem.Write(w, r, p) }
