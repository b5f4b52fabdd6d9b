package manifest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Breaker limits how fast CAS conflicts may come before the committer gives
// up: conflicts faster than Threshold per Window mean two writers fight over
// one prefix (DESIGN §3), and retrying would only hide it.
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
}

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
	data, version, err := store.ReadVersion(ctx, Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, "", fmt.Errorf("read manifest %s: %w", Key, cdc.ErrNotInitialized)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read manifest %s: %w", Key, err)
	}
	m, err := Decode(data)
	if err != nil {
		return nil, "", err
	}
	return m, version, nil
}

// Create writes the first manifest. It fails with blob.ErrPrecondition when a
// manifest already exists: init never overwrites one.
func Create(ctx context.Context, store blob.Conditional, m *Manifest, now time.Time) (*Committer, error) {
	m.FormatVersion = FormatVersion
	m.CommittedAt = now.UTC()
	data, err := m.Encode()
	if err != nil {
		return nil, err
	}
	v, err := store.PutIf(ctx, Key, data, "")
	if err != nil {
		return nil, fmt.Errorf("create manifest: %w", err)
	}
	return &Committer{store: store, breaker: DefaultBreaker, now: time.Now, current: m, version: v, rival: StreamMoved}, nil
}

// Open loads the manifest and returns a committer positioned on it.
func Open(ctx context.Context, store blob.Conditional, breaker Breaker) (*Committer, error) {
	m, v, err := Load(ctx, store)
	if err != nil {
		return nil, err
	}
	if breaker.Threshold <= 0 {
		breaker = DefaultBreaker
	}
	return &Committer{store: store, breaker: breaker, now: time.Now, current: m, version: v, rival: StreamMoved}, nil
}

// Current returns the last manifest this committer read or wrote. Callers
// must not modify it.
func (c *Committer) Current() *Manifest { return c.current }

// Commit applies mutate to a copy of the current manifest and writes it with
// compare-and-swap. On a conflict it re-reads the manifest and applies mutate
// again to the fresh copy, so mutations must be expressed as monotonic edits
// ("add this delta", "end LSN = max(end LSN, x)") rather than as overwrites
// of a remembered state. When conflicts come faster than the breaker allows,
// it returns an error matching cdc.ErrCASBreaker.
func (c *Committer) Commit(ctx context.Context, mutate func(*Manifest) error) (*Manifest, error) {
	for attempt := 1; ; attempt++ {
		next := c.current.Clone()
		if err := mutate(next); err != nil {
			return nil, err
		}
		next.CommittedAt = c.now().UTC()
		data, err := next.Encode()
		if err != nil {
			return nil, err
		}
		v, err := c.store.PutIf(ctx, Key, data, c.version)
		if err == nil {
			c.current, c.version = next, v
			return next, nil
		}
		if !errors.Is(err, blob.ErrPrecondition) {
			return nil, fmt.Errorf("commit manifest: %w", err)
		}
		fresh, fv, err := Load(ctx, c.store)
		if err != nil {
			return nil, fmt.Errorf("commit manifest: re-read after conflict: %w", err)
		}
		if err := c.conflict(attempt, c.rival(c.current, fresh)); err != nil {
			return nil, err
		}
		c.current, c.version = fresh, fv
	}
}

// Refresh re-reads the manifest, for a writer that runs now and then beside
// another (compaction beside the streamer) and should start from the
// newest version rather than learn it from a conflict.
func (c *Committer) Refresh(ctx context.Context) error {
	m, v, err := Load(ctx, c.store)
	if err != nil {
		return err
	}
	c.current, c.version = m, v
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
