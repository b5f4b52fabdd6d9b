// Command pg-cdc-demo is what `make demo` runs: it shows pg-cdc end to end on
// a throwaway PostgreSQL, with nothing to install or configure beyond the
// PostgreSQL server binaries.
//
// Steps, in order:
//
//  1. start a throwaway PostgreSQL under <dir>/postgres (recreated each run),
//     create the database "shop" with four sample tables and seed it;
//  2. write <dir>/pg-cdc.yml and run `pg-cdc init` (the initial snapshot);
//  3. run `pg-cdc start` as a child process (log in <dir>/pg-cdc.log) while a
//     workload of inserts, updates, deletes, a key change, a TOAST-preserving
//     update, a TRUNCATE and one large transaction runs for --duration;
//  4. stop pg-cdc with SIGTERM (it must drain and exit 0), run `pg-cdc status`;
//  5. summarise the sink from the manifest and the Parquet files, and check
//     the sink's current state against the source's row counts;
//  6. read the data back through `pg-cdc query`, which needs only the sink:
//     the tables and their rows (checked against the source), a current
//     state, and the moment the workload noted, as of its time (checked
//     against what the source held then); then stop PostgreSQL (unless
//     --keep-running) and keep <dir> for a look.
//
// Every failure ends the demo with a message and a non-zero exit, and leaves
// nothing running: the daemon is stopped before PostgreSQL, also on Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

type options struct {
	bin         string
	dir         string
	duration    time.Duration
	keepRunning bool
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin/pg-cdc", "path to the pg-cdc binary")
	flag.StringVar(&o.dir, "dir", "demo-out", "working directory, recreated on each run and kept afterwards")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "how long the workload runs")
	flag.BoolVar(&o.keepRunning, "keep-running", false, "leave PostgreSQL running at the end, to look at the source too")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "pg-cdc-demo: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if o.duration < 5*time.Second {
		fmt.Fprintln(os.Stderr, "pg-cdc-demo: --duration must be at least 5s (the workload has several phases)")
		os.Exit(2)
	}

	// Ctrl-C or SIGTERM cancels ctx; run then stops the daemon and
	// PostgreSQL before returning.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	started := time.Now()
	err := run(ctx, o, os.Stdout)
	switch {
	case err == nil:
		fmt.Printf("\ndemo finished in %s\n", time.Since(started).Round(100*time.Millisecond))
	case ctx.Err() != nil:
		fmt.Fprintf(os.Stderr, "\npg-cdc-demo: interrupted (%v); pg-cdc and PostgreSQL were stopped, %s is kept\n", err, o.dir)
		os.Exit(130)
	default:
		fmt.Fprintf(os.Stderr, "\npg-cdc-demo: FAILED: %v\n", err)
		os.Exit(1)
	}
}

// demo holds what the steps share.
type demo struct {
	opts    options
	outMu   sync.Mutex
	out     io.Writer
	bin     string // absolute path of pg-cdc
	dir     string // absolute working directory
	cwd     string // for printing paths relative to where the user is
	cluster *pgtest.Cluster
	url     string // the shop database
	config  string // the pg-cdc.yml path
	sink    string
	state   string
	logPath string
}

