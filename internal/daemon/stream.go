package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/replicate"
)

// sessionSetupTimeout bounds the queries and sign-ins that start a
// replication session.
const sessionSetupTimeout = time.Minute

// RetryPolicy is how the stream retries a session that failed with a
// transient error (cdc.IsTransient: a connection reset, a restarting
// PostgreSQL, a slot still held by our own previous, dying session, a sink
// request that failed after its own retries).
type RetryPolicy struct {
	// InitialBackoff is the wait before the first retry; each further
	// retry waits twice as long, up to MaxBackoff.
	InitialBackoff, MaxBackoff time.Duration
	// MaxAttempts is how many failures in a row are retried; the next one
	// ends the stream with cdc.ErrRetriesExhausted (exit 3). A session that
	// moved the manifest starts the count again.
	MaxAttempts int
}

// Wait is the backoff before retry number attempt (1, 2, ...).
func (r RetryPolicy) Wait(attempt int) time.Duration {
	wait := r.InitialBackoff
	for i := 1; i < attempt && wait < r.MaxBackoff; i++ {
		wait *= 2
	}
	return min(wait, r.MaxBackoff)
}

// resyncer is what the retry loop needs of the manifest: the version it
// knows and a way to read the stored one again (manifest.Committer).
type resyncer interface {
	Current() *manifest.Manifest
	Resync(ctx context.Context) error
}

// retryLoop runs sessions until one returns nil (a stop request, drained),
// fails with a terminal error, or transient failures exhaust the policy.
type retryLoop struct {
	policy  RetryPolicy
	mc      resyncer
	session func(ctx context.Context) error
	ended   func(err error, wait time.Duration, attempt int) // told of every retried failure
	log     *slog.Logger
}

func (l *retryLoop) run(ctx context.Context) error {
	attempt := 0
	for {
		before := l.mc.Current().EndLSN
		err := l.session(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil && errors.Is(err, replicate.ErrUnconfirmed) {
			// Stopping, with everything received durable in the manifest,
			// only the standby status that confirms it failed (the server
			// ended the connection during a long flush): nothing is
			// buffered or lost, and the next start confirms it. This is
			// the clean stop asked for, said loudly, not an exit 1 for a
			// supervisor to restart. Any other failure of the drain is
			// reported as it is.
			l.log.Warn("stopped on request; everything received is durable, but its confirmation to PostgreSQL failed: the next start confirms it", "err", err)
			return nil
		}
		if !cdc.IsTransient(err) || ctx.Err() != nil {
			return err
		}
		if l.mc.Current().EndLSN > before {
			attempt = 0 // the session made progress: this is a new failure
		}
		attempt++
		if attempt > l.policy.MaxAttempts {
			return fmt.Errorf("%w after %d attempts: %w", cdc.ErrRetriesExhausted, l.policy.MaxAttempts, err)
		}
		wait := l.policy.Wait(attempt)
		l.log.Warn("replication session failed; retrying", "err", err, "attempt", attempt, "wait", wait)
		l.ended(err, wait, attempt)
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
		if rerr := l.mc.Resync(ctx); rerr != nil && !errors.Is(rerr, blob.ErrUnavailable) {
			return rerr
		}
	}
}

// session is one replication session's wiring: what it reads from, writes
// to and reports to.
type session struct {
	c       *capture.Capture
	opts    StreamOptions
	fc      *flush.Committer
	obs     *observer
	setupTO time.Duration
}

// run runs one replication connection from the manifest's end LSN:
//  1. connect; check the upstream's identity and the slot against the
//     manifest (design.md §1.2);
//  2. record and publish the tables the capture takes that the manifest
//     lacks (addNewTables), so the stream knows them before their first
//     change;
//  3. open the replication connection and start streaming at the
//     manifest's end LSN;
//  4. run the streaming service until a stop request or an error.
func (s *session) run(ctx context.Context) error {
	m := s.fc.Manifest.Current()
	// Setting up talks to the server before any receive deadline applies:
	// a silent network must fail it, not hang it.
	sctx, cancelSetup := context.WithTimeout(ctx, s.setupTO)
	defer cancelSetup()
	db, err := postgres.Connect(sctx, s.c.Source)
	if err != nil {
		return setupFailed(ctx, err)
	}
	defer db.Close()
	provider, xidRef, err := s.check(sctx, db, m)
	if err != nil {
		return setupFailed(ctx, err)
	}
	// New tables join before the stream starts; the wait for older
	// transactions may outlast the setup timeout.
	if err := addNewTables(ctx, s.c.Finder(db), s.fc.Manifest, s.c.Log); err != nil {
		return err
	}
	repl, serverEnd, receiveTimeout, err := s.startReplication(sctx, db, m)
	if err != nil {
		return setupFailed(ctx, err)
	}
	defer func() {
		// A clean close writes a Terminate message; on a dead connection
		// that must not hold up the next session.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		repl.Close(cctx)
	}()
	s.c.Log.Info("streaming", "slot", m.Source.Slot, "lsn", m.EndLSN, "epoch", m.Epoch, "tables", len(m.Tables), "provider", provider)
	s.obs.streaming(m.Source.Slot, m, string(provider))
	defer s.obs.health.Connected(false)
	svc, err := replicate.New(s.config(db, xidRef, serverEnd, receiveTimeout), replSource{repl}, s.fc, s.c.Log)
	if err != nil {
		return err
	}
	return svc.Run(ctx)
}

// setupFailed marks a setup step that got no answer in time as transient
// (the caller has not been asked to stop).
func setupFailed(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return cdc.Transient(err)
	}
	return err
}

