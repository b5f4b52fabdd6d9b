// Package access is what every request of the read path's servers carries
// (design.md §11): who asks (the authenticated principal, set by the
// server's authentication before any handler runs) and the one audit record
// the request writes when it ends — filled in by the handler or tool that
// knows the tables, columns, filters and rows, written by the server (REST,
// server-sent events) or by the MCP server per tool call. It imports only
// the standard library, so every transport can use it.
package access

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"
	"unicode/utf8"
)

// Principal is an authenticated caller: the name its token was configured
// under. The zero Principal is the anonymous caller of a loopback server
// that runs without tokens.
type Principal struct {
	Name string
}

// Anonymous names the caller of a server without tokens in audit records.
const Anonymous = "anonymous"

// String is the principal's name, or Anonymous.
func (p Principal) String() string {
	if p.Name == "" {
		return Anonymous
	}
	return p.Name
}

// Surfaces of a Record.
const (
	SurfaceREST = "rest"
	SurfaceSSE  = "sse"
	SurfaceMCP  = "mcp"
)

// SurfaceMetrics labels the refusals of /metrics, which writes no
// records.
const SurfaceMetrics = "metrics"

// RefusalSurfaces and RefusalCodes are the one list of the labels a
// server's refusals are counted by (serve counts them; internal/metrics
// makes their series at zero): the surfaces, and the statuses that turn a
// request away — 401 (no valid token), 403 (MCP's Host and Origin
// checks), 413 (body too large), 429 (a rate limit), 503 (busy). Arrays,
// so that a user copies them.
var (
	RefusalSurfaces = [...]string{SurfaceREST, SurfaceSSE, SurfaceMCP, SurfaceMetrics}
	RefusalCodes    = [...]int{401, 403, 413, 429, 503}
)

// Record is one request's audit record: one per REST request, event stream
// and MCP tool call.
type Record struct {
	Principal Principal
	Surface   string
	// Endpoint is the route pattern ("GET /v1/tables/{table}/rows") or the
	// MCP tool's name.
	Endpoint  string
	Tables    []string
	Columns   []string
	Filters   []string
	Point     string // the as-of point asked for, if any
	Rows      int64
	Truncated bool
	Status    int // the HTTP status (0 for an MCP tool call)
	Error     string
	Started   time.Time
	Duration  time.Duration
	// Queued is the part of Duration spent waiting for a concurrency slot
	// (serve.max_concurrent): what an operator sizing the cap looks at.
	Queued time.Duration

	// SQL is a query's text as the caller sent it (POST /v1/query, the
	// MCP query tool); Params counts its bound parameters, whose values
	// are never recorded (they are the caller's data, not the question).
	SQL    string
	Params int
	// HashSQL records SQL as its SHA-256 and length only
	// (serve.audit_sql: hash), for SQL whose literals must stay out of the
	// log. The server that writes the record sets it, not the handler.
	HashSQL bool
	// Rule is the rule a refused query broke (readpath.RefusedError.Rule).
	Rule string
}

// MaxAuditSQL is the most of a query's text one audit line holds; the
// hash and length are always of the whole text. A request body may hold
// 1 MiB of SQL, and one line of that size per request would let a caller
// flood the log.
const MaxAuditSQL = 16 << 10

// Outcome is the record's result in one word: "refused" (a query rule),
// "error" (any other failure: a status of 400 or more, or an error), or
// "ok".
func (r *Record) Outcome() string {
	switch {
	case r.Rule != "":
		return "refused"
	case r.Error != "" || r.Status >= 400:
		return "error"
	}
	return "ok"
}

