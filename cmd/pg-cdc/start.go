package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/replicate"
)

// retryWait is the backoff before retry number attempt (1, 2, ...) of a
// session that failed with a transient error (connection resets, a
// restarting PostgreSQL, a slot still held by our own previous, dying
// session, a sink request that failed after its own retries):
// retry.initial_backoff doubled per retry, at most retry.max_backoff. At
// most retry.max_attempts retries in a row; a session that made progress
// resets the count.
func retryWait(r config.RetryConfig, attempt int) time.Duration {
	wait := r.InitialBackoff
	for i := 1; i < attempt && wait < r.MaxBackoff; i++ {
		wait *= 2
	}
	return min(wait, r.MaxBackoff)
}

// sessionSetupTimeout bounds the queries and sign-ins that start a
// replication session.
const sessionSetupTimeout = time.Minute

func newStartCmd(configPath *string) *cobra.Command {
	return &cobra.Command{
		Use:   "start",
		Short: "Stream changes from the slot into the sink until stopped (SIGTERM/SIGINT)",
		Args:  cobra.NoArgs,
		RunE:  withSignals(configPath, runStart),
	}
}

func runStart(ctx context.Context, cfg config.Config, log *slog.Logger, _ *cobra.Command) (err error) {
	obs, err := startObservability(ctx, cfg, log)
	if err != nil {
		return err
	}
	var committer *manifest.Committer
	defer func() {
		// Everything that reports to the run artifacts has stopped (the
		// stream, compaction, the pollers) before they are closed.
		obs.stop()
		var last *manifest.Manifest
		if committer != nil {
			last = committer.Current()
		}
		obs.finish(err, last)
	}()
	opened, err := openSinkWith(ctx, cfg, func() { obs.metrics.SinkAttemptFailed("any") })
	if err != nil {
		return err
	}
	store := obs.metrics.CountSinkErrors(opened)
	release, err := lockSink(ctx, store, "start")
	if err != nil {
		return err
	}
	defer release()
	if err := probeSink(ctx, store, cfg, log); err != nil {
		return err
	}
	committer, err = manifest.Open(ctx, store, manifest.Breaker{
		Threshold: cfg.Flush.CASBreakerThreshold,
		Window:    cfg.Flush.CASBreakerWindow,
	})
	if err != nil {
		return notInitialized(err, cfg)
	}
	if err := checkOwner(committer.Current(), cfg); err != nil {
		return err
	}
	obs.recordManifest(committer.Current())
	committer.SetObserver(obs.metrics.Manifest())
	fc := &flush.Committer{Store: store, Manifest: committer, Workers: cfg.Flush.ParallelWorkers, Now: time.Now}

	if cfg.Compaction.Interval > 0 {
		// Compaction runs beside the stream on its own manifest committer;
		// it stops with the stream and is waited for.
		cctx, stopCompaction := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			runCompactionLoop(cctx, store, cfg, log, obs.metrics, obs.compacted)
		}()
		defer func() {
			stopCompaction()
			<-done
		}()
	}

	spec, err := sourceConn(ctx, cfg)
	if err != nil {
		return err
	}
	obs.watchSource(cfg, spec, committer.Current().Source.Slot)
	if every := cfg.Schema.ReconcileInterval; every > 0 {
		rctx, stopReconciler := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			runReconciler(rctx, spec, every, committer.Current, log)
		}()
		defer func() {
			stopReconciler()
			<-done
		}()
	}
	obs.ready()
	attempt := 0
	for {
		before := committer.Current().EndLSN
		err := session(ctx, cfg, spec, log, fc, obs)
		if err == nil {
			return nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return err
		}
		if committer.Current().EndLSN > before {
			attempt = 0 // the session made progress: this is a new failure
		}
		attempt++
		if attempt > cfg.Retry.MaxAttempts {
			return fmt.Errorf("%w after %d attempts: %w", cdc.ErrRetriesExhausted, cfg.Retry.MaxAttempts, err)
		}
		wait := retryWait(cfg.Retry, attempt)
		log.Warn("replication session failed; retrying", "err", err, "attempt", attempt, "wait", wait)
		obs.sessionEnded(err, wait, attempt)
		select {
		case <-ctx.Done():
			return nil // stopped while waiting: nothing is buffered, everything durable is confirmed
		case <-time.After(wait):
		}
		// Start the next session from what is stored: a manifest write may
		// have landed without this process learning it (a sink failure),
		// or another writer may have taken the stream over while this one
		// was cut off (paused, partitioned). Checked against a stale
		// manifest, the slot such a writer moved on would read as "ahead"
		// (exit 11) instead of the takeover it is (exit 13).
		if rerr := committer.Resync(ctx); rerr != nil && !errors.Is(rerr, blob.ErrUnavailable) {
			return rerr
		}
	}
}

