package daemon

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/metrics"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// compactionLoop compacts every table each interval, beside the stream, on
// a committer of its own (compact.NewCommitter: its conflicts with the
// streamer are expected). A failed pass is logged and retried at the next
// tick: compaction never stops the stream. Every pass is reported to done
// (the run's events) and counted.
type compactionLoop struct {
	sink     capture.Sink
	every    time.Duration
	opts     compact.Options
	grace    time.Duration
	log      *slog.Logger
	m        *metrics.Metrics
	done     func(results []compact.Result, gc compact.CollectResult, took time.Duration, err error)
	observer manifest.Observer // the post-commit seam, for the versions it commits
}

func (l *compactionLoop) run(ctx context.Context) {
	log := l.log.With("component", "compaction")
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		mc, err := compact.NewCommitter(ctx, l.sink)
		if err != nil {
			log.Error("compaction pass could not read the manifest", "err", err)
			continue
		}
		mc.SetObserver(l.observer)
		mc.SetLogger(log)
		started := time.Now()
		results, collected, err := compact.Pass(ctx, l.sink, mc, nil, l.opts, l.grace)
		if err != nil && ctx.Err() != nil {
			return
		}
		took := time.Since(started)
		l.done(results, collected, took, err)
		l.count(results, collected, took, err)
		if err != nil {
			log.Error("compaction pass failed; retrying at the next interval", "err", err)
		}
	}
}

func (l *compactionLoop) count(results []compact.Result, collected compact.CollectResult, took time.Duration, err error) {
	l.m.CompactionDuration.Observe(took.Seconds())
	for _, r := range results {
		l.m.CompactionInputRows.Add(float64(r.Versions))
		l.m.CompactionOutputRows.Add(float64(r.Rows))
	}
	l.m.GCDeletedFiles.Add(float64(collected.Retired + collected.Orphans))
	if err != nil {
		l.m.CompactionRuns.WithLabelValues("error").Inc()
		return
	}
	l.m.CompactionRuns.WithLabelValues("ok").Inc()
	l.m.CompactionLastSuccess.Set(float64(time.Now().Unix()))
}

// reconciler requests a reconcile of every captured table each interval,
// beside the stream (design.md §8.3). It is a side channel: a failed round
// is logged and the next one tries again; the stream never depends on it
// (a Relation message records the same change when a row changes).
type reconciler struct {
	spec    postgres.ConnSpec
	every   time.Duration
	current func() *manifest.Manifest // the newest committed version (the feed's)
	log     *slog.Logger
}

func (r *reconciler) run(ctx context.Context) {
	t := time.NewTicker(r.every)
	defer t.Stop()
	sent := map[string]string{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, r.every)
		res, err := r.round(rctx, sent)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.log.Warn("reconcile: round failed; the next one tries again", "err", err)
		case res.Emitted:
			tables := make([]string, len(res.Sent))
			for i, s := range res.Sent {
				tables[i] = s.ID().String()
			}
			r.log.Info("reconcile: requested", "lsn", res.LSN, "tables", strings.Join(tables, ","))
		default:
			r.log.Debug("reconcile: nothing to request")
		}
	}
}

// round is one request on a connection of its own.
func (r *reconciler) round(ctx context.Context, sent map[string]string) (capture.Reconciled, error) {
	db, err := postgres.Connect(ctx, r.spec)
	if err != nil {
		return capture.Reconciled{}, err
	}
	defer db.Close()
	return capture.RequestReconcile(ctx, db, r.current(), nil, false, sent)
}
