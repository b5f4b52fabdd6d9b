package daemon

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// stopLog records the order in which parts saw their context end.
type stopLog struct {
	mu    sync.Mutex
	order []string
}

func (l *stopLog) part(name string) func(ctx context.Context) {
	return func(ctx context.Context) {
		<-ctx.Done()
		l.mu.Lock()
		l.order = append(l.order, name)
		l.mu.Unlock()
	}
}

// TestStopOrder: the stages stop in the written order (background, then
// pollers, then http), each only once the one before it has stopped, and
// none of them with the stop request itself: they outlive it until the
// stream has drained.
func TestStopOrder(t *testing.T) {
	var logs strings.Builder
	g := newGroup(slog.New(slog.NewTextHandler(&logs, nil)))
	stopRequest, requestStop := context.WithCancel(context.Background())
	var l stopLog
	httpStage := g.stage(stopRequest, "http", time.Second)
	pollers := g.stage(stopRequest, "pollers", time.Second)
	background := g.stage(stopRequest, "background", time.Second)
	httpStage.Go("metrics endpoint", l.part("http"))
	pollers.Go("source poller", l.part("poller"))
	pollers.Go("heartbeat", l.part("heartbeat"))
	background.Go("compaction", l.part("compaction"))
	background.Go("reconciler", l.part("reconciler"))

	requestStop()
	time.Sleep(50 * time.Millisecond) // the stream drains meanwhile
	l.mu.Lock()
	early := len(l.order)
	l.mu.Unlock()
	if early != 0 {
		t.Fatalf("%d parts stopped with the stop request, before the stream drained", early)
	}
	g.stop()
	got := strings.Join(l.order, " ")
	first := func(names ...string) int {
		at := len(l.order)
		for i, n := range l.order {
			for _, want := range names {
				if n == want && i < at {
					at = i
				}
			}
		}
		return at
	}
	last := func(names ...string) int {
		at := -1
		for i, n := range l.order {
			for _, want := range names {
				if n == want {
					at = max(at, i)
				}
			}
		}
		return at
	}
	if len(l.order) != 5 || last("compaction", "reconciler") > first("poller", "heartbeat") || last("poller", "heartbeat") > first("http") {
		t.Fatalf("stop order %q, want background (compaction, reconciler), then pollers, then http", got)
	}
	if logs.Len() != 0 {
		t.Errorf("a clean stop logged: %s", logs.String())
	}
}

// TestStuckPartDoesNotHoldTheStop: a part that ignores its context holds
// its stage up for the stage's timeout only; it is named in the log, and
// the later stages still stop in order.
func TestStuckPartDoesNotHoldTheStop(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	g := newGroup(slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)))
	var l stopLog
	release := make(chan struct{})
	defer close(release)
	httpStage := g.stage(context.Background(), "http", time.Second)
	background := g.stage(context.Background(), "background", 200*time.Millisecond)
	httpStage.Go("metrics endpoint", l.part("http"))
	background.Go("compaction", func(context.Context) { <-release }) // stuck: ignores ctx
	background.Go("reconciler", l.part("reconciler"))

	started := time.Now()
	g.stop()
	took := time.Since(started)
	if took < 200*time.Millisecond || took > 2*time.Second {
		t.Errorf("the stop took %v with a stuck part and a 200ms stage timeout", took)
	}
	if got := strings.Join(l.order, " "); got != "reconciler http" {
		t.Errorf("stopped %q, want the reconciler, then the endpoint", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "parts=[compaction]") || !strings.Contains(logs.String(), "stage=background") {
		t.Errorf("the stuck part is not named in the log: %s", logs.String())
	}
}

type lockedWriter struct {
	w  *strings.Builder
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
