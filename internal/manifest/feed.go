package manifest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Feed is the post-commit seam: it carries committed manifest versions to
// the work that follows them beside the stream (the run's state today; a
// catalog publisher and a query server next), whoever wrote them. A writer
// in this process publishes each version it commits (Observer.Committed);
// Poll publishes the versions other processes commit (pg-cdc compact from
// cron, rebuild, resnapshot requests).
//
// Publish never blocks and never waits for a follower: the feed keeps only
// the newest version, so a follower that is slow sees the newest one when
// it next asks, never a backlog, and can never slow or stop the writer.
// Versions are ordered by Manifest.Version.
type Feed struct {
	mu     sync.Mutex
	latest *Manifest
	wake   chan struct{} // closed, and replaced, when a newer version arrives
}

// NewFeed returns an empty feed.
func NewFeed() *Feed { return &Feed{wake: make(chan struct{})} }

// Publish offers m, a committed version that no one modifies any more. It
// is kept when it is newer than the newest so far; an older or equal one
// (a poll that read what this process wrote) is dropped. Safe for
// concurrent use; constant time.
func (f *Feed) Publish(m *Manifest) {
	if m == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.latest != nil && !newer(m, f.latest) {
		return
	}
	f.latest = m
	close(f.wake)
	f.wake = make(chan struct{})
}

// newer orders two committed versions: by Version, then (versions of a
// manifest written before Version existed, all 0) by commit time.
func newer(m, than *Manifest) bool {
	if m.Version != than.Version {
		return m.Version > than.Version
	}
	return m.CommittedAt.After(than.CommittedAt)
}

// Latest returns the newest version published, or nil.
func (f *Feed) Latest() *Manifest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.latest
}

// Watch returns the newest version published (nil: none) and a channel
// closed once a newer one is: for a follower that waits on something else
// too (a timer) and must still see the versions that land meanwhile.
func (f *Feed) Watch() (*Manifest, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.latest, f.wake
}

// Next waits until a version newer than after (nil: any) is published and
// returns the newest one, or ctx's error. Versions published meanwhile
// that were overtaken are skipped.
func (f *Feed) Next(ctx context.Context, after *Manifest) (*Manifest, error) {
	for {
		f.mu.Lock()
		latest, wake := f.latest, f.wake
		f.mu.Unlock()
		if latest != nil && (after == nil || newer(latest, after)) {
			return latest, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Follow calls fn with every version Next returns, in order, until ctx is
// done (nil) or fn fails (its error). It runs on the caller's goroutine:
// the caller owns it and decides what a failure means.
func (f *Feed) Follow(ctx context.Context, fn func(ctx context.Context, m *Manifest) error) error {
	var seen *Manifest
	for {
		m, err := f.Next(ctx, seen)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := fn(ctx, m); err != nil {
			return err
		}
		seen = m
	}
}

// Poll reads the manifest from store every interval and publishes it to
// feed, until ctx is done: the versions other processes commit reach the
// followers within an interval. A read that fails is reported to onError
// (nil: ignored) and tried again at the next tick; a poll that finds the
// object unchanged (same store version) decodes nothing.
func Poll(ctx context.Context, store blob.Conditional, every time.Duration, feed *Feed, onError func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last blob.Version
	for {
		data, v, err := store.ReadVersion(ctx, Key)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, blob.ErrNotFound):
			err = fmt.Errorf("read manifest %s: %w", Key, cdc.ErrNotInitialized)
		case err == nil && (v == "" || v != last):
			var m *Manifest
			if m, err = Decode(data); err == nil {
				feed.Publish(m)
				last = v
			}
		}
		if err != nil && onError != nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
