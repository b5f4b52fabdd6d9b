package manifest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
)

func version(n uint64) *Manifest {
	m := sample()
	m.Version, m.Epoch = n, n
	return m
}

// TestFeedKeepsTheNewest: Publish never blocks; a follower that was busy
// gets the newest version, never an older or a backlog.
func TestFeedKeepsTheNewest(t *testing.T) {
	f := NewFeed()
	if f.Latest() != nil {
		t.Fatal("an empty feed has a version")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for n := uint64(1); n <= 1000; n++ {
		f.Publish(version(n)) // nobody reads: must not block
	}
	f.Publish(version(7)) // older: dropped
	f.Publish(nil)
	got, err := f.Next(ctx, nil)
	if err != nil || got.Version != 1000 {
		t.Fatalf("Next(nil) = %v, %v; want version 1000", got, err)
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if m, err := f.Next(short, got); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next after the newest = %v, %v; want to wait", m, err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		f.Publish(version(1001))
	}()
	if m, err := f.Next(ctx, got); err != nil || m.Version != 1001 {
		t.Fatalf("Next woke with %v, %v; want version 1001", m, err)
	}
}

// TestFeedLegacyVersions: manifests written before Version existed (all 0)
// are ordered by their commit time.
func TestFeedLegacyVersions(t *testing.T) {
	f := NewFeed()
	a, b := version(0), version(0)
	a.CommittedAt = time.Unix(100, 0)
	b.CommittedAt = time.Unix(200, 0)
	f.Publish(b)
	f.Publish(a)
	if f.Latest() != b {
		t.Fatal("an older legacy version replaced a newer one")
	}
	f.Publish(version(1))
	if f.Latest().Version != 1 {
		t.Fatal("a versioned manifest is not newer than a legacy one")
	}
}

// TestFollowSlowFollower: a follower that takes long per version sees the
// newest version when it is done, skipping what was overtaken, and stops
// with its context.
func TestFollowSlowFollower(t *testing.T) {
	f := NewFeed()
	ctx, cancel := context.WithCancel(context.Background())
	release, busy := make(chan struct{}), make(chan struct{})
	var seen []uint64
	done := make(chan error, 1)
	go func() {
		done <- f.Follow(ctx, func(_ context.Context, m *Manifest) error {
			seen = append(seen, m.Version)
			if m.Version == 1 {
				close(busy)
				<-release // busy while versions 2..50 are published
			}
			if m.Version == 50 {
				cancel()
			}
			return nil
		})
	}()
	f.Publish(version(1))
	<-busy
	for n := uint64(2); n <= 50; n++ {
		f.Publish(version(n))
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not stop")
	}
	if len(seen) != 2 || seen[0] != 1 || seen[1] != 50 {
		t.Fatalf("the follower saw versions %v, want [1 50]", seen)
	}
}

// TestCommitterPublishesAndPollReadsOthers: a committer tells the feed of
// every version it writes; Poll brings the versions another process
// writes; both count up from the version read.
func TestCommitterPublishesAndPollReadsOthers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memory.New()
	mine, err := Create(ctx, store, sample(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if mine.Current().Version != 1 {
		t.Fatalf("the first manifest is version %d", mine.Current().Version)
	}
	f := NewFeed()
	mine.SetObserver(Observer{Committed: f.Publish})
	if _, err := mine.Commit(ctx, func(m *Manifest) error { m.EndLSN++; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := f.Latest(); got == nil || got.Version != 2 {
		t.Fatalf("after a commit the feed holds %+v", got)
	}

	other, err := Open(ctx, store, Breaker{})
	if err != nil {
		t.Fatal(err)
	}
	var errs atomic.Int32
	go Poll(ctx, store, 10*time.Millisecond, f, func(error) { errs.Add(1) })
	if _, err := other.Commit(ctx, func(m *Manifest) error { m.Garbage = append(m.Garbage, RetiredFile{Path: "x"}); return nil }); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	got, err := f.Next(wctx, mine.Current())
	if err != nil || got.Version != 3 || len(got.Garbage) != 1 {
		t.Fatalf("the other writer's version reached the feed as %+v, %v", got, err)
	}
	if errs.Load() != 0 {
		t.Errorf("%d poll errors", errs.Load())
	}
}
