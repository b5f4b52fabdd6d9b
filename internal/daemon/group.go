package daemon

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// group owns every goroutine of the process beside the stream, in stages.
// A stage's parts start together and stop together; stages stop in the
// reverse order of their creation, each on a context of its own that
// outlives the stop request (the HTTP endpoint keeps answering, compaction
// keeps its sink, while the stream drains). Stopping a stage cancels its
// context and waits for its parts at most the stage's timeout: a part stuck
// past it is named in the log and left behind, so one stuck part can never
// hold up the rest of the shutdown (the process exits after).
type group struct {
	log    *slog.Logger
	stages []*stage
}

// stage is one step of the stop order.
type stage struct {
	name    string
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	running map[string]int // part name → goroutines still running
}

func newGroup(log *slog.Logger) *group { return &group{log: log} }

// stage adds a stage, stopped before every stage added earlier. Its
// context is derived from parent without parent's cancellation.
func (g *group) stage(parent context.Context, name string, timeout time.Duration) *stage {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	s := &stage{name: name, timeout: timeout, ctx: ctx, cancel: cancel, running: map[string]int{}}
	g.stages = append(g.stages, s)
	return s
}

// Go runs fn as a part of the stage; fn must return once its context is
// done.
func (s *stage) Go(name string, fn func(ctx context.Context)) {
	s.mu.Lock()
	s.running[name]++
	s.mu.Unlock()
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			s.running[name]--
			s.mu.Unlock()
		}()
		fn(s.ctx)
	})
}

// stop cancels the stage and waits for its parts up to its timeout; it
// returns the names of the parts still running then.
func (s *stage) stop() (stuck []string) {
	s.cancel()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(s.timeout):
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, n := range s.running {
		if n > 0 {
			stuck = append(stuck, name)
		}
	}
	slices.Sort(stuck)
	return stuck
}

// stop stops every stage, the last added first.
func (g *group) stop() {
	for i := len(g.stages) - 1; i >= 0; i-- {
		s := g.stages[i]
		if stuck := s.stop(); len(stuck) > 0 {
			g.log.Error("stopping: parts did not stop in time; leaving them behind", "stage", s.name, "timeout", s.timeout, "parts", stuck)
		}
	}
}
