package manifest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Breaker limits how fast CAS conflicts may come before the committer gives
// up: conflicts faster than Threshold per Window mean two writers fight over
// one prefix (design.md §3), and retrying would only hide it.
type Breaker struct {
	Threshold int
	Window    time.Duration
}

// DefaultBreaker is used when the caller sets none.
var DefaultBreaker = Breaker{Threshold: 5, Window: time.Minute}

// maxAttempts bounds one Commit's retry loop independently of the breaker.
const maxAttempts = 20

// Committer owns the writer's view of the manifest and commits mutations to
// it with compare-and-swap. It is not safe for concurrent use: one goroutine
// (the streamer's loop, or compaction) drives it.
type Committer struct {
	store   blob.Conditional
	breaker Breaker
	now     func() time.Time

	current   *Manifest
	version   blob.Version
	conflicts []time.Time
	rival     func(mine, theirs *Manifest) bool

	writer string // this process's identity (NewWriterID)
	seq    uint64 // attempts so far, for CommitStamp

	obs Observer

	// The history log (log.go): raw is current's stored bytes, the base of
	// the next version's diff; logState and pending say whether current is
	// readable from the log.
	log      *slog.Logger
	raw      []byte
	rawDoc   *doc // raw's structural index, kept for the next diff; nil: not built
	logState logState
	pending  *pendingWrite
}

// SetLogger sets where log write failures are reported (at warn; they never
// fail a commit). The default discards them.
func (c *Committer) SetLogger(l *slog.Logger) {
	if l == nil {
		l = discard
	}
	c.log = l
}

var discard = slog.New(slog.DiscardHandler)

// Observer is told about conflicts (metrics). Nil fields are skipped.
type Observer struct {
	// ConflictResolved: a conditional write lost to another writer, the
	// manifest was re-read and the mutation is being applied to it again.
	ConflictResolved func()
	// Tripped: Commit stopped for good, by the breaker or because another
	// process took the stream over.
	Tripped func()
	// Committed: a version this committer wrote is stored (the post-commit
	// seam: a Feed's Publish). Called on the committing goroutine, so it
	// must return at once; it must not modify the manifest.
	Committed func(*Manifest)
}

func (c *Committer) committed(m *Manifest) {
	if c.obs.Committed != nil {
		c.obs.Committed(m)
	}
}

// SetObserver installs o; call it before the first Commit.
func (c *Committer) SetObserver(o Observer) { c.obs = o }

func (c *Committer) tripped(err error) error {
	if c.obs.Tripped != nil && errors.Is(err, cdc.ErrCASBreaker) {
		c.obs.Tripped()
	}
	return err
}

// NewWriterID returns an identity for one committer: host, PID and a random
// part, so that two processes (or one restarted) never share one.
func NewWriterID() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Writer returns the committer's identity, as it appears in the manifest.
func (c *Committer) Writer() string { return c.writer }

// ErrSuperseded is the class of the error Commit returns when another
// process moved the stream since this committer last read the manifest:
// merging this writer's epoch on top would mix two lineages of epochs.
var ErrSuperseded = errors.New("another writer took over the stream")

// StreamMoved is the streamer's rival test: a conflict counts toward the
// breaker only when the other writer moved the stream position (epoch or end
// LSN), which only another streamer does. Compaction and reconcile commits
// also conflict with the streamer, as often as they run, and are expected.
func StreamMoved(mine, theirs *Manifest) bool {
	return theirs.Epoch != mine.Epoch || theirs.EndLSN != mine.EndLSN
}

// SetRival replaces the test that decides whether a conflict with the
// manifest another writer wrote counts toward the breaker (StreamMoved by
// default). Conflicts that do not count are still bounded per Commit.
func (c *Committer) SetRival(rival func(mine, theirs *Manifest) bool) { c.rival = rival }

// Load reads the manifest from the store. A missing manifest gives an error
// matching cdc.ErrNotInitialized.
func Load(ctx context.Context, store blob.Conditional) (*Manifest, blob.Version, error) {
	m, version, _, err := load(ctx, store)
	return m, version, err
}