func run(ctx context.Context, o options, out io.Writer) (err error) {
	d := &demo{opts: o, out: out}
	if d.bin, err = filepath.Abs(o.bin); err != nil {
		return err
	}
	if _, err := os.Stat(d.bin); err != nil {
		return fmt.Errorf("pg-cdc binary: %w (build it with 'make build', or pass --bin)", err)
	}
	if d.dir, err = filepath.Abs(o.dir); err != nil {
		return err
	}
	d.cwd, _ = os.Getwd()
	d.config = filepath.Join(d.dir, "pg-cdc.yml")
	d.sink = filepath.Join(d.dir, "sink")
	d.state = filepath.Join(d.dir, "state")
	d.logPath = filepath.Join(d.dir, "pg-cdc.log")

	d.step(1, "Start a throwaway PostgreSQL and create the sample database")
	if err := d.prepareDir(); err != nil {
		return err
	}
	if err := d.startPostgres(ctx); err != nil {
		return err
	}
	defer func() {
		if o.keepRunning && err == nil {
			d.printf("PostgreSQL keeps running: psql %q\n", d.url)
			d.printf("stop it with: kill -INT $(head -1 %s)\n", d.rel(filepath.Join(d.cluster.Dir, "data", "postmaster.pid")))
			return
		}
		d.printf("\nstopping PostgreSQL\n")
		if serr := d.cluster.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop PostgreSQL: %w", serr))
		}
	}()
	if err := d.createSchema(ctx); err != nil {
		return err
	}

	d.step(2, "Configure pg-cdc and take the initial snapshot")
	if err := d.writeConfig(); err != nil {
		return err
	}
	if err := d.runPGCDC(ctx, "init"); err != nil {
		return err
	}

	d.step(3, fmt.Sprintf("Stream with 'pg-cdc start' while a workload runs for %s", o.duration))
	dm, err := startDaemon(ctx, d.bin, d.config, d.logPath)
	if err != nil {
		return err
	}
	d.printf("$ %s -c %s start   (pid %d, log in %s)\n", d.rel(d.bin), d.rel(d.config), dm.pid(), d.rel(d.logPath))
	stopped := false
	defer func() {
		if !stopped {
			// An earlier step failed or Ctrl-C: stop the daemon before
			// PostgreSQL. Its exit status no longer matters.
			_, _ = dm.stop(stopTimeout)
		}
	}()
	if err := d.waitStreaming(ctx, dm); err != nil {
		return err
	}
	stats, err := d.runWorkload(ctx, dm)
	if err != nil {
		return err
	}
	stats.print(d.out)
	if err := d.waitCaughtUp(ctx); err != nil {
		return err
	}

	d.step(4, "Stop pg-cdc with SIGTERM (it drains, confirms, exits 0)")
	began := time.Now()
	code, err := dm.stop(stopTimeout)
	stopped = true
	if err != nil {
		d.printLogTail(40)
		return err
	}
	if code != 0 {
		d.printLogTail(40)
		return fmt.Errorf("pg-cdc start exited with code %d after SIGTERM, want 0 (log: %s)", code, d.rel(d.logPath))
	}
	d.printf("pg-cdc exited 0 after %s; its last log lines:\n", time.Since(began).Round(10*time.Millisecond))
	d.printLogTail(3)
	if err := d.runPGCDC(ctx, "status"); err != nil {
		return err
	}

	d.step(5, "Summary, read from the manifest and the Parquet files")
	if err := d.summarize(ctx, stats); err != nil {
		return err
	}

	d.step(6, "Read the data back through pg-cdc: SQL over the sink alone, now and as of a past moment")
	return d.readBack(ctx, stats)
}

// stopTimeout bounds the daemon's drain after SIGTERM: pg-cdc's own drain
// timeout (flush.drain_timeout_sec, 30 s by default) plus a margin.
const stopTimeout = 45 * time.Second

// prepareDir recreates the working directory. It refuses to delete a
// directory the demo did not create, and stops a PostgreSQL left running by
// an earlier --keep-running demo.
func (d *demo) prepareDir() error {
	const marker = ".pg-cdc-demo"
	entries, err := os.ReadDir(d.dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("working directory: %w", err)
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(d.dir, marker)); err != nil {
			return fmt.Errorf("%s exists and was not created by pg-cdc-demo; remove it or pass another --dir", d.dir)
		}
		if err := stopLeftoverPostgres(filepath.Join(d.dir, "postgres", "data", "postmaster.pid")); err != nil {
			return err
		}
		if err := os.RemoveAll(d.dir); err != nil {
			return fmt.Errorf("remove the previous demo's %s: %w", d.dir, err)
		}
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return fmt.Errorf("create working directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, marker), []byte("created by pg-cdc-demo; deleted and recreated on each run\n"), 0o644); err != nil {
		return fmt.Errorf("create working directory: %w", err)
	}
	d.printf("working directory %s (recreated on each run)\n", d.rel(d.dir))
	return nil
}

// stopLeftoverPostgres asks a postmaster from an earlier --keep-running run
// for a fast shutdown (SIGINT) and waits for it to go.
func stopLeftoverPostgres(pidFile string) error {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return nil // no server ran there, or it stopped cleanly
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return nil
	}
	if syscall.Kill(pid, syscall.SIGINT) != nil {
		return nil // not running any more
	}
	fmt.Printf("stopping the PostgreSQL (pid %d) left running by an earlier demo\n", pid)
	deadline := time.Now().Add(60 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("the PostgreSQL left by an earlier demo (pid %d) did not stop within 60s; stop it and retry", pid)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

func (d *demo) startPostgres(ctx context.Context) error {
	began := time.Now()
	c, err := pgtest.StartCluster(ctx, pgtest.Options{
		Dir:  filepath.Join(d.dir, "postgres"),
		Logf: func(format string, args ...any) { d.printf("  "+format+"\n", args...) },
	})
	if errors.Is(err, pgtest.ErrNoPostgres) {
		return fmt.Errorf("%w: run 'make postgres' (installs Debian's postgresql package)", err)
	}
	if err != nil {
		return err
	}
	d.cluster = c
	d.url = c.URL("shop")
	d.printf("PostgreSQL is up on 127.0.0.1:%d in %s (server log %s), %s\n",
		c.Port, d.rel(c.Dir), d.rel(c.LogPath()), time.Since(began).Round(10*time.Millisecond))

	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE shop"); err != nil {
		return fmt.Errorf("create database shop: %w", err)
	}
	return nil
}