// Log writes r as one audit line (audit=true, like the operator actions'
// audit stream), at Info, or Warn when the server failed it (5xx): a
// caller's mistake (4xx, a tool error) is the caller's, recorded with its
// error at Info.
func (r *Record) Log(log *slog.Logger) {
	level := slog.LevelInfo
	if r.Status >= 500 {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.Bool("audit", true), slog.String("action", "read"),
		slog.String("principal", r.Principal.String()), slog.String("surface", r.Surface),
		slog.String("endpoint", r.Endpoint),
	}
	if len(r.Tables) > 0 {
		attrs = append(attrs, slog.Any("tables", r.Tables))
	}
	if len(r.Columns) > 0 {
		attrs = append(attrs, slog.Any("columns", r.Columns))
	}
	if len(r.Filters) > 0 {
		attrs = append(attrs, slog.Any("filters", r.Filters))
	}
	if r.Point != "" {
		attrs = append(attrs, slog.String("as_of", r.Point))
	}
	if r.SQL != "" {
		attrs = append(attrs, r.sqlAttrs()...)
	}
	attrs = append(attrs, slog.Int64("rows", r.Rows), slog.Bool("truncated", r.Truncated))
	if r.Status != 0 {
		attrs = append(attrs, slog.Int("status", r.Status))
	}
	attrs = append(attrs, slog.Int64("duration_ms", r.Duration.Milliseconds()))
	if r.Queued > 0 {
		attrs = append(attrs, slog.Int64("queued_ms", r.Queued.Milliseconds()))
	}
	attrs = append(attrs, slog.String("outcome", r.Outcome()))
	if r.Rule != "" {
		attrs = append(attrs, slog.String("rule", r.Rule))
	}
	if r.Error != "" {
		attrs = append(attrs, slog.String("err", r.Error))
	}
	log.LogAttrs(context.Background(), level, "read request", attrs...)
}

// sqlAttrs are the query's audit keys: its SHA-256 (hex, of the text as
// sent) and length in bytes always, so the same query is found under
// either setting; the text itself unless HashSQL, cut at MaxAuditSQL; the
// number of parameters.
func (r *Record) sqlAttrs() []slog.Attr {
	sum := sha256.Sum256([]byte(r.SQL))
	attrs := []slog.Attr{slog.String("sql_sha256", hex.EncodeToString(sum[:])), slog.Int("sql_bytes", len(r.SQL))}
	if !r.HashSQL {
		text := r.SQL
		if len(text) > MaxAuditSQL {
			cut := MaxAuditSQL
			for cut > 0 && !utf8.RuneStart(text[cut]) { // never half a character
				cut--
			}
			text = text[:cut]
			attrs = append(attrs, slog.Bool("sql_truncated", true))
		}
		attrs = append(attrs, slog.String("sql", text))
	}
	if r.Params > 0 {
		attrs = append(attrs, slog.Int("sql_params", r.Params))
	}
	return attrs
}

type principalKey struct{}
type recordKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries (the zero Principal when
// none: a server without tokens, or stdio).
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// WithRecord returns ctx carrying r, for the handler to fill in.
func WithRecord(ctx context.Context, r *Record) context.Context {
	return context.WithValue(ctx, recordKey{}, r)
}

// RecordFrom returns the record ctx carries. Without one it returns a
// fresh record nobody writes, so a handler can always fill it in.
func RecordFrom(ctx context.Context) *Record {
	if r, ok := ctx.Value(recordKey{}).(*Record); ok {
		return r
	}
	return &Record{}
}

// Gate admits one unit of work at a time per slot it has: the server's
// concurrency cap (serve.max_concurrent), for the work a long request does
// in steps, such as an event stream's reads. release gives the slot back;
// err says why none was given (busy, or ctx done).
type Gate func(ctx context.Context) (release func(), err error)

// ErrBusy is the class of a Gate's refusal: no slot in time.
var ErrBusy = errors.New("server busy")

type gateKey struct{}

// WithGate returns ctx carrying g.
func WithGate(ctx context.Context, g Gate) context.Context {
	return context.WithValue(ctx, gateKey{}, g)
}

// Enter takes a slot of the gate ctx carries; without one (stdio, a test)
// it admits at once.
func Enter(ctx context.Context) (release func(), err error) {
	if g, ok := ctx.Value(gateKey{}).(Gate); ok && g != nil {
		return g(ctx)
	}
	return func() {}, nil
}
