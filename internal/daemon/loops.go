package daemon

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/metrics"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// collectEvery is how often the compaction loop collects garbage when no
// major compaction asked for it sooner: a collection lists the whole sink,
// and what it deletes has waited gc.grace_period (an hour by default)
// anyway.
const collectEvery = 5 * time.Minute

// compactionLoop looks at every table each interval, beside the stream,
// and compacts those the policy names (compact.Auto: minor merges, then
// major compactions), on a committer of its own (compact.NewCommitter: its
// conflicts with the streamer are expected). Garbage is collected after a
// pass with a major compaction, and at least every collectEvery. A failed
// pass is logged and retried at the next tick: compaction never stops the
// stream. Every pass that did something is reported to done (the run's
// events) and counted.
type compactionLoop struct {
	sink     capture.Sink
	every    time.Duration
	policy   compact.Policy
	opts     compact.Options
	grace    time.Duration
	log      *slog.Logger
	m        *metrics.Metrics
	done     func(p compactionPass)
	observer manifest.Observer // the post-commit seam, for the versions it commits
}

// compactionPass is what one pass of the loop did.
type compactionPass struct {
	compact.AutoResult
	GC   *compact.CollectResult // nil: no collection this pass
	Took time.Duration
	Err  error
}

func (p compactionPass) idle() bool {
	return len(p.Minor) == 0 && len(p.Major) == 0 && p.Err == nil &&
		(p.GC == nil || p.GC.Retired+p.GC.Orphans+p.GC.LogDeleted == 0)
}

func (l *compactionLoop) run(ctx context.Context) {
	log := l.log.With("component", "compaction")
	t := time.NewTicker(l.every)
	defer t.Stop()
	var (
		mc        *manifest.Committer
		collected time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if mc == nil {
			var err error
			if mc, err = compact.NewCommitter(ctx, l.sink); err != nil {
				log.Error("compaction pass could not read the manifest", "err", err)
				mc = nil
				continue
			}
			mc.SetObserver(l.observer)
			mc.SetLogger(log)
		}
		started := time.Now()
		var pass compactionPass
		pass.AutoResult, pass.Err = compact.Auto(ctx, l.sink, mc, l.policy, l.opts)
		if ctx.Err() != nil {
			return
		}
		if len(pass.Major) > 0 || time.Since(collected) >= collectEvery {
			gc, err := compact.Collect(ctx, l.sink, mc, l.opts.CollectOptions(l.grace))
			if ctx.Err() != nil {
				return
			}
			collected = time.Now()
			if err != nil {
				pass.Err = errors.Join(pass.Err, err)
			} else {
				pass.GC = &gc
				if gc.Retired+gc.Orphans+gc.LogDeleted > 0 {
					log.Info("collected garbage", "retired_deleted", gc.Retired, "orphans_deleted", gc.Orphans, "waiting", gc.Waiting,
						"history_deleted", gc.LogDeleted, "oldest_version", gc.Oldest)
				}
			}
		}
		pass.Took = time.Since(started)
		l.count(pass)
		if !pass.idle() {
			l.done(pass)
		}
		if pass.Err != nil {
			log.Error("compaction pass failed; retrying at the next interval", "err", pass.Err)
			mc = nil // the next pass starts from the stored manifest
		}
	}
}

func (l *compactionLoop) count(p compactionPass) {
	if !p.idle() {
		l.m.CompactionDuration.Observe(p.Took.Seconds())
	}
	for _, r := range p.Major {
		l.m.CompactionInputRows.Add(float64(r.Versions))
		l.m.CompactionOutputRows.Add(float64(r.Rows))
	}
	l.m.Compactions.WithLabelValues("minor").Add(float64(len(p.Minor)))
	l.m.Compactions.WithLabelValues("major").Add(float64(len(p.Major)))
	if p.GC != nil {
		l.m.GCDeletedFiles.Add(float64(p.GC.Retired + p.GC.Orphans))
	}
	if p.Err != nil {
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
