package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/blob/gcs"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3"
	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/logging"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// loadConfig reads and validates the configuration; every error is a usage
// error (exit 2).
func loadConfig(path string) (config.Config, error) {
	cfg, err := config.Load(path, os.Environ())
	if err != nil {
		return cfg, cdc.Usage(err)
	}
	return cfg, nil
}

// newLogger is the log of a command: log.level and log.format on w, every
// record scrubbed of the secrets the process knows and of anything shaped
// like one (internal/logging).
func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.Log.SlogLevel()}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.Log.Format == config.LogFormatJSON {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(logging.NewHandler(h, scrubberFor(cfg)))
}

// scrubberFor knows the secrets of cfg and of the environment
// (config.Config.Secrets).
func scrubberFor(cfg config.Config) *logging.Scrubber {
	return logging.NewScrubber(cfg.Secrets(os.LookupEnv)...)
}

// command is the body of a command that works on a capture.
type command func(ctx context.Context, c *capture.Capture, cfg config.Config, cmd *cobra.Command) error

// onCapture is the RunE of a command that works on a capture: it loads the
// configuration, builds the logger and the capture (with its sink opened
// when open is set), and runs fn with a context that SIGINT and SIGTERM
// cancel (a stop request, which fn answers by draining).
func (app *cli) onCapture(open bool, fn command) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(app.configPath)
		if err != nil {
			return err
		}
		if err := cfg.RequireSource(); err != nil {
			return cdc.Usage(err)
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		c, err := newCapture(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		if open {
			if c.Sink, err = openSink(ctx, cfg, nil); err != nil {
				return err
			}
		}
		return fn(ctx, c, cfg, cmd)
	}
}

// newCapture is the capture the configuration describes.
func newCapture(ctx context.Context, cfg config.Config, log *slog.Logger) (*capture.Capture, error) {
	spec, err := sourceConn(ctx, cfg)
	if err != nil {
		return nil, err
	}
	include, err := cfg.IncludeIDs()
	if err != nil {
		return nil, cdc.Usage(err)
	}
	return &capture.Capture{
		Source: spec, Provider: postgres.Provider(cfg.Source.Postgres.Provider),
		Slot: cfg.Replication.Slot, Publication: cfg.Replication.Publication,
		Tables:   capture.Selection{Schemas: cfg.Source.Postgres.Schemas, Include: include, Exclude: cfg.Tables.Exclude, Types: cfg.Types},
		SinkName: cfg.Storage.Name(), AcceptSingleWriterRisk: cfg.Storage.AcceptSingleWriterRisk,
		StateDir: cfg.State.Path, Workers: cfg.Init.ParallelWorkers, Log: log,
	}, nil
}

// openSink opens the storage.type sink; onRetry is called for every failed
// attempt an object store's client retries by itself (metrics).
func openSink(ctx context.Context, cfg config.Config, onRetry func()) (capture.Sink, error) {
	st := cfg.Storage
	switch st.Type {
	case config.StorageFilesystem:
		s, err := fs.New(st.Path)
		if err != nil {
			return nil, fmt.Errorf("open filesystem sink %s: %w", st.Path, err)
		}
		return s, nil
	case config.StorageS3:
		retries := cfg.AWS.MaxRetries
		if retries == 0 {
			retries = -1 // the store reads 0 as "its default"; the config means none
		}
		s, err := s3.New(ctx, s3.Options{Bucket: st.Bucket, Prefix: st.Prefix, Region: st.Region,
			Endpoint: st.Endpoint, ForcePathStyle: st.ForcePathStyle, MaxRetries: retries, RequestTimeout: st.RequestTimeout, OnRetry: onRetry})
		if err != nil {
			return nil, fmt.Errorf("open S3 sink %s: %w", cfg.Storage.Name(), err)
		}
		return s, nil
	case config.StorageGCS:
		s, err := gcs.New(ctx, gcs.Options{Bucket: st.Bucket, Prefix: st.Prefix,
			CredentialsFile: st.CredentialsFile, Endpoint: st.Endpoint, OnRetry: onRetry})
		if err != nil {
			return nil, fmt.Errorf("open GCS sink %s: %w", cfg.Storage.Name(), err)
		}
		return s, nil
	default:
		return nil, cdc.Usage(fmt.Errorf("storage.type %q is not supported", st.Type))
	}
}
