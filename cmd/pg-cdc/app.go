package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
)

// loadConfig reads and validates the configuration; every error is a usage
// error (exit 2).
func loadConfig(path string) (config.Config, error) {
	cfg, err := config.Load(path, os.Environ())
	if err != nil {
		return cfg, usageError{err}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err}
	}
	return cfg, nil
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	switch strings.ToLower(cfg.Log.Level) {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// withSignals is the RunE of a command that does long work: it loads the
// configuration, builds the logger, and runs fn with a context that SIGINT
// and SIGTERM cancel (a stop request, which fn answers by draining).
func withSignals(configPath *string, fn func(ctx context.Context, cfg config.Config, log *slog.Logger, cmd *cobra.Command) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(*configPath)
		if err != nil {
			return err
		}
		log := newLogger(cfg, cmd.ErrOrStderr())
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return fn(ctx, cfg, log, cmd)
	}
}

// sink is what the commands need of the storage: objects, a conditional
// put for the manifest, and the writer lock.
type sink interface {
	blob.Store
	blob.Conditional
	blob.Locker
}

func openSink(cfg config.Config) (sink, error) {
	switch cfg.Storage.Type {
	case "filesystem":
		s, err := fs.New(cfg.Storage.Path)
		if err != nil {
			return nil, fmt.Errorf("open filesystem sink %s: %w", cfg.Storage.Path, err)
		}
		return s, nil
	default:
		return nil, usageError{fmt.Errorf("storage.type %q is not supported by this version (use filesystem)", cfg.Storage.Type)}
	}
}

// lockSink takes the sink's writer lock, so a second writer fails fast.
func lockSink(ctx context.Context, s sink, what string) (func() error, error) {
	host, _ := os.Hostname()
	owner := fmt.Sprintf("pg-cdc %s pid %d on %s since %s", what, os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	release, err := s.LockWriter(ctx, owner)
	if errors.Is(err, blob.ErrLocked) {
		return nil, &cdc.Error{Class: cdc.ErrSinkLocked, Msg: err.Error(),
			Hint: "another pg-cdc process is writing to this storage path; stop it first"}
	}
	if err != nil {
		return nil, fmt.Errorf("lock sink: %w", err)
	}
	return release, nil
}

// notInitialized gives a missing manifest its operator hint.
func notInitialized(err error, cfg config.Config) error {
	if errors.Is(err, cdc.ErrNotInitialized) {
		return &cdc.Error{Class: cdc.ErrNotInitialized, Msg: fmt.Sprintf("no manifest in %s", sinkName(cfg)), Hint: "run 'pg-cdc init' first"}
	}
	return err
}

// sinkName names the sink for messages: the directory, or the object
// store's URL (s3://bucket/prefix, gs://bucket/prefix).
func sinkName(cfg config.Config) string {
	scheme := map[string]string{config.StorageS3: "s3", config.StorageGCS: "gs"}[cfg.Storage.Type]
	if scheme == "" {
		return cfg.Storage.Path
	}
	u := scheme + "://" + cfg.Storage.Bucket
	if cfg.Storage.Prefix != "" {
		u += "/" + cfg.Storage.Prefix
	}
	return u
}
