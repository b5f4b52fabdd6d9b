package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

// pgSettings are what the benchmarks change from pgtest's defaults (which
// suit tests: logical_decoding_work_mem = 64kB forces streaming of every
// small transaction). Everything else is pgtest's: fsync = off and
// full_page_writes = off on a throwaway cluster.
var pgSettings = []string{
	"logical_decoding_work_mem = 64MB", // PostgreSQL's default: W3 streams, 1,000-row transactions do not
	"shared_buffers = 512MB",
	"max_wal_size = 16GB",        // no checkpoint in the middle of a drain
	"checkpoint_timeout = 30min", // idem
	"autovacuum = off",           // no background work while consumers are timed
}

type harness struct {
	o       options
	dir     string
	bin     string // pg-cdc, absolute
	self    string // this program, for the drain and copy children
	recv    string // pg_recvlogical, or "" when absent or disabled
	psql    string // psql, or "" when absent
	cluster *pgtest.Cluster
	rep     report
}

func run(ctx context.Context, o options) (err error) {
	h := &harness{o: o}
	if h.bin, err = filepath.Abs(o.bin); err != nil {
		return err
	}
	if _, err := os.Stat(h.bin); err != nil {
		return fmt.Errorf("pg-cdc binary: %w (build it with 'make build', or pass --bin)", err)
	}
	if h.self, err = os.Executable(); err != nil {
		return err
	}
	if o.recvlogical {
		for _, p := range []string{"/usr/lib/postgresql/15/bin/pg_recvlogical"} {
			if _, err := os.Stat(p); err == nil {
				h.recv = p
			}
		}
		if h.recv == "" {
			if p, err := exec.LookPath("pg_recvlogical"); err == nil {
				h.recv = p
			}
		}
	}
	for _, p := range []string{"/usr/lib/postgresql/15/bin/psql", "psql"} {
		if found, err := exec.LookPath(p); err == nil {
			h.psql = found
			break
		}
	}
	if o.dir == "" {
		if h.dir, err = os.MkdirTemp("", "pgcdc-bench-"); err != nil {
			return err
		}
	} else {
		if h.dir, err = filepath.Abs(o.dir); err != nil {
			return err
		}
		if err := os.MkdirAll(h.dir, 0o755); err != nil {
			return err
		}
	}
	// The postgres OS user (when we are root) must reach the cluster below.
	if err := os.Chmod(h.dir, 0o755); err != nil {
		return err
	}
	defer func() {
		if !o.keep && err == nil {
			_ = os.RemoveAll(h.dir)
		} else {
			h.logf("working directory kept: %s", h.dir)
		}
	}()
	h.logf("working directory %s", h.dir)

	h.cluster, err = pgtest.StartCluster(ctx, pgtest.Options{
		Dir:      filepath.Join(h.dir, "postgres"),
		Port:     o.port,
		Settings: pgSettings,
		Logf:     h.logf,
	})
	if err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	defer func() {
		if serr := h.cluster.Stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()

	h.rep.started = time.Now()
	h.rep.opts = o
	h.rep.recvlogical = h.recv
	if err := h.machine(ctx); err != nil {
		return err
	}

	for _, w := range workloads(o) {
		if !h.selected(w.key) {
			continue
		}
		res, err := h.drainWorkload(ctx, w)
		if err != nil {
			return fmt.Errorf("%s: %w", w.key, err)
		}
		h.rep.drains = append(h.rep.drains, res)
		// Write as we go: a long run that fails late keeps what it measured.
		if err := h.rep.write(o.out); err != nil {
			return err
		}
	}
	if h.selected("w5") {
		res, err := h.snapshot(ctx)
		if err != nil {
			return fmt.Errorf("w5: %w", err)
		}
		h.rep.snapshot = res
		if err := h.rep.write(o.out); err != nil {
			return err
		}
	}
	if h.selected("compact") {
		res, err := h.compaction(ctx)
		if err != nil {
			return fmt.Errorf("compaction: %w", err)
		}
		h.rep.compact = res
		if err := h.rep.write(o.out); err != nil {
			return err
		}
	}
	if h.selected("lag") {
		res, err := h.liveLag(ctx)
		if err != nil {
			return fmt.Errorf("live lag: %w", err)
		}
		h.rep.lag = res
		if err := h.rep.write(o.out); err != nil {
			return err
		}
	}
	if h.selected("read") {
		res, err := h.readPath(ctx)
		if err != nil {
			return fmt.Errorf("read path: %w", err)
		}
		h.rep.read = res
	}
	if h.selected("serve") {
		res, err := h.serveLoad(ctx)
		if err != nil {
			return fmt.Errorf("serve under load: %w", err)
		}
		h.rep.serve = res
	}
	if h.selected("catalog") {
		res, err := h.catalogCost(ctx)
		if err != nil {
			return fmt.Errorf("catalog publisher: %w", err)
		}
		h.rep.catalog = res
	}
	if h.named("soak") {
		res, err := h.soak(ctx)
		if err != nil {
			return fmt.Errorf("soak: %w", err)
		}
		h.rep.soak = res
	}
	h.rep.finished = time.Now()
	return h.rep.write(o.out)
}

func (h *harness) selected(key string) bool {
	if h.o.only == "" {
		return true
	}
	for _, k := range strings.Split(h.o.only, ",") {
		if strings.TrimSpace(k) == key {
			return true
		}
	}
	return false
}

// named reports whether --only names key: the sections that run only when
// asked for (soak) are not in the default "all".
func (h *harness) named(key string) bool {
	return h.o.only != "" && h.selected(key)
}

func (h *harness) logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// machine records what the numbers were measured on.
func (h *harness) machine(ctx context.Context) error {
	m := &h.rep.machine
	m.nproc = runtime.NumCPU()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				var kib int64
				if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "MemTotal:")), "%d kB", &kib); err == nil {
					m.memory = bytesIEC(kib << 10)
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.loadStart = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		m.kernel = strings.TrimSpace(string(out))
	}
	m.goVersion = runtime.Version()
	if out, err := exec.Command(h.bin, "version").Output(); err == nil {
		m.pgcdc = strings.TrimSpace(string(out))
	}
	c, err := pgx.Connect(ctx, h.cluster.URL("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return c.QueryRow(ctx, "SELECT version()").Scan(&m.postgres)
}

// database (re)creates database name with the bench table and returns a
// connection to it.
func (h *harness) database(ctx context.Context, name string) (*pgx.Conn, error) {
	admin, err := pgx.Connect(ctx, h.cluster.URL("postgres"))
	if err != nil {
		return nil, err
	}
	defer admin.Close(context.Background())
	if err := dropSlots(ctx, admin, name); err != nil {
		return nil, err
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return nil, err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, err
	}
	c, err := pgx.Connect(ctx, h.cluster.URL(name))
	if err != nil {
		return nil, err
	}
	if _, err := c.Exec(ctx, createTable); err != nil {
		c.Close(context.Background())
		return nil, err
	}
	return c, nil
}

// dropDatabase drops the database's slots and the database, and runs a
// checkpoint so the WAL they held is recycled.
func (h *harness) dropDatabase(ctx context.Context, name string) error {
	admin, err := pgx.Connect(ctx, h.cluster.URL("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	if err := dropSlots(ctx, admin, name); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return err
	}
	_, err = admin.Exec(ctx, "CHECKPOINT")
	return err
}

func dropSlots(ctx context.Context, c *pgx.Conn, db string) error {
	for range 100 {
		rows, err := c.Query(ctx, `SELECT slot_name::text, coalesce(active_pid, 0) FROM pg_replication_slots WHERE database = $1`, db)
		if err != nil {
			return err
		}
		type slot struct {
			name string
			pid  int32
		}
		slots, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (slot, error) {
			var s slot
			return s, r.Scan(&s.name, &s.pid)
		})
		if err != nil {
			return err
		}
		if len(slots) == 0 {
			return nil
		}
		for _, s := range slots {
			if s.pid != 0 {
				_, _ = c.Exec(ctx, "SELECT pg_terminate_backend($1)", s.pid)
				continue
			}
			_, _ = c.Exec(ctx, "SELECT pg_drop_replication_slot($1)", s.name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("replication slots of %s could not be dropped", db)
}

// pgcdcRun is one pg-cdc configuration: its own slot, sink and state.
type pgcdcRun struct {
	dir, config, sink, slot string
	// tables whose delta rows make the backlog (nil: the bench table).
	tables []string
}

// pgcdcConfig writes a configuration for slot in database db. The flush and
// standby intervals are short (--flush-interval) so that the end of a drain
// does not wait out a long interval; everything else is pg-cdc's default.
func (h *harness) pgcdcConfig(db, slot string) (pgcdcRun, error) {
	dir := filepath.Join(h.dir, "pgcdc", slot)
	if err := os.RemoveAll(dir); err != nil {
		return pgcdcRun{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return pgcdcRun{}, err
	}
	r := pgcdcRun{dir: dir, config: filepath.Join(dir, "pg-cdc.yml"), sink: filepath.Join(dir, "sink"), slot: slot}
	cfg := fmt.Sprintf(`source:
  postgres:
    url: %q
replication:
  publication: bench_pub
  slot: %s
  standby_interval_sec: %d
storage:
  type: filesystem
  path: %q
flush:
  interval_sec: %d
state:
  path: %q
metrics:
  listen: 127.0.0.1:0
`, h.cluster.URL(db), slot, h.o.flushSec, r.sink, h.o.flushSec, filepath.Join(dir, "state"))
	return r, os.WriteFile(r.config, []byte(cfg), 0o644)
}

// initPGCDC runs pg-cdc init for r and returns its usage.
func (h *harness) initPGCDC(r pgcdcRun, env ...string) (string, usage, error) {
	out, u, err := runProc(30*time.Minute, h.bin, []string{"-c", r.config, "init"}, env, filepath.Join(r.dir, "init.log"))
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(r.dir, "init.log"))
		return out, u, fmt.Errorf("%w\n%s", err, tail(string(b), 20))
	}
	return out, u, nil
}

// readManifest reads r's manifest; a missing or half-written one is nil.
func readManifest(r pgcdcRun) *manifest.Manifest {
	b, err := os.ReadFile(filepath.Join(r.sink, manifest.Key))
	if err != nil {
		return nil
	}
	m, err := manifest.Decode(b)
	if err != nil {
		return nil
	}
	return m
}

// deltaTotals sums the delta rows and bytes of tables (none: the bench
// table).
func deltaTotals(m *manifest.Manifest, tables ...string) (rows, bytes int64) {
	if m == nil {
		return 0, 0
	}
	if len(tables) == 0 {
		tables = []string{"public.bench"}
	}
	for _, name := range tables {
		t := m.Tables[name]
		if t == nil {
			continue
		}
		for _, d := range t.Deltas {
			rows += d.Rows
			for _, f := range d.Files {
				bytes += f.Bytes
			}
		}
	}
	return rows, bytes
}

// dropSlot drops one (inactive) slot of database db.
func (h *harness) dropSlot(ctx context.Context, db, slot string) error {
	c, err := pgx.Connect(ctx, h.cluster.URL(db))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot)
	return err
}

// walsender follows the CPU time of the walsender serving slot: it finds
// the process (pg_replication_slots.active_pid) once the consumer has
// connected and reads its /proc stat every 50 ms. stop returns the last
// reading (so up to 50 ms of a walsender's life may be missed), or zero when
// it was never found.
type walsender struct {
	stopc chan struct{}
	done  chan struct{}
	cpu   time.Duration
}

func (h *harness) followWalsender(db, slot string) *walsender {
	w := &walsender{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-w.stopc:
				cancel()
			case <-ctx.Done():
			}
		}()
		c, err := pgx.Connect(ctx, h.cluster.URL(db))
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		var pid int32
		for pid == 0 {
			if err := c.QueryRow(ctx, "SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid); err != nil {
				return
			}
			if pid == 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		for {
			if t, ok := procCPU(int(pid)); ok {
				w.cpu = t
			} else {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *walsender) stop() time.Duration {
	close(w.stopc)
	<-w.done
	return w.cpu
}

// procCPU reads utime + stime of pid from /proc (clock ticks of 10 ms).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	var ut, st int64
	if _, err := fmt.Sscan(f[11], &ut); err != nil {
		return 0, false
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}