// load is Load that also returns the stored bytes.
func load(ctx context.Context, store blob.Conditional) (*Manifest, blob.Version, []byte, error) {
	data, version, err := store.ReadVersion(ctx, Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, "", nil, fmt.Errorf("read manifest %s: %w", Key, cdc.ErrNotInitialized)
	}
	if err != nil {
		return nil, "", nil, fmt.Errorf("read manifest %s: %w", Key, err)
	}
	m, err := Decode(data)
	if err != nil {
		return nil, "", nil, err
	}
	return m, version, data, nil
}

// learn positions the committer on a version it read. A version other than
// its current one is checked in the log before the next commit builds on it.
func (c *Committer) learn(m *Manifest, v blob.Version, raw []byte) {
	same := c.current != nil && m.Version != 0 && m.Version == c.current.Version
	c.current, c.version, c.raw = m, v, raw
	if !same {
		c.rawDoc = nil
		c.logState, c.pending = logUnknown, nil
	}
}

// Create writes the first manifest. It fails with blob.ErrPrecondition when a
// manifest already exists: init never overwrites one. Its checkpoint starts
// the history log (a failure to write it is retried by the first Commit).
func Create(ctx context.Context, store blob.Conditional, m *Manifest, now time.Time) (*Committer, error) {
	m.FormatVersion = FormatVersion
	m.Version = 1
	m.CommittedAt = now.UTC()
	data, err := m.Encode()
	if err != nil {
		return nil, err
	}
	v, err := store.PutIf(ctx, Key, data, "")
	if err != nil {
		return nil, fmt.Errorf("create manifest: %w", err)
	}
	c := &Committer{store: store, breaker: DefaultBreaker, now: time.Now, current: m, version: v, rival: StreamMoved, writer: NewWriterID(), log: discard, raw: data}
	c.record(ctx, nil, nil, nil, m, data)
	return c, nil
}

// Open loads the manifest and returns a committer positioned on it.
func Open(ctx context.Context, store blob.Conditional, breaker Breaker) (*Committer, error) {
	m, v, raw, err := load(ctx, store)
	if err != nil {
		return nil, err
	}
	if breaker.Threshold <= 0 {
		breaker = DefaultBreaker
	}
	return &Committer{store: store, breaker: breaker, now: time.Now, current: m, version: v, rival: StreamMoved, writer: NewWriterID(), log: discard, raw: raw}, nil
}

// Current returns the last manifest this committer read or wrote. Callers
// must not modify it.
func (c *Committer) Current() *Manifest { return c.current }

// Commit applies mutate to a copy of the current manifest and writes it with
// compare-and-swap. On a conflict it re-reads the manifest and applies mutate
// again to the fresh copy, so mutations must be expressed as monotonic edits
// ("add this delta", "end LSN = max(end LSN, x)") rather than as overwrites
// of a remembered state.
//
// Every write carries a CommitStamp. When a write's outcome is unknown (a
// conflict, or an error such as a lost response after the store applied
// it), the re-read manifest tells: if it carries this write's stamp, the
// write landed and Commit returns it instead of applying mutate twice.
//
// A conflict with a writer that moved the stream (StreamMoved, by default)
// since this committer last read is another streamer: when it names
// another Writer than the one this committer read, Commit fails at once
// with an error matching cdc.ErrCASBreaker and ErrSuperseded; otherwise
// such conflicts coming faster than the breaker allows fail the same way.
//
// After the compare-and-swap, before it returns (and before Observer.Committed),
// Commit writes the version's history log entry (log.go): a diff from the
// previous version, and a checkpoint every CheckpointEvery versions or when
// the previous version is not known to be readable. A log write that fails is
// logged (SetLogger) and never fails the commit.
func (c *Committer) Commit(ctx context.Context, mutate func(*Manifest) error) (*Manifest, error) {
	for attempt := 1; ; attempt++ {
		next := c.current.Clone()
		if err := mutate(next); err != nil {
			return nil, err
		}
		next.CommittedAt = c.now().UTC()
		next.Version = c.current.Version + 1
		if StreamMoved(c.current, next) {
			next.Writer = c.writer
		}
		c.seq++
		stamp := CommitStamp{Writer: c.writer, Seq: c.seq}
		next.Commit = &stamp
		data, err := next.Encode()
		if err != nil {
			return nil, err
		}
		next.encodedBytes = len(data)
		v, putErr := c.store.PutIf(ctx, Key, data, c.version)
		if putErr == nil {
			prev, prevRaw, prevDoc := c.current, c.raw, c.rawDoc
			c.current, c.version, c.raw, c.rawDoc = next, v, data, nil
			c.record(ctx, prev, prevRaw, prevDoc, next, data)
			c.committed(next)
			return next, nil
		}
		fresh, fv, freshRaw, err := load(ctx, c.store)
		if err != nil {
			if !errors.Is(putErr, blob.ErrPrecondition) {
				return nil, fmt.Errorf("commit manifest: %w: %w", blob.ErrUnavailable, putErr)
			}
			return nil, fmt.Errorf("commit manifest: re-read after conflict: %w: %w", blob.ErrUnavailable, err)
		}
		if fresh.Commit != nil && *fresh.Commit == stamp {
			// The store applied the write but its answer was lost (or a
			// retry of it found the version moved by the write itself).
			prev, prevRaw, prevDoc := c.current, c.raw, c.rawDoc
			c.current, c.version, c.raw, c.rawDoc = fresh, fv, freshRaw, nil
			c.record(ctx, prev, prevRaw, prevDoc, fresh, freshRaw)
			c.committed(fresh)
			return fresh, nil
		}
		if !errors.Is(putErr, blob.ErrPrecondition) {
			return nil, fmt.Errorf("commit manifest: %w: %w", blob.ErrUnavailable, putErr)
		}
		if err := c.superseded(fresh); err != nil {
			return nil, c.tripped(err)
		}
		if err := c.conflict(attempt, c.rival(c.current, fresh)); err != nil {
			return nil, c.tripped(err)
		}
		if c.obs.ConflictResolved != nil {
			c.obs.ConflictResolved()
		}
		c.learn(fresh, fv, freshRaw)
	}
}

