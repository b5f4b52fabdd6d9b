package mcpserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

// Reader is what the server needs of the read path (*query.Reader).
// Errors are the read path's: readpath.ErrRefused, ErrInvalid, ErrLimit,
// ErrPoint, ErrCollected and manifest.ErrOutsideRetention are the ones a
// caller can fix, and the server words them so.
type Reader interface {
	// Resolve finds a point ("" is the newest version).
	Resolve(ctx context.Context, point string) (readpath.At, error)
	// Tables lists the captured tables at a point, with their live rows.
	Tables(ctx context.Context, at readpath.At) ([]readpath.Table, error)
	// Query runs one SQL query at a point, through the sandbox.
	Query(ctx context.Context, at readpath.At, sql string, args ...any) (*readpath.Result, error)
	// Refs lists the branches, the newest tags and the history's window.
	Refs(ctx context.Context, tags int) (*readpath.RefList, error)
	// Compare is the per-table diff from one point to another, with the
	// promotion verdict.
	Compare(ctx context.Context, from, to readpath.At, only []string) (refs.Verdict, []refs.TableChange, error)
}

// DefaultMaxRows is the most rows one tool result carries when
// Options.MaxRows is 0.
const DefaultMaxRows = 100

// Options configure a Server.
type Options struct {
	Reader Reader
	// Changes serves get_changes; without it the tool is not offered.
	Changes ChangeFeed
	// Log receives the server's own logs (never stdout) and, without
	// Audit, the audit records.
	Log *slog.Logger
	// Audit receives one record per tool call; nil writes them to Log.
	Audit func(*access.Record)
	// MaxRows caps the rows of one result (query, sample_rows,
	// get_changes); 0 is DefaultMaxRows.
	MaxRows int
	// Version is the server's version in the MCP handshake.
	Version string
	// Now is the clock get_freshness measures against (nil: time.Now).
	Now func() time.Time
}

// Server is the MCP server. It is safe for concurrent use: one Server
// serves any number of sessions.
type Server struct {
	o   Options
	mcp *mcp.Server
	// sdkLog is Log for the SDK: warnings and errors only, as it logs
	// every session's start and end at info (over HTTP, every request).
	sdkLog *slog.Logger
}

// minLevel is a handler that drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}
func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// New builds the server and registers its tools and resources.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Audit == nil {
		log := o.Log
		o.Audit = func(r *access.Record) { r.Log(log) }
	}
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultMaxRows
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, sdkLog: slog.New(minLevel{o.Log.Handler(), slog.LevelWarn})}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "pg-cdc", Title: "pg-cdc sink", Version: o.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       s.sdkLog,
		// No logging capability: the server sends no log notifications.
		Capabilities: &mcp.ServerCapabilities{},
	})
	s.mcp.AddReceivingMiddleware(s.auditCalls)
	s.addTools()
	s.addResources()
	return s
}

const instructions = `Read-only access to a PostgreSQL change-data-capture sink (pg-cdc).
Each captured table is a view of its current state, "schema"."table", and its change rows (with __op, __lsn, __seq, __xid, __op_ts = commit time) are changes."schema"."table".
Start with list_tables and describe_table; query runs one SELECT in DuckDB's SQL dialect; as_of reads the sink at a point: a manifest version N, epoch:N, lsn:X/Y, an RFC 3339 time, main, staging or raw@<time>.`

// auditCalls writes one audit record per tools/call (and resources/read,
// Endpoint "resources/read <uri>"), whatever its end:
// the tool's handler fills in tables, rows and truncated through
// access.RecordFrom; a call the SDK refused (unknown tool, arguments that
// fail the schema) is recorded with its error too.
func (s *Server) auditCalls(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		var endpoint string
		switch r := req.(type) {
		case *mcp.CallToolRequest:
			endpoint = r.Params.Name
		case *mcp.ReadResourceRequest:
			endpoint = "resources/read " + r.Params.URI
		default:
			return next(ctx, method, req)
		}
		rec := &access.Record{Principal: access.PrincipalFrom(ctx), Surface: access.SurfaceMCP, Endpoint: endpoint, Started: time.Now()}
		res, err := next(access.WithRecord(ctx, rec), method, req)
		rec.Duration = time.Since(rec.Started)
		switch r, _ := res.(*mcp.CallToolResult); {
		case err != nil:
			rec.Error = err.Error()
		case r != nil && r.IsError:
			rec.Error = "tool error"
			for _, c := range r.Content {
				if t, ok := c.(*mcp.TextContent); ok {
					rec.Error = t.Text
					break
				}
			}
		}
		s.o.Audit(rec)
		return res, err
	}
}

