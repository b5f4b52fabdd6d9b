package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/api"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/events"
	"github.com/pg-cdc/pg-cdc/internal/mcpserver"
	"github.com/pg-cdc/pg-cdc/internal/metrics"
	"github.com/pg-cdc/pg-cdc/internal/query"
	"github.com/pg-cdc/pg-cdc/internal/serve"
)

func newServeCmd(app *cli) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "serve [--listen HOST:PORT]",
		Short: "Serve the sink over REST (/v1), server-sent events (/v1/stream), MCP (/mcp) and metrics, from the sink alone",
		Long: `Serve the read path over HTTP: REST under /v1 (OpenAPI at /v1/openapi.json),
server-sent events at /v1/stream/status and /v1/stream/changes, MCP over
streamable HTTP at /mcp, /metrics, /livez and /readyz. It reads
only the sink (no source credentials) and follows new versions as the
daemon commits them. A listen address other than loopback needs
serve.tokens; 'pg-cdc serve token NAME' makes one. See docs/serve.md.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&listen, "listen", "", "host:port to listen on (default serve.listen)")
	cmd.RunE = app.onServer(func(ctx context.Context, r *query.Reader, cfg config.Config, cmd *cobra.Command) error {
		if listen != "" {
			cfg.Serve.Listen = listen
		}
		tokens, err := serve.ParseTokens(cfg.Serve.Tokens, cfg.Serve.TokensFile)
		if err != nil {
			return cdc.Usage(err)
		}
		log := newLogger(cfg, cmd.ErrOrStderr())
		feed := changefeed.New(r, r.History())
		rest := api.New(api.Options{Reader: r, Feed: feed, Log: log, MaxRows: cfg.Query.MaxRows, Version: version,
			StaleAfter: cfg.Serve.StaleAfter})
		// MCP keeps its own row cap (mcpserver.DefaultMaxRows): a tool's
		// result goes into an agent's context, query.max_rows into a file.
		mcp := mcpserver.New(mcpserver.Options{Reader: r, Changes: feed, Log: log, Version: version})
		streams := events.New(events.Options{Reader: r, Feed: feed, StaleAfter: cfg.Serve.StaleAfter, Log: log})
		observer, metricsHandler := metrics.NewServeEndpoint(version)
		srv, err := serve.New(serve.Options{
			Listen: cfg.Serve.Listen, Tokens: tokens,
			RatePerSecond: float64(cfg.Serve.RateLimit), Burst: cfg.Serve.RateBurst,
			MaxConcurrent: cfg.Serve.MaxConcurrent, QueueWait: cfg.Serve.QueueWait, MaxStreams: cfg.Serve.MaxStreams, MaxBodyBytes: cfg.Serve.MaxBodyBytes,
			// A response may take the query's whole time, and then be written.
			WriteTimeout: cfg.Query.Timeout + 30*time.Second,
			REST:         rest,
			Events:       streams,
			MCP: mcp.Handler(mcpserver.HTTPOptions{AllowedHosts: allowedHosts(cfg.Serve),
				AllowedOrigins: cfg.Serve.AllowedOrigins, MaxBodyBytes: cfg.Serve.MaxBodyBytes}),
			Metrics:  metricsHandler,
			Ready:    func(ctx context.Context) error { _, err := r.Resolve(ctx, ""); return err },
			Observer: observer,
			Log:      log,
		})
		if err != nil {
			return cdc.Usage(err)
		}
		ln, err := serve.Listen(cfg.Serve.Listen)
		if err != nil {
			return err
		}
		log.Info("serving the sink", "addr", ln.Addr().String(), "rest", "/v1", "events", "/v1/stream", "mcp", "/mcp",
			"tokens", len(tokens))
		return srv.Serve(ctx, ln)
	})
	cmd.AddCommand(newServeTokenCmd())
	return cmd
}

// allowedHosts is serve.allowed_hosts, or by default the loopback names,
// the machine's host name and the listen address's own host.
func allowedHosts(s config.ServeConfig) []string {
	if len(s.AllowedHosts) > 0 {
		return s.AllowedHosts
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if name, err := os.Hostname(); err == nil && name != "" {
		hosts = append(hosts, name)
	}
	if h, _, err := net.SplitHostPort(s.Listen); err == nil && h != "" {
		if ip, err := netip.ParseAddr(h); err != nil || !ip.IsUnspecified() {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

func newServeTokenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "token NAME",
		Short: "Make a bearer token for principal NAME and print the line that allows it",
		Long: `Make a random bearer token for principal NAME. The token is printed once, on
stdout; the configuration holds only its hash (serve.tokens), so keep the
token where the client can read it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var b [32]byte
			_, _ = rand.Read(b[:]) // crypto/rand never fails
			token := "pgcdc_" + base64.RawURLEncoding.EncodeToString(b[:])
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "token (give it to the client; it is not stored): %s\n\n", token)
			fmt.Fprintf(w, "add to the configuration:\nserve:\n  tokens:\n    %s: %s\n", args[0], serve.Hash(token))
			return nil
		},
	}
}

func newMCPCmd(app *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the sink to an AI agent over MCP on stdin and stdout",
		Long: `Serve the read path's MCP tools (list_tables, describe_table, query,
get_changes, get_manifest, get_freshness, get_snapshot, get_diff, ...) over
stdio, for an agent that starts pg-cdc itself. It reads only the sink;
logs go to stderr, never stdout. See docs/serve.md.`,
		Args: cobra.NoArgs,
	}
	cmd.RunE = app.onServer(func(ctx context.Context, r *query.Reader, cfg config.Config, cmd *cobra.Command) error {
		log := newLogger(cfg, cmd.ErrOrStderr())
		feed := changefeed.New(r, r.History())
		s := mcpserver.New(mcpserver.Options{Reader: r, Changes: feed, Log: log, Version: version})
		return s.ServeStdio(ctx, cmd.InOrStdin(), cmd.OutOrStdout())
	})
	return cmd
}
