package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/bench"
)

// Consumers of a backlog.
const (
	consBare    = "bare client"
	consPGCDC   = "pg-cdc"
	consRecv    = "pg_recvlogical"
	consCompare = "pg-cdc --compare"
	// consBareBin is the bare client asking pgoutput for binary values
	// (--pgoutput-binary): the measurement behind issue 4 item 7.
	consBareBin = "bare client, binary"
)

// drainRun is one consumer draining one slot.
type drainRun struct {
	consumer string
	rep      int
	usage    usage
	rows     int64 // rows the consumer saw (bare client) or made durable (pg-cdc)
	parquet  int64 // pg-cdc: delta bytes in the manifest
	bytes    int64 // bare client: pgoutput payload bytes received
	// walsender is the CPU time of the walsender that served the run.
	walsender time.Duration
}

type drainResult struct {
	w        workload
	walBytes int64 // backlog start to the marker
	genTime  time.Duration
	runs     []drainRun
	profile  *profile
}

// drainWorkload measures one backlog; see the package documentation.
func (h *harness) drainWorkload(ctx context.Context, w workload) (*drainResult, error) {
	res := &drainResult{w: w}
	db := w.key
	h.logf("%s: %s", w.key, w.title)
	c, err := h.database(ctx, db)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	if w.prepare != nil {
		if err := w.prepare(ctx, c); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
	}

	// Every consumer's slot exists before the backlog, so all of them
	// decode the same WAL.
	type slots struct {
		pgcdc, compare      pgcdcRun
		bare, bareBin, recv string
	}
	n := h.o.reps
	if w.reps > 0 {
		n = w.reps
	}
	reps := make([]slots, n)
	for i := range reps {
		r, err := h.pgcdcConfig(db, fmt.Sprintf("%s_pgcdc_%d", db, i+1))
		if err != nil {
			return nil, err
		}
		if _, _, err := h.initPGCDC(r); err != nil {
			return nil, fmt.Errorf("pg-cdc init: %w", err)
		}
		r.tables = w.tables
		reps[i].pgcdc = r
		if h.o.compare != "" {
			c, err := h.pgcdcConfig(db, fmt.Sprintf("%s_compare_%d", db, i+1))
			if err != nil {
				return nil, err
			}
			if _, _, err := h.initPGCDC(c); err != nil {
				return nil, fmt.Errorf("pg-cdc init: %w", err)
			}
			c.tables = w.tables
			reps[i].compare = c
		}
		reps[i].bare = fmt.Sprintf("%s_bare_%d", db, i+1)
		if h.o.pgoutputBinary {
			reps[i].bareBin = fmt.Sprintf("%s_barebin_%d", db, i+1)
		}
		if h.recv != "" {
			reps[i].recv = fmt.Sprintf("%s_recv_%d", db, i+1)
		}
	}
	var prof pgcdcRun
	if h.o.profile && w.key == "w1" {
		if prof, err = h.pgcdcConfig(db, db+"_pgcdc_prof"); err != nil {
			return nil, err
		}
		if _, _, err := h.initPGCDC(prof); err != nil {
			return nil, fmt.Errorf("pg-cdc init: %w", err)
		}
	}
	for _, s := range reps {
		for _, name := range []string{s.bare, s.bareBin, s.recv} {
			if name == "" {
				continue
			}
			if _, err := c.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", name); err != nil {
				return nil, fmt.Errorf("create slot %s: %w", name, err)
			}
		}
	}

	var startLSN string
	if err := c.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&startLSN); err != nil {
		return nil, err
	}
	h.logf("%s: writing the backlog", w.key)
	began := time.Now()
	if err := w.backlog(ctx, c); err != nil {
		return nil, fmt.Errorf("backlog: %w", err)
	}
	res.genTime = time.Since(began)
	// The marker: every change of the backlog is before the insert position
	// read here, and the message right after it is the only thing decoded
	// at or past it (pg_logical_emit_message returns the end of its record,
	// the message carries its start).
	var endLSN string
	var walBytes int64
	if err := c.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text, pg_logical_emit_message(false, 'pgcdc-bench', 'end')::text IS NOT NULL,
		pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint`, startLSN).Scan(&endLSN, new(bool), &walBytes); err != nil {
		return nil, err
	}
	res.walBytes = walBytes
	h.logf("%s: backlog of %d rows, %s of WAL, written in %s", w.key, w.rows, bytesIEC(walBytes), res.genTime.Round(100*time.Millisecond))

	order := []string{consBare, consPGCDC, consRecv}
	if h.o.compare != "" {
		order = []string{consBare, consPGCDC, consCompare, consRecv}
	}
	if h.o.pgoutputBinary {
		order = append(order, consBareBin)
	}
	for i, s := range reps {
		for j := range order {
			cons := order[(i+j)%len(order)]
			var (
				run drainRun
				err error
			)
			slot := map[string]string{consBare: s.bare, consBareBin: s.bareBin, consPGCDC: s.pgcdc.slot, consCompare: s.compare.slot, consRecv: s.recv}[cons]
			if slot == "" {
				continue
			}
			ws := h.followWalsender(db, slot)
			switch cons {
			case consBare:
				run, err = h.drainBare(ctx, db, s.bare, endLSN, false)
			case consBareBin:
				run, err = h.drainBare(ctx, db, s.bareBin, endLSN, true)
			case consPGCDC:
				run, err = h.drainPGCDC(ctx, h.bin, s.pgcdc, w.rows, nil)
			case consCompare:
				run, err = h.drainPGCDC(ctx, h.o.compare, s.compare, w.rows, nil)
				run.consumer = consCompare
			case consRecv:
				if s.recv == "" {
					continue
				}
				run, err = h.drainRecv(ctx, db, s.recv, endLSN)
			}
			wsCPU := ws.stop()
			if err != nil {
				return nil, fmt.Errorf("%s, repetition %d: %w", cons, i+1, err)
			}
			run.rep, run.walsender = i+1, wsCPU
			h.logf("%s: rep %d %-16s %6.2fs  %9.0f rows/s  cpu %6.2fs  walsender cpu %6.2fs  rss %s", w.key, i+1, cons,
				run.usage.Wall.Seconds(), float64(w.rows)/run.usage.Wall.Seconds(), run.usage.CPU.Seconds(), run.walsender.Seconds(), bytesIEC(run.usage.MaxRSS))
			res.runs = append(res.runs, run)
		}
	}
	if prof.slot != "" {
		p, err := h.profileDrain(ctx, prof, w.rows)
		if err != nil {
			return nil, fmt.Errorf("profile: %w", err)
		}
		res.profile = p
	}
	c.Close(context.Background())
	return res, h.dropDatabase(ctx, db)
}

func (h *harness) drainBare(ctx context.Context, db, slot, end string, binary bool) (drainRun, error) {
	args := []string{"drain", "--url", h.cluster.URL(db), "--slot", slot, "--publication", "bench_pub", "--end", end}
	cons := consBare
	if binary {
		args, cons = append(args, "--binary"), consBareBin
	}
	out, u, err := runProc(15*time.Minute, h.self, args, nil, "")
	if err != nil {
		return drainRun{}, err
	}
	var r bench.DrainResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
		return drainRun{}, fmt.Errorf("drain result %q: %w", out, err)
	}
	return drainRun{consumer: cons, usage: u, rows: r.Rows, bytes: r.Bytes}, nil
}

// drainRecv runs pg_recvlogical with the options pg-cdc uses, writing the
// stream to /dev/null, until the marker (--endpos: it stops at the first
// record at or past it).
func (h *harness) drainRecv(ctx context.Context, db, slot, end string) (drainRun, error) {
	_, u, err := runProc(15*time.Minute, h.recv, []string{
		"-d", fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=postgres", h.cluster.Port, db),
		"--slot", slot, "--start", "--endpos", end, "--no-loop", "-f", "/dev/null", "-F", "0",
		"-o", "proto_version=2", "-o", "publication_names=bench_pub", "-o", "messages=true", "-o", "streaming=true",
	}, nil, "")
	if err != nil {
		return drainRun{}, err
	}
	return drainRun{consumer: consRecv, usage: u}, nil
}

// drainPGCDC runs pg-cdc start until the manifest holds rows delta rows of
// the bench table (the whole backlog is durable), then stops it with
// SIGTERM. Wall is process start to that moment; CPU and RSS are the whole
// process's.
func (h *harness) drainPGCDC(ctx context.Context, bin string, r pgcdcRun, rows int, env []string) (drainRun, error) {
	if h.o.profileDir != "" && len(env) == 0 {
		env = []string{"PG_CDC_CPUPROFILE=" + filepath.Join(h.o.profileDir, r.slot+".cpu")}
	}
	p, err := startProc(bin, []string{"-c", r.config, "start"}, env, filepath.Join(r.dir, "start.log"))
	if err != nil {
		return drainRun{}, err
	}
	defer p.kill()
	var durableAt time.Time
	for durableAt.IsZero() {
		if p.exited() {
			b, _ := os.ReadFile(filepath.Join(r.dir, "start.log"))
			return drainRun{}, fmt.Errorf("pg-cdc exited early: %s", tail(string(b), 20))
		}
		if got, _ := deltaTotals(readManifest(r), r.tables...); got >= int64(rows) {
			durableAt = time.Now()
			break
		}
		if time.Since(p.started) > 15*time.Minute {
			return drainRun{}, fmt.Errorf("pg-cdc did not make the backlog durable within 15 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	u, err := p.stop(2 * time.Minute)
	if err != nil {
		return drainRun{}, err
	}
	u.Wall = durableAt.Sub(p.started)
	got, bytes := deltaTotals(readManifest(r), r.tables...)
	return drainRun{consumer: consPGCDC, usage: u, rows: got, parquet: bytes}, nil
}
