package metrics

import (
	"context"
	"errors"
	"io"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

// Sink is what the commands use of a store: objects and the manifest's
// conditional put.
type Sink interface {
	blob.Store
	blob.Conditional
}

// CountSinkErrors wraps s so that every failed request adds to
// pgcdc_sink_errors_total{op,kind="request"}. Verdicts (ErrNotFound,
// ErrPrecondition) and cancellations are answers, not errors. The result
// is a blob.Locker exactly when s is.
func (m *Metrics) CountSinkErrors(s Sink) Sink {
	c := countingSink{inner: s, m: m}
	if l, ok := s.(blob.Locker); ok {
		return lockingSink{countingSink: c, locker: l}
	}
	return c
}

type countingSink struct {
	inner Sink
	m     *Metrics
}

func (c countingSink) count(op string, err error) error {
	if err != nil && !errors.Is(err, blob.ErrNotFound) && !errors.Is(err, blob.ErrPrecondition) &&
		!errors.Is(err, context.Canceled) {
		c.m.SinkErrors.WithLabelValues(op, "request").Inc()
	}
	return err
}

func (c countingSink) Put(ctx context.Context, key string, r io.Reader) error {
	return c.count("put", c.inner.Put(ctx, key, r))
}

func (c countingSink) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := c.inner.Get(ctx, key)
	return rc, c.count("get", err)
}

func (c countingSink) List(ctx context.Context, prefix string) ([]blob.ObjectInfo, error) {
	infos, err := c.inner.List(ctx, prefix)
	return infos, c.count("list", err)
}

func (c countingSink) Delete(ctx context.Context, key string) error {
	return c.count("delete", c.inner.Delete(ctx, key))
}

func (c countingSink) ReadVersion(ctx context.Context, key string) ([]byte, blob.Version, error) {
	data, v, err := c.inner.ReadVersion(ctx, key)
	return data, v, c.count("read_version", err)
}

func (c countingSink) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (blob.Version, error) {
	v, err := c.inner.PutIf(ctx, key, data, expected)
	return v, c.count("put_if", err)
}

// sinkOps are the operations pgcdc_sink_errors_total counts requests of,
// and attemptOp the one label of the attempts a store retries by itself
// (its retry hook does not say which request): every pair has a series
// from the start, at 0, so that a rate() or an increase() alert sees the
// first error (Prometheus: "avoid missing metrics").
var sinkOps = []string{"put", "get", "list", "delete", "read_version", "put_if"}

const attemptOp = "any"

// SinkAttemptFailed counts one failed attempt inside a store's own retry
// loop (kind="attempt"): a store that recovers on its own still shows that
// it needed to.
func (m *Metrics) SinkAttemptFailed() {
	m.SinkErrors.WithLabelValues(attemptOp, "attempt").Inc()
}

type lockingSink struct {
	countingSink
	locker blob.Locker
}

func (l lockingSink) LockWriter(ctx context.Context, owner string) (func() error, error) {
	return l.locker.LockWriter(ctx, owner)
}