// session runs one replication connection from the manifest's end LSN.
func session(ctx context.Context, cfg config.Config, spec postgres.ConnSpec, log *slog.Logger, fc *flush.Committer, obs *observability) error {
	m := fc.Manifest.Current()
	// Setting up talks to the server before any receive deadline applies:
	// a silent network must fail it, not hang it.
	sctx, cancelSetup := context.WithTimeout(ctx, sessionSetupTimeout)
	defer cancelSetup()
	db, err := postgres.Connect(sctx, spec)
	if err != nil {
		return err
	}
	defer db.Close()
	provider, err := db.Provider(sctx, postgres.Provider(cfg.Source.Postgres.Provider))
	if err != nil {
		return err
	}
	ident, err := db.Identity(sctx)
	if err != nil {
		return err
	}
	if err := checkIdentity(m, ident); err != nil {
		return err
	}
	slotName := m.Source.Slot
	slot, err := db.Slot(sctx, slotName)
	if err != nil {
		return err
	}
	if err := checkSlot(slotName, slot, m); err != nil {
		return err
	}
	xidRef, err := db.CurrentXID(sctx)
	if err != nil {
		return err
	}
	// New tables join before the stream starts, so it knows them before
	// their first change; the wait for older transactions may outlast the
	// setup timeout.
	if err := addNewTables(ctx, cfg, db, fc.Manifest, log); err != nil {
		return err
	}

	repl, err := postgres.ConnectReplication(sctx, spec)
	if err != nil {
		return err
	}
	defer func() {
		// A clean close writes a Terminate message; on a dead connection
		// that must not hold up the next session.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		repl.Close(cctx)
	}()
	// Where the server is now: a backlog up to here is flushed as soon as it
	// has been read (replicate.Config.CatchUp).
	_, serverEnd, err := repl.IdentifySystem(sctx)
	if err != nil {
		return err
	}
	// A live walsender sends something at least every half of its
	// wal_sender_timeout, so silence shorter than that proves nothing.
	receiveTimeout := cfg.Replication.ReceiveTimeout
	if wst, err := db.WALSenderTimeout(sctx); err != nil {
		return err
	} else if wst > receiveTimeout {
		receiveTimeout = wst
	}
	if err := repl.StartReplication(sctx, slotName, m.Source.Publication, m.EndLSN); err != nil {
		return err
	}
	log.Info("streaming", "slot", slotName, "lsn", m.EndLSN, "epoch", m.Epoch, "tables", len(m.Tables), "provider", provider)
	obs.streaming(slotName, m, string(provider))
	defer obs.health.Connected(false)

	svc, err := replicate.New(replicate.Config{
		Limits: flush.Limits{
			Interval: cfg.Flush.Interval,
			MaxRows:  int64(cfg.Flush.MaxRows),
			MaxBytes: cfg.Flush.MaxBytes,
		},
		StandbyInterval:  cfg.Replication.StandbyInterval,
		DrainTimeout:     cfg.Flush.DrainTimeout,
		StateDir:         filepath.Join(cfg.State.Path, "stream"),
		MemoryBudget:     cfg.Replication.MemoryBudgetBytes,
		XIDRef:           xidRef,
		CatchUp:          serverEnd,
		Rows:             db,
		Columns:          db,
		Chunks:           db,
		ChunkRows:        cfg.Backfill.ChunkRows,
		Tables:           tableFinder{cfg: cfg, db: db, log: log},
		DiscoverInterval: cfg.Backfill.DiscoverInterval,
		Observer:         obs.replicateObserver(fc.Manifest.Current),
		ReceiveTimeout:   receiveTimeout,
	}, replSource{repl}, fc, log)
	if err != nil {
		return err
	}
	return svc.Run(ctx)
}

