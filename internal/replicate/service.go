package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/pgoutput"
	"github.com/pg-cdc/pg-cdc/internal/txn"
)

// Config tunes the service.
type Config struct {
	Limits          flush.Limits
	StandbyInterval time.Duration
	DrainTimeout    time.Duration
	// StateDir holds spill files of large transactions and spooled delta
	// files; it is scratch space, emptied at start.
	StateDir     string
	MemoryBudget int64
	// XIDRef is a recent 64-bit transaction id of the source, used to extend
	// the 32-bit xids pgoutput sends.
	XIDRef cdc.XID
	// CatchUp is the server's WAL position when the session started
	// (IDENTIFY_SYSTEM), or zero. The first time the stream reaches it (a
	// transaction ending there or later, or a keepalive saying the server
	// has sent everything before it), the epoch is flushed at once instead
	// of waiting out Limits.Interval: a backlog read at start-up becomes
	// durable and confirmed as soon as it has been read. Once per session,
	// so a live stream keeps its batching.
	CatchUp cdc.LSN
	// Rows reads rows from the source to recover TOAST values a key-changing
	// UPDATE did not send (optional).
	Rows RowReader
	// Columns describes columns a Relation message adds (optional: without
	// it an added column is an unsupported schema change).
	Columns ColumnDescriber
	// Observer receives metrics and health signals (optional).
	Observer Observer
	// Chunks reads the chunks of tables whose snapshot is not complete
	// (backfill.go); ChunkRows is the chunk size (0: DefaultChunkRows).
	Chunks    ChunkSource
	ChunkRows int
	// Tables finds tables created in a watched schema while the session
	// runs, every DiscoverInterval (optional; zero: never).
	Tables           TableSource
	DiscoverInterval time.Duration
	// ReceiveTimeout ends the session with ErrSilent when nothing has
	// arrived for this long (zero: never). Half-way through, the service
	// asks the server for a reply, which a live walsender sends at once; so
	// only a dead or blackholed connection stays silent.
	ReceiveTimeout time.Duration
}

// ErrSilent: the replication connection stayed silent past
// Config.ReceiveTimeout, even though a reply was asked for. A new session
// is the remedy (it is transient); nothing received since the last flush
// was confirmed.
var ErrSilent = cdc.NewTransient("replication connection silent")

// maxWait bounds one receive so that stop requests and timers are noticed.
const maxWait = 200 * time.Millisecond

// reportEvery is how often the loop updates its gauges and beats.
const reportEvery = 100 * time.Millisecond

// Service runs one replication session: receive → route → flush →
// confirm. It owns the loop's state (the open epoch and transaction, the
// positions, the timers); the binder owns the schema state and the
// backfills their tracking and the chunk worker.
type Service struct {
	cfg       Config
	src       Source
	committer *flush.Committer
	log       *slog.Logger
	now       func() time.Time

	dec    *pgoutput.Decoder
	asm    *txn.Assembler
	binder *binder
	bf     *backfills
	toast  *toastRecovery

	epoch     *flush.Epoch
	cur       *openTxn // the non-streamed transaction being received
	streamTop uint32   // top-level xid of the stream chunk being received
	xidRef    cdc.XID

	// Positions: the manifest's end LSN (the only position ever
	// confirmed), the server's WAL end from keepalives, the end LSN of the
	// last commit received, and the last position sent as flushed.
	durable, serverEnd, receivedLSN, confirmed cdc.LSN
	// serverEndAt is when the server reported serverEnd in a keepalive (an
	// idle advance's freshness); a control message's position keeps the
	// older time, which only understates freshness.
	serverEndAt   time.Time
	catchUp       cdc.LSN // Config.CatchUp until the stream reaches it; then zero
	backlog       bool    // a transaction committed before catchUp was received
	oldestPending time.Time

	lastStatus time.Time
	lastIdle   time.Time
	heardAt    time.Time // last message received, or the end of the last pause in reading
	pingedAt   time.Time // when a reply was requested since heardAt, or zero
	reportedAt time.Time // when report last ran

	obs    Observer
	events map[eventKey]Counter
}

type openTxn struct {
	meta cdc.TxnMeta
	seq  int64
}

