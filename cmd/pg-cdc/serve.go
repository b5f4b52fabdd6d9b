package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/metrics"
	"github.com/pg-cdc/pg-cdc/internal/query"
	"github.com/pg-cdc/pg-cdc/internal/serve"
)

func newServeCmd(app *cli) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "serve [--listen HOST:PORT]",
		Short: "Serve the sink over REST (/v1), server-sent events (/v1/stream), MCP (/mcp) and metrics, from the sink alone",
		Args:  cobra.NoArgs,
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
		observer, metricsHandler := metrics.NewServeEndpoint(version)
		o := serve.Options{
			Listen: cfg.Serve.Listen, Tokens: tokens,
			RatePerSecond: float64(cfg.Serve.RateLimit), Burst: cfg.Serve.RateBurst,
			UnauthRatePerSecond: float64(cfg.Serve.UnauthRateLimit), UnauthBurst: cfg.Serve.UnauthRateBurst,
			// 0 in the configuration is off; 0 in Options would be the default.
			UnauthOff:     cfg.Serve.UnauthRateLimit == 0,
			HashSQL:       cfg.Serve.AuditSQL == config.AuditSQLHash,
			MaxConcurrent: cfg.Serve.MaxConcurrent, QueueWait: cfg.Serve.QueueWait, MaxStreams: cfg.Serve.MaxStreams, MaxBodyBytes: cfg.Serve.MaxBodyBytes,
			// A response may take the query's whole time, and then be written.
			WriteTimeout: cfg.Query.Timeout + 30*time.Second,
			Metrics:      metricsHandler,
			Ready:        func(ctx context.Context) error { _, err := r.Resolve(ctx, ""); return err },
			Observer:     observer,
			Log:          log,
		}
		hosts := cfg.Serve.AllowedHosts
		if len(hosts) == 0 {
			hosts = serve.DefaultAllowedHosts(cfg.Serve.Listen)
		}
		o.Surfaces(r, serve.SurfaceOptions{MaxRows: cfg.Query.MaxRows, StaleAfter: cfg.Serve.StaleAfter, AllowedHosts: hosts,
			AllowedOrigins: cfg.Serve.AllowedOrigins, MaxBodyBytes: cfg.Serve.MaxBodyBytes, Version: version, Log: log})
		srv, err := serve.New(o)
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

func newServeTokenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "token NAME",
		Short: "Make a bearer token for principal NAME and print the line that allows it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			token := serve.NewToken()
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
		Args:  cobra.NoArgs,
	}
	cmd.RunE = app.onServer(func(ctx context.Context, r *query.Reader, cfg config.Config, cmd *cobra.Command) error {
		o := serve.Options{HashSQL: cfg.Serve.AuditSQL == config.AuditSQLHash}
		s := o.StdioMCP(r, version, newLogger(cfg, cmd.ErrOrStderr()))
		return s.ServeStdio(ctx, cmd.InOrStdin(), cmd.OutOrStdout())
	})
	return cmd
}