// checkSlot enforces DESIGN §1 rule 5 before streaming: a missing or
// invalidated slot, or one confirmed past the manifest, means changes are
// gone; that is never a restart point.
func checkSlot(name string, slot postgres.SlotInfo, m *manifest.Manifest) error {
	rebuild := "the changes since the manifest's end LSN are gone: run '" + rebuildCommand + "' (a new slot, every table copied into a new generation, validated, then switched in one manifest write; readers keep the current data until then), then 'pg-cdc start'"
	switch {
	case !slot.Exists:
		return &cdc.Error{Class: cdc.ErrSlotLost, Msg: fmt.Sprintf("replication slot %q does not exist", name), Hint: rebuild}
	case slot.WALStatus == "lost":
		return &cdc.Error{Class: cdc.ErrSlotLost, Msg: fmt.Sprintf("replication slot %q is invalidated (wal_status lost)", name), Hint: rebuild}
	case slot.ConfirmedFlushLSN > m.EndLSN:
		return &cdc.Error{Class: cdc.ErrSlotAhead,
			Msg:  fmt.Sprintf("replication slot %q is confirmed at %s, past the manifest's end LSN %s", name, slot.ConfirmedFlushLSN, m.EndLSN),
			Hint: "another consumer used the slot or it was advanced by hand; " + rebuild}
	case slot.Active:
		return &slotBusyError{name: name, pid: slot.ActivePID}
	}
	return nil
}

// slotBusyError is transient: after a crash, PostgreSQL keeps the slot
// active until it notices the old connection is gone.
type slotBusyError struct {
	name string
	pid  int32
}

func (e *slotBusyError) Error() string {
	return fmt.Sprintf("replication slot %q is in use by PID %d", e.name, e.pid)
}

// retryable: errors a new session may get past. A sink that failed a
// request after its own retries is one (the session restarts from the
// manifest, so nothing is lost); a *cdc.Error never is.
func retryable(err error) bool {
	var busy *slotBusyError
	var terminal *cdc.Error
	if errors.As(err, &terminal) {
		return false
	}
	// A deadline exceeded is a session setup that got no answer in time
	// (the caller has already ruled out a stop request).
	return errors.As(err, &busy) || errors.Is(err, blob.ErrUnavailable) || errors.Is(err, replicate.ErrSilent) ||
		errors.Is(err, context.DeadlineExceeded) || postgres.IsTransient(err)
}

// replSource adapts the postgres replication connection to the service's
// Source port.
type replSource struct{ c *postgres.ReplConn }

func (r replSource) Receive(ctx context.Context) (replicate.Message, error) {
	m, err := r.c.Receive(ctx)
	if err != nil {
		return replicate.Message{}, err
	}
	return replicate.Message{
		Keepalive:      m.Kind == postgres.Keepalive,
		ServerWALEnd:   m.ServerWALEnd,
		ReplyRequested: m.ReplyRequested,
		Data:           m.Data,
	}, nil
}

func (r replSource) SendStatus(ctx context.Context, pos cdc.LSN, reply bool) error {
	return r.c.SendStatus(ctx, pos, reply)
}

// checkOwner refuses a sink whose manifest was built through another slot or
// publication than the config names: two streamers on one storage path
// would each write epochs the other never sees. The database itself is
// checked against the manifest once connected (checkIdentity).
func checkOwner(m *manifest.Manifest, cfg config.Config) error {
	src := m.Source
	if src.Slot == cfg.Replication.Slot && src.Publication == cfg.Replication.Publication {
		return nil
	}
	return &cdc.Error{
		Class: cdc.ErrUpstreamMismatch,
		Msg: fmt.Sprintf("the sink %s belongs to slot %q and publication %q of database %q (system %s), but the config names slot %q and publication %q",
			sinkName(cfg), src.Slot, src.Publication, src.Database, src.SystemIdentifier, cfg.Replication.Slot, cfg.Replication.Publication),
		Hint: "another pg-cdc owns this storage path: give this one its own storage path (or prefix), or fix replication.slot and replication.publication",
	}
}
