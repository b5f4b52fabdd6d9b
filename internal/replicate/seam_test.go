package replicate

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// followerBlock is how long the slow follower of TestPostCommitSeam takes
// per manifest version.
const followerBlock = 2 * time.Second

// TestPostCommitSeam: work that follows the committed manifest versions
// beside the stream (manifest.Feed, fed by the committer) can never slow a
// flush or a confirm, however long it blocks, and it sees the newest
// version when it wakes. The stream's flush latency (push of a transaction
// → the standby status confirming it) is measured without a follower and
// with one that blocks for two seconds per version.
func TestPostCommitSeam(t *testing.T) {
	const txns = 12
	without := flushLatencies(t, txns, nil)

	feed := manifest.NewFeed()
	var (
		mu      sync.Mutex
		seen    []uint64
		calls   atomic.Int32
		started = make(chan struct{})
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- feed.Follow(ctx, func(ctx context.Context, m *manifest.Manifest) error {
			mu.Lock()
			seen = append(seen, m.Version)
			mu.Unlock()
			if calls.Add(1) == 1 {
				close(started)
			}
			select {
			case <-time.After(followerBlock):
			case <-ctx.Done():
			}
			return nil
		})
	}()
	with := flushLatencies(t, txns, feed)
	<-started
	newest := feed.Latest().Version

	// When the follower wakes from the version it was given first, it is
	// handed the newest, whatever came between.
	deadline := time.Now().Add(2*followerBlock + waitLimit)
	for {
		mu.Lock()
		last := seen[len(seen)-1]
		mu.Unlock()
		if last == newest {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower last saw version %d; the newest is %d", last, newest)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(seen); n > 3 {
		t.Errorf("the follower was handed %d versions (%v): a slow follower gets the newest, not a backlog", n, seen)
	}

	slices.Sort(without)
	slices.Sort(with)
	t.Logf("flush latency without a follower: p50 %v, max %v; with one that blocks %v per version: p50 %v, max %v (follower saw versions %v)",
		without[len(without)/2], without[len(without)-1], followerBlock, with[len(with)/2], with[len(with)-1], seen)
	// Every flush of the run with the follower happened while it was
	// blocked; had the seam waited for it, each would take followerBlock.
	if worst := with[len(with)-1]; worst >= followerBlock/2 {
		t.Errorf("a flush took %v while the follower blocked for %v: the seam slowed the stream", worst, followerBlock)
	}
}

// flushLatencies streams txns one-row transactions, each flushed on its
// own (flush.max_rows 1), and returns, per transaction, the time from its
// push to the standby status that confirmed it. With feed, the committer
// publishes every version it writes to it.
func flushLatencies(t *testing.T, txns int, feed *manifest.Feed) []time.Duration {
	t.Helper()
	o := options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}}
	if feed != nil {
		o.committed = feed.Publish
	}
	h := start(t, o)
	var out []time.Duration
	for i := range txns {
		commit := startLSN + cdc.LSN(0x100*(i+1))
		pushed := time.Now()
		h.push(tx(uint32(600+i), commit, itemsRel(0, false), ins(itemsOID, i, "v"))...)
		h.waitFor("the confirm", func() bool {
			statuses, _, _ := h.src.snapshot()
			return len(statuses) > 0 && statuses[len(statuses)-1].pos >= endOf(commit)
		})
		out = append(out, time.Since(pushed))
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	return out
}
