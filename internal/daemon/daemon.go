package daemon

import (
	"context"
	"errors"
	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/refs"
	"github.com/pg-cdc/pg-cdc/internal/runs"
)

// Options is everything Run needs; the command builds it from the
// configuration. Zero durations turn the optional parts off where the
// field says so.
type Options struct {
	// Capture is the source, slot, publication and tables; its Sink is set
	// by Run from OpenSink.
	Capture *capture.Capture
	// OpenSink opens the storage; onRetry is called for every failed
	// attempt an object store's client retries by itself (metrics).
	OpenSink func(ctx context.Context, onRetry func()) (capture.Sink, error)

	Stream     StreamOptions
	Retry      RetryPolicy
	Compaction CompactionOptions
	// PromotionMode is how the branch main moves (refs.ModeAuto: with
	// every version, as staging does; refs.ModeManual: with pg-cdc
	// promote only).
	PromotionMode string
	// ReconcileInterval is how often the background reconciler runs (0:
	// never); HeartbeatInterval how often a heartbeat is written (0:
	// never); MaxRetainedWAL the retained-WAL guardrail (0: off).
	ReconcileInterval, HeartbeatInterval time.Duration
	MaxRetainedWAL                       int64

	// Listen is the metrics and health endpoint's host:port ("": none);
	// the timeouts bound liveness and readiness (internal/health).
	Listen                           string
	LivenessTimeout, ReadinessMaxLag time.Duration

	// Followers follow every committed manifest version beside the stream
	// (the post-commit seam, manifest.Feed), each on its own goroutine; a
	// follower that fails is logged and stops, never the stream.
	Followers []Follower
	// FeedPoll is how often the seam reads the stored manifest for the
	// versions other processes commit (0: DefaultFeedPoll).
	FeedPoll time.Duration

	// The run: its id (shared with the audit records), the command line
	// and the redacted settings (for run.json), who runs it, the version.
	RunID, User, Version string
	Args                 []string
	Settings             map[string]any
	// Scrub removes secrets from what the run artifacts, health and
	// systemd show; ExitCode maps the run's error to the code recorded in
	// them; Audit records an operator event ("stop_requested").
	Scrub    func(string) string
	ExitCode func(error) int
	Audit    func(event string)
	Log      *slog.Logger
}

// StreamOptions tune the stream (replicate.Config, flush).
type StreamOptions struct {
	FlushInterval                 time.Duration
	FlushMaxRows, FlushMaxBytes   int64
	FlushWorkers                  int
	StandbyInterval, DrainTimeout time.Duration
	ReceiveTimeout                time.Duration
	MemoryBudget                  int64
	// StateDir holds spill and spool files and the run artifacts.
	StateDir string
	// BreakerThreshold conflicts with another streamer within
	// BreakerWindow stop the stream (exit 13).
	BreakerThreshold int
	BreakerWindow    time.Duration
	// ChunkRows bounds a backfill chunk; DiscoverInterval is how often new
	// tables are looked for while streaming (0: never).
	ChunkRows        int
	DiscoverInterval time.Duration
}

// CompactionOptions tune the compaction loop.
type CompactionOptions struct {
	// Interval is how often a pass runs beside the stream (0: never), and
	// the thresholds which tables it compacts, and how (compact.Policy).
	Interval                     time.Duration
	MinorFanout, MaxDeltaFiles   int
	MinorMaxBytes, MajorMinBytes int64
	MajorDeltaPercent            int
	MajorInterval                time.Duration
	MemoryBytes, TargetFileBytes int64
	TombstoneTTL, GracePeriod    time.Duration
	// Retention is history.retention: garbage collection keeps every
	// manifest version committed within it readable (compact.Collect),
	// and every version a ref names (refs.Pinned).
	Retention time.Duration
	// KeepRetired is compact.CollectOptions.KeepRetired (a catalog's
	// snapshots may name retired files).
	KeepRetired time.Duration
	// Referenced is compact.CollectOptions.Referenced: the files the
	// catalog's retained snapshots name.
	Referenced func(context.Context, *manifest.Manifest) (map[string]bool, error)
}

// Follower is work that follows the committed manifest versions beside the
// stream: Follow runs on a goroutine of its own until ctx is done, reading
// versions from feed (manifest.Feed.Next or Follow). It can never slow or
// stop the stream: the feed keeps only the newest version.
type Follower interface {
	Name() string
	Follow(ctx context.Context, feed *manifest.Feed) error
}

// DefaultFeedPoll is how often the seam reads the stored manifest.
const DefaultFeedPoll = 2 * time.Second

// Stop timeouts: how long each stage of the stop order may take before
// its stuck parts are left behind (see group).
const (
	backgroundStopTimeout = 30 * time.Second
	pollerStopTimeout     = 10 * time.Second
	httpStopTimeout       = 5 * time.Second
)

