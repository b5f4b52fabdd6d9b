package main

import (
	"context"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

// readCommand is the body of a command on the read path.
type readCommand func(ctx context.Context, r *query.Reader, cfg config.Config, cmd *cobra.Command) error

// onReader is the RunE of a command on the read path (query, diff, refs,
// promote): it loads the configuration, opens the sink and a Reader on it,
// and runs fn. It needs no source: the read path never touches
// PostgreSQL, so these commands run where only the sink is reachable.
func (app *cli) onReader(fn readCommand) func(*cobra.Command, []string) error {
	return app.readerCommand(false, fn)
}

// onServer is onReader for a server (serve, mcp): a request for the newest
// version may be answered from the previous one while the newest's engine
// builds (serve.version_grace), so a version a second does not put a
// build in front of every request.
func (app *cli) onServer(fn readCommand) func(*cobra.Command, []string) error {
	return app.readerCommand(true, fn)
}

func (app *cli) readerCommand(server bool, fn readCommand) func(*cobra.Command, []string) error {
	return app.onSink(func(ctx context.Context, cfg config.Config, sink capture.Sink, cmd *cobra.Command) error {
		q := cfg.Query
		opts := query.ReaderOptions{
			Sink: sink, CacheDir: filepath.Join(cfg.State.Path, "cache"), CacheBytes: q.CacheBytes,
			TempDir: filepath.Join(cfg.State.Path, "query"),
			Limits: query.Limits{MemoryBytes: q.MemoryBytes, Threads: q.Threads, Timeout: q.Timeout,
				MaxRows: q.MaxRows, MaxBytes: q.MaxBytes},
			Isolation:      q.Isolation,
			PrivateCacheIn: cfg.State.Path, Log: newLogger(cfg, cmd.ErrOrStderr()),
		}
		if server {
			opts.Grace = cfg.Serve.VersionGrace
		}
		r, err := query.NewReader(opts)
		if err != nil {
			return err
		}
		defer r.Close()
		return fn(ctx, r, cfg, cmd)
	})
}

// onSink is the RunE of a command on the sink alone (the read path, the
// catalog): the configuration, the sink opened, and a context that SIGINT
// and SIGTERM cancel.
func (app *cli) onSink(fn func(ctx context.Context, cfg config.Config, sink capture.Sink, cmd *cobra.Command) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(app.configPath)
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		sink, err := openSink(ctx, cfg, nil)
		if err != nil {
			return err
		}
		return fn(ctx, cfg, sink, cmd)
	}
}
