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
	"errors"
	"log/slog"
	"time"
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
	attrs = append(attrs, slog.Int64("rows", r.Rows), slog.Bool("truncated", r.Truncated))
	if r.Status != 0 {
		attrs = append(attrs, slog.Int("status", r.Status))
	}
	attrs = append(attrs, slog.Int64("duration_ms", r.Duration.Milliseconds()))
	if r.Queued > 0 {
		attrs = append(attrs, slog.Int64("queued_ms", r.Queued.Milliseconds()))
	}
	if r.Error != "" {
		attrs = append(attrs, slog.String("err", r.Error))
	}
	log.LogAttrs(context.Background(), level, "read request", attrs...)
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
