// Package api is the REST API of the read path under /v1 (design.md §11,
// docs/api.md): tables, rows (current state or as of a point, projected,
// filtered, paginated by key), the change feed, SQL queries, the manifest,
// refs, diffs, snapshot file locations and status, with RFC 9457 problem
// responses and an OpenAPI 3.1 document that matches the routes. It reaches
// the engine through the Reader port and imports no DuckDB; the server
// (internal/serve) mounts it, authenticates, limits and writes the audit
// record each handler fills in (access.RecordFrom).
package api

import (
	"context"
	_ "embed"
	"log/slog"
	"net/http"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

// Reader is the read path the API needs (internal/query.Reader is one).
type Reader interface {
	Resolve(ctx context.Context, point string) (readpath.At, error)
	Tables(ctx context.Context, at readpath.At) ([]readpath.Table, error)
	Query(ctx context.Context, at readpath.At, sql string, args ...any) (*readpath.Result, error)
	Refs(ctx context.Context, tags int) (*readpath.RefList, error)
	Diff(ctx context.Context, from, to readpath.At, only []string) (map[string]refs.Counts, error)
}

// Options configure the API.
type Options struct {
	Reader Reader
	// Feed serves /v1/tables/{table}/changes.
	Feed *changefeed.Feed
	Log  *slog.Logger
	// MaxRows bounds limit= (DefaultMaxRows when 0).
	MaxRows int
	// Version is the server's version, shown by /v1/status.
	Version string
	// StaleAfter is the freshness objective: /v1/status says is_stale when
	// the sink's fresh_as_of is older than this (0: never stale).
	StaleAfter time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Limits of the API.
const (
	DefaultMaxRows = 10_000
	DefaultLimit   = 100
	// MaxBody bounds a request body (the server caps it too).
	MaxBody = 1 << 20
	// MaxFilters bounds filter= parameters, MaxInValues the values of one
	// in filter.
	MaxFilters  = 32
	MaxInValues = 1000
)

// route is one endpoint: its pattern (method and path, as http.ServeMux
// takes it) and handler.
type route struct {
	pattern string
	handle  func(*api, http.ResponseWriter, *http.Request) error
}

// routes are every endpoint; the OpenAPI document must name exactly these
// (TestOpenAPIMatchesRoutes).
var routes = []route{
	{"GET /v1/tables", (*api).tables},
	{"GET /v1/tables/{table}", (*api).table},
	{"GET /v1/tables/{table}/rows", (*api).rows},
	{"GET /v1/tables/{table}/changes", (*api).changes},
	{"POST /v1/query", (*api).query},
	{"GET /v1/manifest", (*api).manifest},
	{"GET /v1/refs", (*api).refs},
	{"GET /v1/diff", (*api).diff},
	{"GET /v1/snapshot", (*api).snapshot},
	{"GET /v1/status", (*api).status},
	{"GET /v1/openapi.json", (*api).openapi},
}

// Patterns returns the route patterns New registers ("GET /v1/tables", …).
func Patterns() []string {
	out := make([]string, len(routes))
	for i, rt := range routes {
		out[i] = rt.pattern
	}
	return out
}

type api struct {
	o Options
}

// New returns the handler of /v1. Every response is JSON; every error is an
// application/problem+json body with a stable code.
func New(o Options) http.Handler {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultMaxRows
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &api{o: o}
	mux := http.NewServeMux()
	paths := http.NewServeMux() // the same paths for any method: 405 or 404
	for _, rt := range routes {
		mux.Handle(rt.pattern, a.wrap(rt.pattern, rt.handle))
		_, path, _ := cutMethod(rt.pattern)
		paths.Handle(path, http.NotFoundHandler())
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		rec := access.RecordFrom(r.Context())
		rec.Surface = access.SurfaceREST
		if _, p := paths.Handler(r); p != "" {
			w.Header().Set("Allow", allowed(p))
			writeProblem(w, r, problem{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
				Detail: r.Method + " is not served at " + r.URL.Path + "; allowed: " + allowed(p)})
			return
		}
		writeProblem(w, r, problem{Status: http.StatusNotFound, Code: "not_found", Detail: "no endpoint at " + r.URL.Path + " (GET /v1/openapi.json lists them)"})
	})
	return mux
}

func cutMethod(pattern string) (method, path string, ok bool) {
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == ' ' {
			return pattern[:i], pattern[i+1:], true
		}
	}
	return "", pattern, false
}

// allowed lists the methods routes serve at a path pattern.
func allowed(path string) string {
	out := ""
	for _, rt := range routes {
		if m, p, _ := cutMethod(rt.pattern); p == path {
			if out != "" {
				out += ", "
			}
			out += m
		}
	}
	return out
}

// wrap runs a handler with its audit record started, and answers its
// error as a problem.
func (a *api) wrap(pattern string, h func(*api, http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := access.RecordFrom(r.Context())
		rec.Surface, rec.Endpoint = access.SurfaceREST, pattern
		if err := h(a, w, r); err != nil {
			p := a.classify(r, err)
			if p.Status >= 500 {
				a.o.Log.Warn("rest request failed", slog.String("endpoint", pattern), slog.Any("err", err))
			}
			rec.Error, rec.Rule = err.Error(), p.Rule
			writeProblem(w, r, p)
		}
	})
}

//go:embed openapi.json
var openapiDoc []byte

func (a *api) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openapiDoc)
	return err
}