// check reads what the session starts from and refuses what it must not
// stream from: another upstream, a lost, invalidated or advanced slot.
func (s *session) check(ctx context.Context, db *postgres.DB, m *manifest.Manifest) (postgres.Provider, cdc.XID, error) {
	provider, err := db.Provider(ctx, s.c.Provider)
	if err != nil {
		return "", 0, err
	}
	ident, err := db.Identity(ctx)
	if err != nil {
		return "", 0, err
	}
	if err := capture.CheckIdentity(m, ident); err != nil {
		return "", 0, err
	}
	slot, err := db.Slot(ctx, m.Source.Slot)
	if err != nil {
		return "", 0, err
	}
	if err := capture.CheckSlot(m.Source.Slot, slot, m); err != nil {
		return "", 0, err
	}
	xidRef, err := db.CurrentXID(ctx)
	return provider, xidRef, err
}

// startReplication opens the replication connection and starts streaming
// at the manifest's end LSN. It returns where the server is now (a backlog
// up to there is flushed as soon as it is read: replicate.Config.CatchUp)
// and the receive timeout, raised to the server's wal_sender_timeout: a
// live walsender sends something at least every half of it, so shorter
// silence proves nothing.
func (s *session) startReplication(ctx context.Context, db *postgres.DB, m *manifest.Manifest) (*postgres.ReplConn, cdc.LSN, time.Duration, error) {
	receiveTimeout := s.opts.ReceiveTimeout
	if wst, err := db.WALSenderTimeout(ctx); err != nil {
		return nil, 0, 0, err
	} else if wst > receiveTimeout {
		receiveTimeout = wst
	}
	repl, err := postgres.ConnectReplication(ctx, s.c.Source)
	if err != nil {
		return nil, 0, 0, err
	}
	_, serverEnd, err := repl.IdentifySystem(ctx)
	if err == nil {
		err = repl.StartReplication(ctx, m.Source.Slot, m.Source.Publication, m.EndLSN)
	}
	if err != nil {
		repl.Close(context.WithoutCancel(ctx))
		return nil, 0, 0, err
	}
	return repl, serverEnd, receiveTimeout, nil
}

// config is the streaming service's configuration for this session.
func (s *session) config(db *postgres.DB, xidRef cdc.XID, serverEnd cdc.LSN, receiveTimeout time.Duration) replicate.Config {
	o := s.opts
	return replicate.Config{
		Limits:           flush.Limits{Interval: o.FlushInterval, MaxRows: o.FlushMaxRows, MaxBytes: o.FlushMaxBytes},
		StandbyInterval:  o.StandbyInterval,
		DrainTimeout:     o.DrainTimeout,
		StateDir:         filepath.Join(o.StateDir, "stream"),
		MemoryBudget:     o.MemoryBudget,
		XIDRef:           xidRef,
		CatchUp:          serverEnd,
		Rows:             db,
		Columns:          db,
		Chunks:           db,
		ChunkRows:        o.ChunkRows,
		Tables:           s.c.Finder(db),
		DiscoverInterval: o.DiscoverInterval,
		Observer:         s.obs.stream(),
		ReceiveTimeout:   receiveTimeout,
	}
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
		ServerTime:     m.ServerTime,
		ReplyRequested: m.ReplyRequested,
		Data:           m.Data,
	}, nil
}

func (r replSource) SendStatus(ctx context.Context, pos cdc.LSN, reply bool) error {
	return r.c.SendStatus(ctx, pos, reply)
}
