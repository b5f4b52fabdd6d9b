package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/gcs"
	"github.com/pg-cdc/pg-cdc/internal/blob/gcs/gcstest"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3/s3test"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

// binary is the pg-cdc executable built once for the package.
var binary string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "pgcdc-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "pg-cdc")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		build := exec.Command("go", "build", "-o", binary, "./cmd/pg-cdc")
		build.Dir = root
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build pg-cdc:", err)
			return 1
		}
		return pgtest.Main(m)
	}())
}

// env is one test's source database, sink and configuration.
type env struct {
	t       *testing.T
	url     string
	dir     string
	sink    string
	config  string
	slot    string
	conn    *pgx.Conn
	sampler *sampler
	// store is the sink when it is an object store (envOptions.sink); sink
	// is then a local mirror that mirror() refreshes for the readers that
	// want files (DuckDB, sinktest). Nil for the filesystem sink.
	store blob.Store
	// procEnv is added to every pg-cdc process's environment (the object
	// store's credentials or emulator).
	procEnv []string
}

type envOptions struct {
	flushInterval int // seconds; default 1
	maxRows       int
	memoryBudget  int64
	extraYAML     string
	// schemas is source.postgres.schemas; nil means the default, public.
	schemas []string
	// cluster is a dedicated PostgreSQL (pgtest.New) for tests that stop or
	// crash it; nil means the package's shared one.
	cluster *pgtest.Cluster
	// sink is "s3" (versitygw on loopback) or "gcs" (fake-gcs-server on
	// loopback); empty means the filesystem.
	sink string
	// s3Via, if set, returns the endpoint pg-cdc uses instead of the
	// server's (a fault-injecting proxy in front of it); the test's own
	// reads go to the server directly.
	s3Via func(endpoint string) string
}

// quietMetrics gives every pg-cdc process a free port for its metrics
// endpoint: tests run several at once, and the default port may be taken.
// A test that scrapes finds the port in the log (metrics_addr); a later
// PGCDC_METRICS_LISTEN in extraEnv wins.
const quietMetrics = "PGCDC_METRICS_LISTEN=127.0.0.1:0"

func newEnv(t *testing.T, opts envOptions) *env {
	t.Helper()
	cluster := opts.cluster
	if cluster == nil {
		cluster = pgtest.Shared(t)
	}
	url := cluster.CreateDatabase(t)
	dir := t.TempDir()
	e := &env{t: t, url: url, dir: dir, sink: filepath.Join(dir, "sink"), config: filepath.Join(dir, "pg-cdc.yml")}
	e.slot = fmt.Sprintf("slot_%d", time.Now().UnixNano()%1_000_000_000)
	if opts.flushInterval == 0 {
		opts.flushInterval = 1
	}
	if opts.maxRows == 0 {
		opts.maxRows = 100000
	}
	if opts.memoryBudget == 0 {
		opts.memoryBudget = 8 << 20
	}
	schemas := ""
	if opts.schemas != nil {
		// A JSON string is a YAML double-quoted scalar, so any name survives.
		b, err := json.Marshal(opts.schemas)
		if err != nil {
			t.Fatal(err)
		}
		schemas = "\n    schemas: " + string(b)
	}
	storage := fmt.Sprintf("storage:\n  type: filesystem\n  path: %q\n", e.sink)
	if opts.sink != "" {
		storage = e.objectStore(opts.sink, opts.s3Via)
	}
	cfg := fmt.Sprintf(`source:
  postgres:
    url: %q%s
replication:
  publication: pub_%s
  slot: %s
  standby_interval_sec: 1
  memory_budget_bytes: %d
%sflush:
  interval_sec: %d
  max_rows: %d
  drain_timeout_sec: 30
state:
  path: %q
log:
  level: debug
%s`, url, schemas, e.slot, e.slot, opts.memoryBudget, storage, opts.flushInterval, opts.maxRows, filepath.Join(dir, "state"), opts.extraYAML)
	if err := os.WriteFile(e.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.conn.Close(context.Background()) })
	e.conn = conn
	return e
}

// exec runs SQL on the source and fails the test on error.
func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.conn.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("exec %q: %v", sql, err)
	}
}

// run runs a pg-cdc command to completion and returns its exit code and
// combined output.
func (e *env) run(args ...string) (int, string) {
	e.t.Helper()
	return e.runWith(e.config, args...)
}

// runWith runs a pg-cdc command with another configuration file.
func (e *env) runWith(config string, args ...string) (int, string) {
	e.t.Helper()
	return e.runEnv(config, nil, args...)
}