// New builds a service positioned at the committer's manifest. It starts
// nothing.
func New(cfg Config, src Source, committer *flush.Committer, log *slog.Logger) (*Service, error) {
	m := committer.Manifest.Current()
	b, err := newBinder(m, committer.Manifest.Current, cfg.Columns, log)
	if err != nil {
		return nil, err
	}
	s := &Service{
		cfg: cfg, src: src, committer: committer, log: log, now: time.Now,
		dec:     pgoutput.NewDecoder(),
		asm:     txn.NewAssembler(filepath.Join(cfg.StateDir, "spill"), cfg.MemoryBudget),
		binder:  b,
		toast:   &toastRecovery{rows: cfg.Rows, log: log, warned: map[string]bool{}},
		durable: m.EndLSN,
		xidRef:  cfg.XIDRef,
		catchUp: cfg.CatchUp,
		obs:     cfg.Observer.withDefaults(),
		events:  map[eventKey]Counter{},
	}
	if err := s.newBackfills(m); err != nil {
		return nil, err
	}
	return s, nil
}

// Run streams until ctx is cancelled (a stop request) or an error occurs.
// On a stop request it finishes the transaction being received, flushes
// what is buffered within DrainTimeout, confirms it and returns nil.
func (s *Service) Run(ctx context.Context) error {
	for _, dir := range []string{"spill", "spool"} {
		if err := os.RemoveAll(filepath.Join(s.cfg.StateDir, dir)); err != nil {
			return fmt.Errorf("clear state dir: %w", err)
		}
	}
	defer func() {
		if s.epoch != nil {
			s.epoch.Discard()
		}
		_ = s.asm.Reset()
	}()
	// The chunk worker stops (and is waited for) before the epoch is
	// discarded: it never outlives the session.
	defer s.startBackfills(ctx)()

	// I/O runs on a context that outlives the stop request, so that the
	// drain can still read, write and confirm.
	ioCtx := context.WithoutCancel(ctx)
	s.heardAt = s.now()
	var (
		stopBy time.Time
		rctx   receiveCtx
		// now is read once after each message for the timers that follow
		// it and the next receive's deadline: the clock is several percent
		// of the CPU per message when each of them reads it.
		now = s.now()
	)
	defer rctx.stop()
	for {
		if ctx.Err() != nil {
			if stopBy.IsZero() {
				stopBy = s.now().Add(s.cfg.DrainTimeout)
				s.log.Info("stop requested; draining", "lsn", s.durable)
			}
			if s.cur == nil {
				return s.drain(ioCtx)
			}
			if s.now().After(stopBy) {
				return fmt.Errorf("drain: transaction %d still open after %s; nothing from it was confirmed and it will be replayed", s.cur.meta.XID, s.cfg.DrainTimeout)
			}
		}
		if err := s.bf.h.err(); err != nil {
			return err
		}
		if err := s.receive(ioCtx, rctx.get(ioCtx, s.nextWake(now))); err != nil {
			return err
		}
		if err := s.flushIfDue(ioCtx); err != nil {
			return err
		}
		now = s.now()
		if err := s.onTimers(ioCtx, now, ctx.Err() == nil); err != nil {
			return err
		}
	}
}

// receive takes the next message (or the receive deadline) and handles it.
func (s *Service) receive(ctx, rctx context.Context) error {
	msg, err := s.src.Receive(rctx)
	switch {
	case err == nil:
		s.heardAt, s.pingedAt = s.now(), time.Time{}
		return s.handle(ctx, msg)
	case errors.Is(err, context.DeadlineExceeded):
		return s.checkSilence(ctx)
	default:
		return fmt.Errorf("receive: %w", err)
	}
}

// flushIfDue flushes the epoch at a transaction boundary when a limit is
// reached, or when the stream has just caught up with a start-up backlog.
func (s *Service) flushIfDue(ctx context.Context) error {
	if s.cur != nil {
		return nil
	}
	caughtUp := s.caughtUp()
	if s.epoch == nil {
		return nil
	}
	reason := flush.Due(s.cfg.Limits, s.epoch.Pending(), s.now())
	if reason == flush.NotDue && caughtUp && s.backlog && s.epoch.Pending().Txns > 0 {
		reason = flush.DueCaughtUp
	}
	if reason == flush.NotDue {
		return nil
	}
	return s.flush(ctx, reason)
}