// Resync re-reads the manifest after a failed commit whose outcome could
// not be settled (the store failed the re-read as well), so that the next
// session starts from what is stored: a write of this committer that did
// land is adopted, and a stream another process moved since this one's
// last read fails as in Commit.
func (c *Committer) Resync(ctx context.Context) error {
	fresh, fv, raw, err := load(ctx, c.store)
	if err != nil {
		return fmt.Errorf("%w: %w", blob.ErrUnavailable, err)
	}
	if err := c.superseded(fresh); err != nil {
		return c.tripped(err)
	}
	c.learn(fresh, fv, raw)
	return nil
}

// superseded fails when another process moved the stream since this
// committer's last read: its epochs and ours would interleave.
func (c *Committer) superseded(fresh *Manifest) error {
	if fresh.Writer == "" || fresh.Writer == c.current.Writer || fresh.Writer == c.writer || !c.rival(c.current, fresh) {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrSuperseded, &cdc.Error{
		Class: cdc.ErrCASBreaker,
		Msg: fmt.Sprintf("writer %s committed epoch %d (end LSN %s) since this process (%s) read epoch %d; stopping rather than mixing two lineages of epochs",
			fresh.Writer, fresh.Epoch, fresh.EndLSN, c.writer, c.current.Epoch),
		Hint: "another pg-cdc process is writing to the same storage path (for example one that was paused and replaced); make sure exactly one runs, then start it by hand",
	})
}

// Refresh re-reads the manifest, for a writer that runs now and then beside
// another (compaction beside the streamer) and should start from the
// newest version rather than learn it from a conflict.
func (c *Committer) Refresh(ctx context.Context) error {
	m, v, raw, err := load(ctx, c.store)
	if err != nil {
		return err
	}
	c.learn(m, v, raw)
	return nil
}

func (c *Committer) conflict(attempt int, counts bool) error {
	if !counts {
		if attempt >= maxAttempts {
			return fmt.Errorf("commit manifest: %d conflicting writes in a row", attempt)
		}
		return nil
	}
	now := c.now()
	kept := c.conflicts[:0]
	for _, t := range c.conflicts {
		if now.Sub(t) < c.breaker.Window {
			kept = append(kept, t)
		}
	}
	c.conflicts = append(kept, now)
	if len(c.conflicts) >= c.breaker.Threshold || attempt >= maxAttempts {
		return &cdc.Error{
			Class: cdc.ErrCASBreaker,
			Msg:   fmt.Sprintf("%d manifest conflicts within %s", len(c.conflicts), c.breaker.Window),
			Hint:  "another pg-cdc process is probably writing to the same storage path; stop one of them before restarting",
		}
	}
	return nil
}
