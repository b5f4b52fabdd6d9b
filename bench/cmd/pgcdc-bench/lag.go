package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/bench"
)

type lagResult struct {
	rate, per    int
	duration     time.Duration
	achieved     float64 // rows per second actually inserted
	txns         int
	latency      bench.Summary // seconds, per transaction: COMMIT returned → first manifest read that lists it
	walLag       bench.Summary // bytes, sampled: source pg_current_wal_lsn − manifest end LSN
	epochs       int
	usage        usage
	unmatched    int
	pollInterval time.Duration
}

// epochSeen is when the harness first read a manifest listing an epoch.
type epochSeen struct {
	minLSN, maxLSN uint64
	at             time.Time
}

// liveLag runs pg-cdc start while W1 runs at a fixed rate, and measures how
// long each transaction takes to appear in the manifest.
func (h *harness) liveLag(ctx context.Context) (*lagResult, error) {
	const db = "lag"
	const poll = 25 * time.Millisecond
	res := &lagResult{rate: h.o.lagRate, per: h.o.txnRows, duration: h.o.lagDuration, pollInterval: poll}
	h.logf("live lag: %d rows/s in %d-row transactions for %s", res.rate, res.per, res.duration)
	c, err := h.database(ctx, db)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	r, err := h.pgcdcConfig(db, "lag_pgcdc")
	if err != nil {
		return nil, err
	}
	if _, _, err := h.initPGCDC(r); err != nil {
		return nil, err
	}
	p, err := startProc(h.bin, []string{"-c", r.config, "start"}, nil, filepath.Join(r.dir, "start.log"))
	if err != nil {
		return nil, err
	}
	defer p.kill()
	time.Sleep(time.Second) // connected and streaming

	var (
		mu      sync.Mutex
		seen    = map[uint64]epochSeen{}
		endLSN  uint64
		walLag  []float64
		wg      sync.WaitGroup
		pollErr error
	)
	pctx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	wg.Add(2)
	go func() { // manifest poller
		defer wg.Done()
		for pctx.Err() == nil {
			if m := readManifest(r); m != nil {
				now := time.Now()
				mu.Lock()
				endLSN = uint64(m.EndLSN)
				if t := m.Tables["public.bench"]; t != nil {
					for _, d := range t.Deltas {
						if _, ok := seen[d.Epoch]; !ok {
							seen[d.Epoch] = epochSeen{minLSN: uint64(d.MinLSN), maxLSN: uint64(d.MaxLSN), at: now}
						}
					}
				}
				mu.Unlock()
			}
			time.Sleep(poll)
		}
	}()
	go func() { // WAL lag sampler
		defer wg.Done()
		sc, err := pgx.Connect(pctx, h.cluster.URL(db))
		if err != nil {
			pollErr = err
			return
		}
		defer sc.Close(context.Background())
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			var cur int64
			if err := sc.QueryRow(pctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&cur); err != nil {
				if pctx.Err() == nil {
					pollErr = err
				}
				return
			}
			mu.Lock()
			if endLSN > 0 {
				walLag = append(walLag, float64(max(0, cur-int64(endLSN))))
			}
			mu.Unlock()
		}
	}()

	// The load: one transaction of per rows every per/rate seconds.
	var txns []committed
	every := time.Duration(float64(time.Second) * float64(res.per) / float64(res.rate))
	began := time.Now()
	next := began
	id := 1
	for time.Since(began) < res.duration {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(every)
		var t committed
		if err := c.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint").Scan(&t.before); err != nil {
			return nil, err
		}
		if _, err := c.Exec(ctx, "INSERT INTO bench "+rowsSQL(id, id+res.per-1)); err != nil {
			return nil, err
		}
		t.at = time.Now()
		if err := c.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint").Scan(&t.after); err != nil {
			return nil, err
		}
		t.rows = res.per
		txns = append(txns, t)
		id += res.per
	}
	elapsed := time.Since(began)
	total := id - 1
	res.achieved = float64(total) / elapsed.Seconds()
	res.txns = len(txns)

	// Wait for the tail, then stop.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if got, _ := deltaTotals(readManifest(r)); got >= int64(total) {
			break
		}
		if p.exited() || time.Now().After(deadline) {
			return nil, fmt.Errorf("pg-cdc did not make the %d rows durable", total)
		}
		time.Sleep(poll)
	}
	time.Sleep(2 * poll) // the poller sees the last epoch too
	stopPolling()
	wg.Wait()
	if pollErr != nil {
		return nil, pollErr
	}
	if res.usage, err = p.stop(2 * time.Minute); err != nil {
		return nil, err
	}

	epochs := make([]epochSeen, 0, len(seen))
	for _, e := range seen {
		epochs = append(epochs, e)
	}
	sort.Slice(epochs, func(i, j int) bool { return epochs[i].minLSN < epochs[j].minLSN })
	res.epochs = len(epochs)
	var lat []float64
	for _, t := range txns {
		// The transaction's commit LSN lies in (before, after]; only its
		// epoch's [min, max] commit-LSN range meets that interval.
		i := sort.Search(len(epochs), func(i int) bool { return epochs[i].maxLSN >= uint64(t.before) })
		if i == len(epochs) || epochs[i].minLSN > uint64(t.after) {
			res.unmatched++
			continue
		}
		lat = append(lat, epochs[i].at.Sub(t.at).Seconds())
	}
	res.latency = bench.Summarize(lat)
	res.walLag = bench.Summarize(walLag)
	c.Close(context.Background())
	return res, h.dropDatabase(ctx, db)
}