// runEnv runs a pg-cdc command with extra environment variables.
func (e *env) runEnv(config string, extraEnv []string, args ...string) (int, string) {
	e.t.Helper()
	cmd := exec.Command(binary, append([]string{"-c", config}, args...)...)
	cmd.Env = append(append(append(os.Environ(), quietMetrics), e.procEnv...), extraEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal()) // as a shell reports it
		}
	} else if err != nil {
		e.t.Fatalf("run pg-cdc %v: %v", args, err)
	}
	return code, out.String()
}

func (e *env) mustRun(args ...string) string {
	e.t.Helper()
	code, out := e.run(args...)
	if code != 0 {
		e.t.Fatalf("pg-cdc %v exited %d:\n%s", args, code, out)
	}
	return out
}

// daemon is a running `pg-cdc start`.
type daemon struct {
	t    *testing.T
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
	hwm  atomic.Int64 // VmHWM in KiB, as last read (watchHWM)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs `pg-cdc start` in the background.
func (e *env) start(extraEnv ...string) *daemon {
	e.t.Helper()
	return e.startCommand(extraEnv, "start")
}

// startCommand runs a pg-cdc command in the background; it is killed when
// the test ends, and its output is logged if the test failed.
func (e *env) startCommand(extraEnv []string, args ...string) *daemon {
	e.t.Helper()
	cmd := exec.Command(binary, append([]string{"-c", e.config}, args...)...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(append(append(os.Environ(), quietMetrics), e.procEnv...), extraEnv...)
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start pg-cdc %v: %v", args, err)
	}
	d := &daemon{t: e.t, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.done)
	}()
	go d.watchHWM()
	e.t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = cmd.Process.Kill()
			<-d.done
		}
		if e.t.Failed() {
			e.t.Logf("pg-cdc %v output (info and above, last lines):\n%s", args, lines(withoutDebug(out.String()), 40))
		}
	})
	return d
}

// stop sends SIGTERM and waits for a clean exit.
func (d *daemon) stop() {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		d.t.Fatalf("pg-cdc did not stop within 60s after SIGTERM:\n%s", d.out.String())
	}
	if code := d.exitCode(); code != 0 {
		d.t.Fatalf("pg-cdc exited %d after SIGTERM:\n%s", code, d.out.String())
	}
}

// kill sends SIGKILL and waits.
func (d *daemon) kill() {
	_ = d.cmd.Process.Kill()
	<-d.done
}

// wait waits for the process to exit by itself.
func (d *daemon) wait(timeout time.Duration) int {
	d.t.Helper()
	select {
	case <-d.done:
	case <-time.After(timeout):
		_ = d.cmd.Process.Kill()
		<-d.done
		d.t.Fatalf("pg-cdc did not exit within %s:\n%s", timeout, d.out.String())
	}
	return d.exitCode()
}

func (d *daemon) exitCode() int {
	if d.cmd.ProcessState == nil {
		return -1
	}
	if ws, ok := d.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return d.cmd.ProcessState.ExitCode()
}

// maxRSSKiB is the peak resident set of the process: its VmHWM, last read
// at most 50 ms before it exited. Not getrusage's ru_maxrss: os/exec starts
// the child with vfork semantics (CLONE_VM), and at exec Linux folds the
// high-water mark of the memory it leaves, the test binary's own, into the
// child's maxrss, so a test binary that grew (DuckDB reads) reported its
// own peak as pg-cdc's.
func (d *daemon) maxRSSKiB() int64 {
	<-d.done
	if n := d.hwm.Load(); n > 0 {
		return n
	}
	return -1
}

// watchHWM keeps the process's VmHWM until it exits.
func (d *daemon) watchHWM() {
	path := fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if n := procStatusKiB(path, "VmHWM:"); n > d.hwm.Load() {
			d.hwm.Store(n)
		}
		select {
		case <-d.done:
			return
		case <-t.C:
		}
	}
}