// Run runs `pg-cdc start` until ctx is cancelled (the stop request: the
// stream drains) or the stream stops for good; see the package
// documentation for the order of effects. The error is classified
// (cdc.IsTransient, the cdc error classes) for the caller's exit code.
func Run(ctx context.Context, o Options) (err error) {
	// A sink never initialized is refused before anything is written: no
	// run artifacts, no writer lock under _pgcdc/.
	if err := initialized(ctx, o); err != nil {
		return err
	}
	obs, err := newObserver(o)
	if err != nil {
		return err
	}
	g := newGroup(o.Log)
	var d *daemon
	defer func() {
		// Everything that writes to the sink (the stream, compaction) has
		// stopped before its lock is released, and everything that reports
		// to the run artifacts (the pollers, the endpoint too) before they
		// are closed.
		g.stop()
		var m *manifest.Manifest
		if d != nil {
			m = d.mc.Current()
			_ = d.release() // the OS releases the lock anyway when the process exits
		}
		obs.finish(err, o.ExitCode(err), m)
	}()
	ln, err := obs.listen(o.Listen)
	if err != nil {
		return err
	}
	// Stages in start order; they stop in reverse: pollers after the
	// background loops, the endpoint after the pollers.
	httpStage := g.stage(ctx, "http", httpStopTimeout)
	pollers := g.stage(ctx, "pollers", pollerStopTimeout)
	if ln != nil {
		httpStage.Go("metrics endpoint", func(ctx context.Context) { obs.serve(ctx, ln) })
	}
	pollers.Go("systemd watchdog", func(ctx context.Context) {
		obs.systemd.RunWatchdog(ctx, func() bool { return obs.health.Status().Alive })
	})
	pollers.Go("stop request", func(sctx context.Context) { obs.stopRequested(ctx, sctx, o.Audit) })
	pollers.Go("run state", func(ctx context.Context) { tick(ctx, stateInterval, obs.writeState) })

	if d, err = open(ctx, o, obs); err != nil {
		return err
	}
	background := g.stage(ctx, "background", backgroundStopTimeout)
	d.startWatchers(pollers, background)
	obs.systemd.Ready()
	return d.stream(ctx)
}

// stopRequested tells systemd and the audit stream when the stop request
// comes (stop is the run's context, done is the part's own).
func (o *observer) stopRequested(stop, done context.Context, audit func(string)) {
	select {
	case <-stop.Done(): // the stop request: the drain begins
		o.systemd.Stopping()
		if audit != nil {
			audit("stop_requested")
		}
		o.emit(runs.StopRequested{})
	case <-done.Done():
	}
}

// daemon is what Run opened: the sink (locked and probed), the manifest
// committer checked against the capture, and the seam.
type daemon struct {
	o       Options
	c       *capture.Capture
	obs     *observer
	mc      *manifest.Committer
	fc      *flush.Committer
	feed    *manifest.Feed
	release func() error
}

// initialized reports cdc.ErrNotInitialized (with its hint) for a sink
// that holds no manifest; any other failure to read it is left to open,
// which retries and reports it in its place.
func initialized(ctx context.Context, o Options) error {
	sink, err := o.OpenSink(ctx, func() {})
	if err != nil {
		return err
	}
	if _, _, err := manifest.Load(ctx, sink); errors.Is(err, cdc.ErrNotInitialized) {
		// An object store that ignores conditional writes is the graver
		// problem (exit 14) and is said first; a filesystem sink (it locks,
		// and its conditional writes are its own) is not probed, which
		// would make its _pgcdc/.
		if _, local := sink.(blob.Locker); !local {
			c := *o.Capture
			c.Sink = sink
			if perr := c.ProbeSink(ctx); perr != nil {
				return perr
			}
		}
		return o.Capture.NotInitialized(err)
	}
	return nil
}

// open opens the sink through the metrics, locks and probes it, opens the
// manifest committer and checks the sink is this capture's.
func open(ctx context.Context, o Options, obs *observer) (*daemon, error) {
	opened, err := o.OpenSink(ctx, func() { obs.metrics.SinkAttemptFailed() })
	if err != nil {
		return nil, err
	}
	c := *o.Capture
	c.Sink = obs.metrics.CountSinkErrors(opened)
	release, err := c.LockSink(ctx, "start")
	if err != nil {
		return nil, err
	}
	d := &daemon{o: o, c: &c, obs: obs, feed: manifest.NewFeed(), release: release}
	if err := d.openManifest(ctx); err != nil {
		_ = release()
		return nil, err
	}
	return d, nil
}

func (d *daemon) openManifest(ctx context.Context) error {
	if err := d.c.ProbeSink(ctx); err != nil {
		return err
	}
	mc, err := manifest.Open(ctx, d.c.Sink, manifest.Breaker{Threshold: d.o.Stream.BreakerThreshold, Window: d.o.Stream.BreakerWindow})
	if err != nil {
		return d.c.NotInitialized(err)
	}
	mc.SetLogger(d.o.Log)
	if err := d.c.CheckOwner(mc.Current()); err != nil {
		return err
	}
	d.obs.recordManifest(mc.Current())
	d.feed.Publish(mc.Current())
	mc.SetObserver(d.seam(d.obs.metrics.Manifest()))
	d.mc = mc
	d.fc = &flush.Committer{Store: d.c.Sink, Manifest: mc, Workers: d.o.Stream.FlushWorkers, Now: time.Now}
	return nil
}

