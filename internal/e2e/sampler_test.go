package e2e

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// sampler polls the slot's confirmed_flush_lsn from outside the daemon and
// the manifest on the sink, and records a violation whenever the slot is
// confirmed past the manifest's end LSN. Every transaction committed before
// the manifest's end LSN is in the manifest, so a slot confirmed no further
// than that never skips a committed change the manifest does not hold.
//
// The slot is read before the manifest: the manifest's end LSN only grows,
// so a later read can only make the check more lenient, never produce a
// false alarm.
type sampler struct {
	e       *env
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples int
	bad     []string
}

func (e *env) startSampler() *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{e: e, cancel: cancel}
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer conn.Close(context.Background())
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			s.sample(ctx, conn)
		}
	}()
	e.sampler = s
	e.t.Cleanup(s.stop)
	return s
}

func (s *sampler) sample(ctx context.Context, conn *pgx.Conn) {
	var confirmed *string
	err := conn.QueryRow(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", s.e.slot).Scan(&confirmed)
	if err != nil || confirmed == nil {
		return // no slot yet, or the test is ending
	}
	c, err := cdc.ParseLSN(*confirmed)
	if err != nil {
		return
	}
	data, err := s.e.manifestBytes()
	if err != nil {
		return // no manifest yet: init has not finished
	}
	m, err := manifest.Decode(data)
	if err != nil {
		s.record("unreadable manifest: " + err.Error())
		return
	}
	s.mu.Lock()
	s.samples++
	s.mu.Unlock()
	if c > m.EndLSN {
		s.record("slot confirmed at " + c.String() + " past the manifest's end LSN " + m.EndLSN.String())
	}
}

func (s *sampler) record(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) < 10 {
		s.bad = append(s.bad, v)
	}
}

// stop ends sampling and fails the test on any violation.
func (s *sampler) stop() {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.bad {
		s.e.t.Errorf("durability violation: %s", v)
	}
}

// check fails the test now if a violation was seen and makes sure the
// sampler actually observed the daemon.
func (s *sampler) check() {
	s.e.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples == 0 {
		s.e.t.Errorf("the LSN sampler took no sample")
	}
	for _, v := range s.bad {
		s.e.t.Errorf("durability violation: %s", v)
	}
	s.bad = nil
}