// procStatusKiB reads one "Name:  N kB" line of a /proc status file, or 0.
func procStatusKiB(path, field string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// manifest reads the sink's current manifest.
func (e *env) manifest() *manifest.Manifest {
	e.t.Helper()
	data, err := e.manifestBytes()
	if err != nil {
		e.t.Fatalf("read manifest: %v", err)
	}
	m, err := manifest.Decode(data)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// waitFor polls cond until it holds or the timeout passes.
func (e *env) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitProgress waits until the manifest's end LSN has moved past from: the
// daemon has made part of a running workload durable.
func (e *env) waitProgress(from cdc.LSN, timeout time.Duration) {
	e.t.Helper()
	e.waitFor("the manifest to move past "+from.String(), timeout, func() bool {
		data, err := e.manifestBytes()
		if err != nil {
			return false
		}
		m, err := manifest.Decode(data)
		return err == nil && m.EndLSN > from
	})
}

// waitSlotActive waits until a daemon streams from the test's slot.
func (e *env) waitSlotActive(timeout time.Duration) {
	e.t.Helper()
	e.waitFor("the slot to be active", timeout, func() bool {
		var active bool
		err := e.conn.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&active)
		return err == nil && active
	})
}

// waitCaughtUp waits until the manifest holds everything committed before
// the call. It writes a non-transactional logical message and waits for the
// manifest's end LSN to reach it: the daemon records a position past the
// message only once every earlier transaction is durable.
func (e *env) waitCaughtUp(timeout time.Duration) {
	e.t.Helper()
	var target string
	if err := e.conn.QueryRow(context.Background(), "SELECT pg_logical_emit_message(false, 'pgcdc-test', 'sync')::text").Scan(&target); err != nil {
		e.t.Fatal(err)
	}
	want, err := cdc.ParseLSN(target)
	if err != nil {
		e.t.Fatal(err)
	}
	e.waitFor("the manifest to reach "+target, timeout, func() bool {
		data, err := e.manifestBytes()
		if err != nil {
			return false
		}
		m, err := manifest.Decode(data)
		return err == nil && m.EndLSN >= want
	})
}

func lines(s string, n int) string {
	all := strings.Split(strings.TrimSpace(s), "\n")
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return strings.Join(all, "\n")
}

func withoutDebug(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "level=DEBUG") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// manifestBytes reads the sink's current manifest as stored.
func (e *env) manifestBytes() ([]byte, error) {
	if e.store == nil {
		return os.ReadFile(filepath.Join(e.sink, manifest.Key))
	}
	r, err := e.store.Get(context.Background(), manifest.Key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// objectStore starts the object store a test asked for, points the
// config's storage section and the pg-cdc processes at it, and returns
// that section.
func (e *env) objectStore(kind string, s3Via func(string) string) string {
	e.t.Helper()
	const prefix = "lake/e2e"
	ctx := context.Background()
	switch kind {
	case "s3":
		srv := s3test.Start(e.t)
		bucket := srv.NewTestBucket(e.t)
		st, err := s3.New(ctx, s3.Options{Bucket: bucket, Prefix: prefix, Region: srv.Region, Endpoint: srv.Endpoint,
			ForcePathStyle: true, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey})
		if err != nil {
			e.t.Fatal(err)
		}
		e.store = st
		e.procEnv = []string{"AWS_ACCESS_KEY_ID=" + srv.AccessKey, "AWS_SECRET_ACCESS_KEY=" + srv.SecretKey,
			"AWS_REGION=" + srv.Region, "AWS_EC2_METADATA_DISABLED=true"}
		endpoint := srv.Endpoint
		if s3Via != nil {
			endpoint = s3Via(endpoint)
		}
		return fmt.Sprintf("storage:\n  type: s3\n  bucket: %s\n  prefix: %s\n  endpoint: %s\n  force_path_style: true\n",
			bucket, prefix, endpoint)
	case "gcs":
		endpoint, bucket := gcstest.Start(e.t)
		st, err := gcs.New(ctx, gcs.Options{Bucket: bucket, Prefix: prefix, Endpoint: endpoint, NoAuth: true})
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { st.Close() })
		e.store = st
		e.procEnv = []string{gcs.EmulatorHostEnv + "=" + endpoint}
		return fmt.Sprintf("storage:\n  type: gcs\n  bucket: %s\n  prefix: %s\n", bucket, prefix)
	default:
		e.t.Fatalf("unknown sink %q", kind)
		return ""
	}
}

// mirror copies every object of an object-store sink into e.sink, so the
// file-based readers (DuckDB, sinktest) see what the store holds. A no-op
// for the filesystem sink.
func (e *env) mirror() {
	e.t.Helper()
	if e.store == nil {
		return
	}
	ctx := context.Background()
	if err := os.RemoveAll(e.sink); err != nil {
		e.t.Fatal(err)
	}
	objs, err := e.store.List(ctx, "")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, o := range objs {
		r, err := e.store.Get(ctx, o.Key)
		if err != nil {
			e.t.Fatalf("mirror %s: %v", o.Key, err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			e.t.Fatalf("mirror %s: %v", o.Key, err)
		}
		p := filepath.Join(e.sink, filepath.FromSlash(o.Key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
}
