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

// Snapshot contenders.
const (
	snapBinary = "COPY binary"
	snapText   = "COPY text"
	snapPsql   = "psql COPY binary"
	snapPGCDC  = "pg-cdc init"
)

type snapRun struct {
	who   string
	rep   int
	usage usage
	bytes int64 // COPY: bytes received; pg-cdc: base Parquet bytes
}

type snapshotResult struct {
	rows      int
	tableSize int64
	loadTime  time.Duration
	runs      []snapRun
}

// snapshot measures pg-cdc init on a table of --snapshot-rows rows against
// raw COPY on one connection, in rotating order.
func (h *harness) snapshot(ctx context.Context) (*snapshotResult, error) {
	const db = "w5"
	n := h.o.snapshotRows
	res := &snapshotResult{rows: n}
	h.logf("w5: loading a %s-row table", count(n))
	c, err := h.database(ctx, db)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	began := time.Now()
	if err := loadRows(ctx, c, n); err != nil {
		return nil, err
	}
	res.loadTime = time.Since(began)
	if err := c.QueryRow(ctx, "SELECT pg_table_size('bench')").Scan(&res.tableSize); err != nil {
		return nil, err
	}
	h.logf("w5: loaded in %s, table %s", res.loadTime.Round(time.Second), bytesIEC(res.tableSize))
	query := "SELECT id, a, b, c, d, e FROM public.bench"
	// Warm the cache once, unmeasured.
	if _, err := h.copyRun(db, query, "binary"); err != nil {
		return nil, err
	}

	order := []string{snapBinary, snapPGCDC, snapText}
	if h.psql != "" {
		order = append(order, snapPsql)
	}
	for i := range h.o.reps {
		for j := range order {
			who := order[(i+j)%len(order)]
			var (
				run snapRun
				err error
			)
			switch who {
			case snapBinary:
				run, err = h.copyRun(db, query, "binary")
			case snapText:
				run, err = h.copyRun(db, query, "text")
			case snapPsql:
				run, err = h.psqlRun(db, query)
			case snapPGCDC:
				run, err = h.initRun(ctx, db, fmt.Sprintf("w5_pgcdc_%d", i+1), n)
			}
			if err != nil {
				return nil, fmt.Errorf("%s, repetition %d: %w", who, i+1, err)
			}
			run.who, run.rep = who, i+1
			h.logf("w5: rep %d %-12s %6.2fs  %9.0f rows/s  cpu %6.2fs  rss %s", i+1, who,
				run.usage.Wall.Seconds(), float64(n)/run.usage.Wall.Seconds(), run.usage.CPU.Seconds(), bytesIEC(run.usage.MaxRSS))
			res.runs = append(res.runs, run)
		}
	}
	c.Close(context.Background())
	return res, h.dropDatabase(ctx, db)
}

func (h *harness) copyRun(db, query, format string) (snapRun, error) {
	out, u, err := runProc(30*time.Minute, h.self, []string{"copy", "--url", h.cluster.URL(db), "--query", query, "--format", format}, nil, "")
	if err != nil {
		return snapRun{}, err
	}
	var r bench.CopyResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
		return snapRun{}, fmt.Errorf("copy result %q: %w", out, err)
	}
	return snapRun{usage: u, bytes: r.Bytes}, nil
}

// psqlRun is the reference: psql's raw binary COPY to /dev/null.
func (h *harness) psqlRun(db, query string) (snapRun, error) {
	_, u, err := runProc(30*time.Minute, "/bin/sh", []string{"-c",
		fmt.Sprintf("exec %s -X -q -d '%s' -c 'COPY (%s) TO STDOUT (FORMAT binary)' > /dev/null", h.psql, h.cluster.URL(db), query)}, nil, "")
	if err != nil {
		return snapRun{}, err
	}
	return snapRun{usage: u}, nil
}

// initRun times pg-cdc init into a fresh sink and slot, then drops the slot
// and the sink.
func (h *harness) initRun(ctx context.Context, db, slot string, rows int) (snapRun, error) {
	r, err := h.pgcdcConfig(db, slot)
	if err != nil {
		return snapRun{}, err
	}
	var env []string
	if h.o.profileDir != "" {
		env = []string{"PG_CDC_CPUPROFILE=" + filepath.Join(h.o.profileDir, slot+".cpu")}
	}
	_, u, err := h.initPGCDC(r, env...)
	if err != nil {
		return snapRun{}, err
	}
	m := readManifest(r)
	var bytes int64
	if m != nil && m.Tables["public.bench"] != nil && m.Tables["public.bench"].Base != nil {
		b := m.Tables["public.bench"].Base
		if b.RowCount != int64(rows) {
			return snapRun{}, fmt.Errorf("pg-cdc init snapshotted %d rows, want %d", b.RowCount, rows)
		}
		for _, f := range b.Files {
			bytes += f.Bytes
		}
	} else {
		return snapRun{}, fmt.Errorf("pg-cdc init left no base for public.bench")
	}
	if err := h.dropSlot(ctx, db, slot); err != nil {
		return snapRun{}, err
	}
	if err := os.RemoveAll(r.dir); err != nil {
		return snapRun{}, err
	}
	return snapRun{usage: u, bytes: bytes}, nil
}