// writeConfig writes the smallest useful configuration: everything not
// written here keeps its default (docs/configuration.md).
func (d *demo) writeConfig() error {
	cfg := fmt.Sprintf(`# Written by pg-cdc-demo. Keys not set here keep their defaults
# (see docs/configuration.md).
source:
  postgres:
    url: %q
storage:
  type: filesystem
  path: %q
state:
  path: %q
flush:
  interval_sec: 2        # a flush (one epoch) at least every 2 s while changes arrive
replication:
  standby_interval_sec: 2  # report the confirmed LSN often, so the progress lines show it move
metrics:
  listen: 127.0.0.1:0     # /metrics, /livez, /readyz on a free port (logged as metrics_addr)
log:
  level: info
  format: text
`, d.url, d.sink, d.state)
	if err := os.WriteFile(d.config, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	d.printf("wrote %s:\n", d.rel(d.config))
	for _, l := range strings.Split(strings.TrimRight(cfg, "\n"), "\n") {
		d.printf("  | %s\n", l)
	}
	return nil
}

// runPGCDC runs a short pg-cdc command and shows its output, indented.
func (d *demo) runPGCDC(ctx context.Context, args ...string) error {
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = a
		if strings.ContainsAny(a, " \"*()") {
			shown[i] = strconv.Quote(a) // as a shell would need it
		}
	}
	d.printf("$ %s -c %s %s\n", d.rel(d.bin), d.rel(d.config), strings.Join(shown, " "))
	out, code, err := runCommand(ctx, d.bin, append([]string{"-c", d.config}, args...)...)
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		d.printf("  %s\n", l)
	}
	if err != nil {
		return fmt.Errorf("pg-cdc %s: %w", strings.Join(args, " "), err)
	}
	if code != 0 {
		return fmt.Errorf("pg-cdc %s exited with code %d (see docs/exit-codes.md)", strings.Join(args, " "), code)
	}
	return nil
}

// waitStreaming waits until the daemon holds the replication slot.
func (d *demo) waitStreaming(ctx context.Context, dm *daemon) error {
	conn, err := pgx.Connect(ctx, d.url)
	if err != nil {
		return fmt.Errorf("connect to shop: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var active bool
		err := conn.QueryRow(ctx, `SELECT coalesce(bool_or(active), false) FROM pg_replication_slots WHERE slot_name = 'pg_cdc_slot'`).Scan(&active)
		if err != nil {
			return fmt.Errorf("read the slot: %w", err)
		}
		if active {
			d.printf("pg-cdc holds the replication slot and streams\n")
			return nil
		}
		if dm.exited() {
			d.printLogTail(30)
			return fmt.Errorf("pg-cdc start %s before it began streaming", dm.exitStatus())
		}
		if time.Now().After(deadline) {
			d.printLogTail(30)
			return errors.New("pg-cdc start did not begin streaming within 30s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (d *demo) step(n int, title string) {
	d.printf("\n==> %d/%d  %s\n", n, steps, title)
}

// steps is how many steps the demo has.
const steps = 6

// printf writes to the demo's output. The workload and the progress
// reporter print from their own goroutines, hence the lock.
func (d *demo) printf(format string, args ...any) {
	d.outMu.Lock()
	defer d.outMu.Unlock()
	fmt.Fprintf(d.out, format, args...)
}

// rel shows a path relative to the current directory when it lies below it.
func (d *demo) rel(p string) string {
	if d.cwd == "" {
		return p
	}
	r, err := filepath.Rel(d.cwd, p)
	if err != nil || strings.HasPrefix(r, "..") {
		return p
	}
	return r
}

func (d *demo) printLogTail(n int) {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		d.printf("  (no pg-cdc log: %v)\n", err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if n > 3 {
		d.printf("--- last %d lines of %s ---\n", len(lines), d.rel(d.logPath))
	}
	for _, l := range lines {
		d.printf("  %s\n", l)
	}
}

// waitCaughtUp waits until pg-cdc has made durable everything the workload
// committed. A SIGTERM drains only what pg-cdc has already received; the
// rest stays in the slot for the next start, which is safe but would make
// the summary's sink-versus-source check meaningless. A non-transactional
// logical message marks the end: pg-cdc records its position in the
// manifest only once every earlier transaction is durable.
func (d *demo) waitCaughtUp(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, d.url)
	if err != nil {
		return fmt.Errorf("connect to mark the end of the workload: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var marker string
	if err := conn.QueryRow(ctx, `SELECT pg_logical_emit_message(false, 'pg-cdc-demo', 'end')::text`).Scan(&marker); err != nil {
		return fmt.Errorf("mark the end of the workload: %w", err)
	}
	want, err := cdc.ParseLSN(marker)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, err := os.ReadFile(filepath.Join(d.sink, filepath.FromSlash(manifest.Key)))
		if err == nil {
			if m, err := manifest.Decode(b); err == nil && m.EndLSN >= want {
				d.printf("pg-cdc caught up: the manifest holds everything committed up to %s\n", want)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pg-cdc did not make the workload durable within 2 minutes (waiting for %s)", want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