// ServeStdio serves one session over in and out (newline-delimited
// JSON-RPC) until the client closes in or ctx ends; closing in is the
// client's shutdown (MCP's stdio transport) and cancels requests still in
// flight, so a client reads its answers first. A line that is no JSON-RPC
// message is answered with a JSON-RPC error (-32700 or -32600) and the
// session goes on (lineFilter). Nothing else is written to out.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	w := &lockedWriter{w: out}
	err := s.mcp.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(newLineFilter(in, w, s.o.Log)), Writer: w,
		// lineFilter bounds each line (maxLine) and answers a longer one;
		// the SDK's own bound would end the session instead.
		MaxLineLength: -1})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// HTTPOptions configure Handler.
type HTTPOptions struct {
	// AllowedHosts are the Host header values the handler answers: "name"
	// (any port) or "name:port". Empty: the loopback names only
	// (localhost, 127.0.0.1, [::1]), and the SDK's own check (a loopback
	// connection with another Host) stays on too. Put the names clients
	// use for a non-loopback listen address here (and the loopback names,
	// if loopback clients should be served as well).
	AllowedHosts []string
	// AllowedOrigins are the browser origins ("https://console.example")
	// allowed to call; a request with any other Origin header is refused.
	// Clients that are not browsers send no Origin.
	AllowedOrigins []string
	// MaxBodyBytes caps a request's body (0: the SDK's default, 1 MiB or
	// more; serve sets its own cap in front).
	MaxBodyBytes int64
}

// Handler serves MCP over streamable HTTP. It is stateless: every request
// carries what it needs, so no session outlives its request, a server
// restart breaks no client, and the principal the caller's
// authentication put in the request's context is the one each tool call
// is audited under.
func (s *Server) Handler(o HTTPOptions) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		Logger:              s.sdkLog,
		MaxRequestBodyBytes: o.MaxBodyBytes,
		// The SDK refuses a non-loopback Host on a loopback connection;
		// with hosts allowed by name (a proxy on loopback that keeps the
		// public name) the check below is the one that decides, and it
		// refuses every other Host, loopback connection or not.
		DisableLocalhostProtection: len(o.AllowedHosts) > 0,
	})
	hosts := o.AllowedHosts
	origins := o.AllowedOrigins
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, hosts) {
			http.Error(w, "forbidden: Host "+quoteHeader(r.Host)+" is not one this server answers (DNS rebinding protection); allow it with the server's allowed hosts", http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !slices.ContainsFunc(origins, func(o string) bool { return strings.EqualFold(strings.TrimRight(o, "/"), origin) }) {
			http.Error(w, "forbidden: cross-origin request from "+quoteHeader(origin)+"; allow the origin with the server's allowed origins", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether host (a Host header: name or name:port) is
// one of allowed, or a loopback name when allowed is empty.
func hostAllowed(host string, allowed []string) bool {
	if host == "" {
		return false
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(name, "[]")
	if len(allowed) == 0 {
		if strings.EqualFold(name, "localhost") {
			return true
		}
		ip := net.ParseIP(name)
		return ip != nil && ip.IsLoopback()
	}
	for _, a := range allowed {
		if _, _, err := net.SplitHostPort(a); err == nil {
			if strings.EqualFold(a, host) {
				return true
			}
			continue
		}
		if strings.EqualFold(strings.Trim(a, "[]"), name) {
			return true
		}
	}
	return false
}

// quoteHeader quotes a header value for an error message, cut short.
func quoteHeader(v string) string {
	if len(v) > 100 {
		v = v[:100] + "…"
	}
	return `"` + strings.ToValidUTF8(v, "?") + `"`
}