// onTimers runs what is due at now: an idle advance (not once a stop is
// requested: the drain confirms what it flushed), the standby status, the
// gauges.
func (s *Service) onTimers(ctx context.Context, now time.Time, idle bool) error {
	if idle {
		if err := s.maybeIdleAdvance(ctx, now); err != nil {
			return err
		}
	}
	if now.Sub(s.lastStatus) >= s.cfg.StandbyInterval {
		if err := s.sendStatus(ctx, false); err != nil {
			return err
		}
	}
	if now.Sub(s.reportedAt) >= reportEvery {
		// Gauges and the liveness beat cost a lock and a dozen atomic
		// stores: not once per message while a backlog drains.
		s.reportedAt = now
		s.report()
	}
	return nil
}

// checkSilence asks for a reply half-way through Config.ReceiveTimeout and
// gives up at its end.
func (s *Service) checkSilence(ctx context.Context) error {
	if s.cfg.ReceiveTimeout <= 0 {
		return nil
	}
	if s.heardAt.IsZero() {
		s.heardAt = s.now()
	}
	now := s.now()
	quiet := now.Sub(s.heardAt)
	switch {
	case quiet >= s.cfg.ReceiveTimeout && !s.pingedAt.IsZero():
		return fmt.Errorf("%w: nothing received for %s, not even the reply asked for %s ago",
			ErrSilent, quiet.Round(time.Millisecond), now.Sub(s.pingedAt).Round(time.Millisecond))
	case quiet >= s.cfg.ReceiveTimeout/2 && s.pingedAt.IsZero():
		s.pingedAt = now
		return s.sendStatus(ctx, true)
	}
	return nil
}

// silenceDeadline is when checkSilence next has something to do, or zero.
func (s *Service) silenceDeadline() time.Time {
	if s.cfg.ReceiveTimeout <= 0 || s.heardAt.IsZero() {
		return time.Time{}
	}
	if s.pingedAt.IsZero() {
		return s.heardAt.Add(s.cfg.ReceiveTimeout / 2)
	}
	return s.heardAt.Add(s.cfg.ReceiveTimeout)
}

// receiveCtx hands out the context of a receive. One context serves until
// it expires or a timer falls due before its deadline: a context (and its
// timer) per message cost several percent of the CPU while draining a
// backlog (issue 3). Waking earlier than needed only costs one more turn of
// the loop.
type receiveCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
	wake   time.Time
}

func (r *receiveCtx) get(parent context.Context, wake time.Time) context.Context {
	if r.ctx == nil || r.ctx.Err() != nil || wake.Before(r.wake) {
		r.stop()
		r.ctx, r.cancel = context.WithDeadline(parent, wake)
		r.wake = wake
	}
	return r.ctx
}

func (r *receiveCtx) stop() {
	if r.cancel != nil {
		r.cancel()
	}
}

// received notes a committed transaction for the catch-up flush: only a
// transaction that committed before Config.CatchUp is start-up backlog worth
// flushing early; one that committed after it is live traffic and keeps
// the flush interval's batching.
func (s *Service) received(m cdc.TxnMeta) {
	if s.catchUp != 0 && m.CommitLSN < s.catchUp {
		s.backlog = true
	}
	s.receivedLSN = max(s.receivedLSN, m.EndLSN)
	if s.oldestPending.IsZero() {
		s.oldestPending = m.CommitTime
	}
}

// caughtUp reports, once per session, that the stream has just reached
// Config.CatchUp. The caller asks at transaction boundaries. Every
// transaction that committed before a keepalive's position was sent before
// that keepalive.
func (s *Service) caughtUp() bool {
	if s.catchUp == 0 || (s.serverEnd < s.catchUp && (s.epoch == nil || s.epoch.EndLSN() < s.catchUp)) {
		return false
	}
	s.catchUp = 0
	return true
}

func (s *Service) nextWake(now time.Time) time.Time {
	wake := now.Add(maxWait)
	if t := s.lastStatus.Add(s.cfg.StandbyInterval); t.Before(wake) {
		wake = t
	}
	if s.epoch != nil {
		if t := flush.Deadline(s.cfg.Limits, s.epoch.Pending()); !t.IsZero() && t.Before(wake) {
			wake = t
		}
	}
	if t := s.silenceDeadline(); !t.IsZero() && t.Before(wake) {
		wake = t
	}
	if !wake.After(now) {
		wake = now.Add(time.Millisecond)
	}
	return wake
}