// seam adds the post-commit seam to a committer's observer: every version
// it writes is published to the feed.
func (d *daemon) seam(o manifest.Observer) manifest.Observer {
	o.Committed = d.feed.Publish
	return o
}

// startWatchers starts what watches the stream and what works beside it.
func (d *daemon) startWatchers(pollers, background *stage) {
	o, obs := d.o, d.obs
	every := max(time.Second, min(o.Stream.StandbyInterval, 15*time.Second))
	slot := d.mc.Current().Source.Slot // read here: the stream's goroutine owns the committer from now on
	pollers.Go("source poller", func(ctx context.Context) {
		p := &sourcePoller{log: o.Log, m: obs.metrics, conn: sourceConn{spec: d.c.Source}, slot: slot,
			maxRetained: o.MaxRetainedWAL, event: obs.emit}
		defer p.conn.drop()
		tick(ctx, every, p.poll)
	})
	if o.HeartbeatInterval > 0 {
		pollers.Go("heartbeat", func(ctx context.Context) {
			h := &heartbeat{log: o.Log, m: obs.metrics, conn: sourceConn{spec: d.c.Source}}
			defer h.conn.drop()
			tick(ctx, o.HeartbeatInterval, h.beat)
		})
	}
	poll := o.FeedPoll
	if poll <= 0 {
		poll = DefaultFeedPoll
	}
	pollers.Go("manifest feed", func(ctx context.Context) {
		manifest.Poll(ctx, d.c.Sink, poll, d.feed, nil) // a failed read is the stream's to report
	})
	d.startBackground(background)
}

// startBackground starts the loops and followers beside the stream.
func (d *daemon) startBackground(background *stage) {
	o, obs := d.o, d.obs
	if co := o.Compaction; co.Interval > 0 {
		policy := compact.Policy{
			Tiers:           compact.Tiers{Fanout: co.MinorFanout, MaxBytes: co.MinorMaxBytes},
			MajorDeltaRatio: float64(co.MajorDeltaPercent) / 100,
			MajorMinBytes:   co.MajorMinBytes,
			MaxDeltaFiles:   co.MaxDeltaFiles,
			MajorInterval:   co.MajorInterval,
		}
		l := &compactionLoop{sink: d.c.Sink, every: co.Interval, policy: policy, grace: co.GracePeriod, log: o.Log, m: obs.metrics, done: obs.compacted,
			observer: d.seam(manifest.Observer{}),
			opts: compact.Options{ScratchDir: filepath.Join(o.Stream.StateDir, "compact"), MemoryBytes: co.MemoryBytes,
				TombstoneTTL: co.TombstoneTTL, TargetFileBytes: co.TargetFileBytes, Log: o.Log, Retention: co.Retention, KeepRetired: co.KeepRetired,
				Referenced: co.Referenced, Pinned: func(ctx context.Context) ([]uint64, error) { return refs.Pinned(ctx, d.c.Sink) }}}
		background.Go("compaction", l.run)
	}
	if o.ReconcileInterval > 0 {
		r := &reconciler{spec: d.c.Source, every: o.ReconcileInterval, current: d.feed.Latest, log: o.Log}
		background.Go("reconciler", r.run)
	}
	background.Go("refs", func(ctx context.Context) {
		f := newRefsFollower(d.c.Sink, o.PromotionMode, o.Log)
		_ = d.feed.Follow(ctx, f.follow)
	})
	background.Go("run state", func(ctx context.Context) {
		_ = d.feed.Follow(ctx, func(_ context.Context, m *manifest.Manifest) error {
			obs.recordManifest(m)
			return nil
		})
	})
	for _, f := range o.Followers {
		if m, ok := f.(interface{ SetObserver(catalog.Observer) }); ok {
			m.SetObserver(obs.metrics.Catalog())
		}
		background.Go(f.Name(), func(ctx context.Context) {
			if err := f.Follow(ctx, d.feed); err != nil && ctx.Err() == nil {
				o.Log.Error("a follower of the manifest stopped; the stream goes on", "follower", f.Name(), "err", err)
			}
		})
	}
}

// stream runs the retry loop of sessions.
func (d *daemon) stream(ctx context.Context) error {
	s := &session{c: d.c, opts: d.o.Stream, fc: d.fc, obs: d.obs, setupTO: sessionSetupTimeout}
	l := &retryLoop{policy: d.o.Retry, mc: d.mc, session: s.run, ended: d.obs.sessionEnded, log: d.o.Log}
	return l.run(ctx)
}
