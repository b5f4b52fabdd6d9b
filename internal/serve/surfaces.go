package serve

import (
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/api"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/events"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mcpserver"
)

// ReadPath is what the three surfaces read (internal/query.Reader is one):
// the union of their ports, and the history the change feed finds its
// oldest retained version in.
type ReadPath interface {
	api.Reader
	mcpserver.Reader
	History() *manifest.History
}

// SurfaceOptions configure the read surfaces over one ReadPath.
type SurfaceOptions struct {
	// MaxRows caps a REST result (query.max_rows). MCP keeps its own cap
	// (mcpserver.DefaultMaxRows): a tool's result goes into an agent's
	// context, query.max_rows into a file.
	MaxRows int
	// StaleAfter is the freshness objective of status answers.
	StaleAfter time.Duration
	// AllowedHosts and AllowedOrigins guard /mcp (mcpserver.HTTPOptions).
	AllowedHosts, AllowedOrigins []string
	MaxBodyBytes                 int64
	Version                      string
	Log                          *slog.Logger
}

// Surfaces fills o's REST, Events and MCP handlers with the read surfaces
// over r, sharing one change feed; the MCP server's audit records follow
// o.HashSQL, as the server's own do.
func (o *Options) Surfaces(r ReadPath, s SurfaceOptions) {
	feed := changefeed.New(r, r.History())
	o.REST = api.New(api.Options{Reader: r, Feed: feed, Log: s.Log, MaxRows: s.MaxRows, Version: s.Version, StaleAfter: s.StaleAfter})
	o.Events = events.New(events.Options{Reader: r, Feed: feed, StaleAfter: s.StaleAfter, Log: s.Log})
	mcp := mcpserver.New(mcpserver.Options{Reader: r, Changes: feed, Log: s.Log, Version: s.Version, Audit: auditTo(s.Log, o.HashSQL)})
	o.MCP = mcp.Handler(mcpserver.HTTPOptions{AllowedHosts: s.AllowedHosts, AllowedOrigins: s.AllowedOrigins, MaxBodyBytes: s.MaxBodyBytes})
}

// StdioMCP is the MCP server of pg-cdc mcp: the same tools as /mcp, over
// r, for an agent that talks on stdin and stdout, its audit records
// written to log with SQL as o.HashSQL says (the rest of o is unused).
func (o Options) StdioMCP(r ReadPath, version string, log *slog.Logger) *mcpserver.Server {
	return mcpserver.New(mcpserver.Options{Reader: r, Changes: changefeed.New(r, r.History()), Log: log, Version: version, Audit: auditTo(log, o.HashSQL)})
}

// auditTo writes the MCP server's audit records to log, SQL as hashSQL
// says (the MCP server makes its records itself, one per tool call).
func auditTo(log *slog.Logger, hashSQL bool) func(*access.Record) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(rec *access.Record) {
		rec.HashSQL = hashSQL
		rec.Log(log)
	}
}

// DefaultAllowedHosts are the Host names /mcp answers when serve.allowed_hosts
// is empty: the loopback names, the machine's host name and the listen
// address's own host (unless it is the unspecified address).
func DefaultAllowedHosts(listen string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if name, err := os.Hostname(); err == nil && name != "" {
		hosts = append(hosts, name)
	}
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" {
		if ip, err := netip.ParseAddr(h); err != nil || !ip.IsUnspecified() {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// NewToken is a random bearer token (256 bits); the configuration holds
// only its Hash.
func NewToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	return "pgcdc_" + base64.RawURLEncoding.EncodeToString(b[:])
}