func (s *Service) drain(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, s.cfg.DrainTimeout)
	defer cancel()
	if s.epoch != nil && !s.epoch.Empty() {
		if err := s.flush(dctx, "shutdown"); err != nil {
			return fmt.Errorf("drain: %w", err)
		}
	}
	if err := s.sendStatus(dctx, false); err != nil {
		return fmt.Errorf("drain: final standby status: %w", err)
	}
	s.log.Info("stopped cleanly", "lsn", s.durable, "epoch", s.committer.Manifest.Current().Epoch)
	return nil
}

func (s *Service) flush(ctx context.Context, reason flush.Reason) error {
	e := s.epoch
	s.epoch = nil
	started := s.now()
	p := e.Pending()
	res, err := s.committer.Flush(ctx, e)
	if err != nil {
		return err
	}
	took := s.now().Sub(started)
	s.heardAt = s.now() // the server is not to blame for the time we did not read
	if s.serverEnd > res.Durable.EndLSN {
		// The server had more to send while the loop was not reading.
		s.obs.Stalled(took)
	}
	s.obs.Flushed(FlushStats{Rows: res.Rows, Bytes: res.Bytes, Adjusted: res.Adjusted, Duration: took,
		Epoch: res.Epoch, EndLSN: res.Durable.EndLSN, Txns: p.Txns, Tables: res.Tables, Reason: string(reason)})
	for _, ns := range e.Schemas() {
		s.obs.SchemaChanged(ns.Table)
		s.log.Info("schema version committed", "table", ns.Table.String(), "schema_version", ns.Version, "epoch", res.Epoch)
	}
	s.oldestPending = time.Time{}
	s.setDurable(res.Durable.EndLSN)
	s.log.Info("flushed epoch", "epoch", res.Epoch, "reason", string(reason), "txns", p.Txns,
		"rows", res.Rows, "tables", res.Tables, "bytes", res.Bytes, "lsn", s.durable,
		"duration_ms", took.Milliseconds())
	return s.sendStatus(ctx, false)
}

func (s *Service) maybeIdleAdvance(ctx context.Context, now time.Time) error {
	if now.Sub(s.lastIdle) < s.cfg.StandbyInterval {
		return nil
	}
	pos, ok := flush.IdleAdvance(flush.IdleState{Durable: s.durable, ServerEnd: s.serverEnd, Quiet: s.quiet()})
	if !ok {
		return nil
	}
	s.lastIdle = s.now()
	if err := s.committer.AdvanceIdle(ctx, pos, s.serverEndAt); err != nil {
		return err
	}
	s.log.Debug("idle advance", "lsn", pos)
	s.setDurable(pos)
	return s.sendStatus(ctx, false)
}

// quiet reports whether nothing is buffered, spilled or in flight: no
// transaction is open, the epoch is empty and no streamed transaction is
// pending.
func (s *Service) quiet() bool {
	return s.cur == nil && s.streamTop == 0 && (s.epoch == nil || s.epoch.Empty()) && !s.asm.Pending()
}

// ErrUnconfirmed is the class of a session that ended with everything it
// received durable in the manifest and only the standby status confirming
// it unsent (the connection broke): nothing is lost and nothing is
// buffered; the next session confirms it. The error keeps its own class
// (transient) too.
var ErrUnconfirmed = errors.New("everything received is durable; only its confirmation was not sent")

// unconfirmedError marks a failed status send of a quiet session.
type unconfirmedError struct{ error }

func (e unconfirmedError) Is(target error) bool { return target == ErrUnconfirmed }
func (e unconfirmedError) Unwrap() error        { return e.error }

func (s *Service) sendStatus(ctx context.Context, reply bool) error {
	if err := s.src.SendStatus(ctx, s.durable, reply); err != nil {
		err = fmt.Errorf("send standby status: %w", err)
		if s.quiet() {
			return unconfirmedError{err}
		}
		return err
	}
	s.confirmed = s.durable
	s.lastStatus = s.now()
	return nil
}

// setDurable moves the durable LSN (never backwards) and tells the observer.
func (s *Service) setDurable(lsn cdc.LSN) {
	s.durable = max(s.durable, lsn)
	s.obs.Durable(s.durable, s.now())
}
