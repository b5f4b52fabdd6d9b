package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/blob/gcs"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/logging"
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

// newLogger is the log of a command: log.level and log.format on w, every
// record scrubbed of the secrets the process knows and of anything shaped
// like one (internal/logging).
func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	return slog.New(logging.NewHandler(baseHandler(cfg.Log.Format, cfg.Log.SlogLevel(), w), scrubberFor(cfg)))
}

// baseHandler is slog's text or JSON handler, before scrubbing.
func baseHandler(format string, level slog.Level, w io.Writer) slog.Handler {
	opts := &slog.HandlerOptions{Level: level}
	if format == config.LogFormatJSON {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// secretEnv are the environment variables whose values are secrets
// wherever they appear: libpq's password, the AWS secret key and session
// token (the S3 sink and RDS IAM tokens read them).
var secretEnv = []string{"PGPASSWORD", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"}

// scrubberFor knows the secrets of cfg and of the environment: the source
// URL's password (as loaded, and as its ${VAR} references resolve now), its
// password= and sslpassword= parameters, storage.endpoint's password, and
// the values of secretEnv.
func scrubberFor(cfg config.Config) *logging.Scrubber {
	var secrets []string
	urls := []string{cfg.Source.Postgres.URL, cfg.Storage.Endpoint}
	if u, err := cfg.Source.Postgres.ResolveURL(os.LookupEnv); err == nil {
		urls = append(urls, u)
	}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || raw == "" {
			continue
		}
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw)
		}
		q := u.Query()
		secrets = append(secrets, q.Get("password"), q.Get("sslpassword"))
	}
	for _, name := range secretEnv {
		secrets = append(secrets, os.Getenv(name))
	}
	return logging.NewScrubber(secrets...)
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

// sink is what the commands need of the storage: objects and a conditional
// put for the manifest. A sink that can also hold a writer lock
// (blob.Locker: the filesystem) makes a second writer fail fast; on an
// object store the manifest's owner check and its compare-and-swap do that
// job (DESIGN §3).
type sink interface {
	blob.Store
	blob.Conditional
}

func openSink(ctx context.Context, cfg config.Config) (sink, error) {
	return openSinkWith(ctx, cfg, nil)
}

// openSinkWith is openSink with onRetry called for every failed attempt
// an object store's client retries by itself (metrics).
func openSinkWith(ctx context.Context, cfg config.Config, onRetry func()) (sink, error) {
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
			return nil, fmt.Errorf("open S3 sink %s: %w", sinkName(cfg), err)
		}
		return s, nil
	case config.StorageGCS:
		s, err := gcs.New(ctx, gcs.Options{Bucket: st.Bucket, Prefix: st.Prefix,
			CredentialsFile: st.CredentialsFile, Endpoint: st.Endpoint, OnRetry: onRetry})
		if err != nil {
			return nil, fmt.Errorf("open GCS sink %s: %w", sinkName(cfg), err)
		}
		return s, nil
	default:
		return nil, usageError{fmt.Errorf("storage.type %q is not supported", st.Type)}
	}
}

// probeSink checks that the sink enforces conditional writes (DESIGN §2)
// before anything is written: a store that silently ignores them would let
// two writers overwrite each other's manifest. Refused with exit 14 unless
// storage.accept_single_writer_risk is set.
func probeSink(ctx context.Context, s sink, cfg config.Config, log *slog.Logger) error {
	host, _ := os.Hostname()
	key := fmt.Sprintf("_pgcdc/probe/%s-%d-%d", keySafe(host), os.Getpid(), time.Now().UnixNano())
	err := blob.ProbeConditional(ctx, s, key)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, blob.ErrConditionalIgnored):
		return fmt.Errorf("probe sink %s: %w", sinkName(cfg), err)
	case cfg.Storage.AcceptSingleWriterRisk:
		log.Warn("the sink ignores conditional writes; running anyway because storage.accept_single_writer_risk is set: a second writer on this prefix would go undetected",
			"sink", sinkName(cfg), "err", err)
		return nil
	default:
		return &cdc.Error{Class: cdc.ErrSinkUnsafe, Msg: fmt.Sprintf("sink %s: %v", sinkName(cfg), err),
			Hint: "use a store that enforces If-Match / If-None-Match (or generation preconditions); if this pg-cdc is certainly the only writer, set storage.accept_single_writer_risk: true"}
	}
}

// keySafe keeps the characters a host name may put in an object key.
func keySafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// lockSink takes the sink's writer lock, if it has one, so a second writer
// fails fast.
func lockSink(ctx context.Context, s sink, what string) (func() error, error) {
	l, ok := s.(blob.Locker)
	if !ok {
		return func() error { return nil }, nil
	}
	host, _ := os.Hostname()
	owner := fmt.Sprintf("pg-cdc %s pid %d on %s since %s", what, os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	release, err := l.LockWriter(ctx, owner)
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
