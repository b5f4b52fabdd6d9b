package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrNoPostgres means no usable PostgreSQL installation was found (no initdb
// and pg_ctl on PATH or under /usr/lib/postgresql/<version>/bin, or no
// "postgres" OS user to run them as when running as root).
var ErrNoPostgres = errors.New("PostgreSQL server binaries not available")

// Options configure StartCluster. The zero value is a fresh cluster in a new
// temporary directory on a free loopback port.
type Options struct {
	// Dir holds the cluster: Dir/data is the data directory, Dir/postgres.log
	// the server log, and Dir is also the Unix socket directory. Empty means a
	// new temporary directory, which Remove deletes. An existing data
	// directory is reused (its settings are rewritten for this start).
	Dir string
	// Port is the TCP port on 127.0.0.1. Zero picks a free one (and picks
	// again if another process takes it before the server binds it).
	Port int
	// BinDir is the directory holding initdb and pg_ctl. Empty searches PATH,
	// then /usr/lib/postgresql/15/bin, then other versions, newest first.
	BinDir string
	// Logf, when set, receives one line per step (initdb, start, stop).
	Logf func(format string, args ...any)
	// Settings are extra postgresql.conf lines ("name = value"), written
	// after the defaults so that they win; benchmarks use them, for example,
	// to restore logical_decoding_work_mem to PostgreSQL's own default. A line
	// may not contain a newline.
	Settings []string
	// HBA are pg_hba.conf lines put before pgtest's own, which trust every
	// loopback connection. The first line that matches decides, so a test
	// can make one role sign in with a password ("host all alice
	// 127.0.0.1/32 scram-sha-256") or a client certificate ("hostssl all
	// bob 127.0.0.1/32 cert"). A line may not contain a newline.
	HBA []string
	// Files are written into the data directory before every start, mode
	// 0600 and owned by the server's OS user (PostgreSQL refuses a key file
	// others can read), for Settings to name relative to the data
	// directory: ssl_cert_file = 'server.crt'. A name is one path element.
	Files map[string][]byte
}

// Cluster is a PostgreSQL cluster started by StartCluster. Its methods are
// safe for concurrent use.
type Cluster struct {
	// Port is the TCP port the server listens on, on 127.0.0.1.
	Port int
	// Dir holds the data directory, the log and the Unix socket.
	Dir string

	bin      string
	settings []string
	hba      []string
	files    map[string][]byte
	runAs    *osUser
	logf     func(format string, args ...any)
	autoDir  bool // Dir was created by StartCluster
	// autoPort: Port was picked here, so a start that loses the port to
	// another process may pick another one.
	autoPort bool

	mu      sync.Mutex // serialises Start, Stop, Kill and Remove
	running bool
	removed bool
	dbSeq   atomic.Int64 // for unique database names
}

// StartCluster creates (initdb) or reuses a cluster in opts.Dir and starts
// it. On error nothing is left running, and a temporary directory created
// here is removed. A missing installation gives an error matching
// ErrNoPostgres.
func StartCluster(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := findBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	runAs, err := lookupRunAs()
	if err != nil {
		return nil, err
	}
	for _, line := range opts.Settings {
		if strings.ContainsAny(line, "\r\n") {
			return nil, fmt.Errorf("setting %q: a setting is one line", line)
		}
	}
	for _, line := range opts.HBA {
		if strings.ContainsAny(line, "\r\n") {
			return nil, fmt.Errorf("pg_hba.conf line %q: a line may not contain a newline", line)
		}
	}
	for name := range opts.Files {
		if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
			return nil, fmt.Errorf("file %q: want a name in the data directory, without directories", name)
		}
	}
	c := &Cluster{Port: opts.Port, Dir: opts.Dir, bin: bin, settings: opts.Settings, hba: opts.HBA, files: opts.Files, runAs: runAs, logf: opts.Logf}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
			return nil, fmt.Errorf("create cluster directory: %w", err)
		}
		c.autoDir = true
	} else {
		if c.Dir, err = filepath.Abs(c.Dir); err != nil {
			return nil, fmt.Errorf("cluster directory %q: %w", opts.Dir, err)
		}
		if err := os.MkdirAll(c.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("create cluster directory: %w", err)
		}
	}
	if err := c.setup(ctx); err != nil {
		if c.autoDir {
			// Best effort: the setup error is the one worth reporting, and
			// the directory is in the temp dir.
			_ = os.RemoveAll(c.Dir)
		}
		return nil, err
	}
	return c, nil
}

func (c *Cluster) setup(ctx context.Context) error {
	if err := c.runAs.chown(c.Dir); err != nil {
		return fmt.Errorf("hand cluster directory to the postgres user: %w", err)
	}
	if c.Port == 0 {
		p, err := freePort()
		if err != nil {
			return err
		}
		c.Port, c.autoPort = p, true
	}
	if _, err := os.Stat(filepath.Join(c.dataDir(), "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		c.logf("pgtest: initdb %s", c.dataDir())
		// --no-sync: a test cluster need not survive power loss, and syncing
		// the fresh catalog costs seconds on slow disks.
		if _, err := c.command(ctx, "initdb", "-D", c.dataDir(), "-U", "postgres",
			"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
			return fmt.Errorf("initdb: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("inspect data directory: %w", err)
	}
	return c.Start(ctx)
}

// URL returns the connection URL of database db as the postgres superuser.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, url.PathEscape(db))
}

// LogPath is the server log file.
func (c *Cluster) LogPath() string { return filepath.Join(c.Dir, "postgres.log") }

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }

// Running reports whether the server was started and not since stopped,
// killed or removed through this Cluster.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// Start starts the server (after Stop or Kill). Starting a running cluster is
// a no-op.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startLocked(ctx)
}

func (c *Cluster) startLocked(ctx context.Context) error {
	if c.removed {
		return errors.New("start cluster: it has been removed")
	}
	if c.running {
		return nil
	}
	// A port picked by freePort can be taken by another process (another
	// test binary) before the postmaster binds it; pick again a few times.
	// After Kill, backends that were not in the postmaster's process group
	// hold its shared memory until they notice it died (milliseconds, more
	// on a loaded machine); the new postmaster refuses to start beside
	// them, so wait for them a while.
	sharedMemoryDeadline := time.Now().Add(15 * time.Second)
	for attempt := 1; ; attempt++ {
		if err := c.writeConfig(); err != nil {
			return err
		}
		c.logf("pgtest: start %s on 127.0.0.1:%d", c.dataDir(), c.Port)
		_, err := c.command(ctx, "pg_ctl", "-D", c.dataDir(), "-l", c.LogPath(), "-w", "-t", "60", "start")
		if err == nil {
			c.running = true
			return nil
		}
		if strings.Contains(c.logTail(5), "pre-existing shared memory block") && time.Now().Before(sharedMemoryDeadline) && ctx.Err() == nil {
			c.logf("pgtest: backends of the previous postmaster still hold its shared memory; starting again shortly")
			time.Sleep(250 * time.Millisecond)
			attempt--
			continue
		}
		if !c.autoPort || attempt == 3 || !c.logMentionsBindFailure() || ctx.Err() != nil {
			return fmt.Errorf("start PostgreSQL (log %s): %w\n%s", c.LogPath(), err, c.logTail(20))
		}
		p, perr := freePort()
		if perr != nil {
			return perr
		}
		c.Port = p
	}
}

// Stop stops the server with a fast shutdown (sessions are terminated,
// transactions rolled back), falling back to an immediate one. Stopping a
// stopped cluster is a no-op.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked()
}

func (c *Cluster) stopLocked() error {
	if !c.running {
		return nil
	}
	// Stop must work from a test's Cleanup, whose context is gone: use our
	// own bound instead of a caller's context.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.logf("pgtest: stop %s", c.dataDir())
	_, fastErr := c.command(ctx, "pg_ctl", "-D", c.dataDir(), "-m", "fast", "-w", "-t", "60", "stop")
	if fastErr == nil {
		c.running = false
		return nil
	}
	_, immErr := c.command(ctx, "pg_ctl", "-D", c.dataDir(), "-m", "immediate", "-w", "-t", "60", "stop")
	if immErr == nil {
		c.running = false
		return nil
	}
	return fmt.Errorf("stop PostgreSQL: %w", errors.Join(fastErr, immErr))
}

// Restart stops and starts the server.
func (c *Cluster) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.stopLocked(); err != nil {
		return err
	}
	return c.startLocked(ctx)
}

// Kill simulates a crash: SIGKILL to the postmaster named in postmaster.pid
// and to its process group (pg_ctl makes the postmaster a session leader, so
// the group is the postmaster and its backends), then waits until they are
// gone. Start afterwards runs crash recovery.
func (c *Cluster) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running {
		return errors.New("kill PostgreSQL: the cluster is not running")
	}
	pid, err := c.postmasterPID()
	if err != nil {
		return fmt.Errorf("kill PostgreSQL: %w", err)
	}
	if err := killGroup(pid); err != nil {
		return fmt.Errorf("kill PostgreSQL (pid %d): %w", pid, err)
	}
	c.running = false
	if syscall.Kill(pid, 0) == nil {
		// The dead postmaster is a zombie that no one has reaped yet. The
		// next postmaster would take its lock files for a live server's
		// (it probes the pid with kill 0), so remove them: it is dead.
		for _, f := range []string{
			filepath.Join(c.dataDir(), "postmaster.pid"),
			filepath.Join(c.Dir, fmt.Sprintf(".s.PGSQL.%d.lock", c.Port)),
		} {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("kill PostgreSQL: remove stale lock file: %w", err)
			}
		}
	}
	return nil
}

// Remove stops the server if it runs and deletes the cluster directory.
func (c *Cluster) Remove() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed {
		return nil
	}
	if err := c.stopLocked(); err != nil {
		return err
	}
	c.removed = true
	if err := os.RemoveAll(c.Dir); err != nil {
		return fmt.Errorf("remove cluster directory: %w", err)
	}
	return nil
}

// writeConfig (re)writes the settings on every start, so a reused data
// directory gets this start's port and socket directory.
func (c *Cluster) writeConfig() error {
	conf := fmt.Sprintf(`# Written by pgtest on every start; do not edit.
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
wal_level = logical
max_replication_slots = 32
max_wal_senders = 32
max_connections = 200
logical_decoding_work_mem = 64kB
fsync = off
full_page_writes = off
shared_buffers = 128MB
wal_sender_timeout = 60s
`, c.Port, strings.ReplaceAll(c.Dir, "'", "''"))
	if len(c.settings) > 0 {
		conf += "# Options.Settings\n" + strings.Join(c.settings, "\n") + "\n"
	}
	hba := `# Written by pgtest: loopback only, trust.
local all         all                trust
host  all         all  127.0.0.1/32  trust
host  replication all  127.0.0.1/32  trust
`
	if len(c.hba) > 0 {
		// First: the first matching line decides.
		hba = "# Options.HBA\n" + strings.Join(c.hba, "\n") + "\n" + hba
	}
	for name, content := range c.files {
		if err := c.writeDataFile(name, string(content)); err != nil {
			return err
		}
	}
	if err := c.writeDataFile("pgtest.conf", conf); err != nil {
		return err
	}
	if err := c.writeDataFile("pg_hba.conf", hba); err != nil {
		return err
	}
	main := filepath.Join(c.dataDir(), "postgresql.conf")
	b, err := os.ReadFile(main)
	if err != nil {
		return fmt.Errorf("read postgresql.conf: %w", err)
	}
	const include = "\ninclude 'pgtest.conf'\n"
	if !strings.Contains(string(b), include) {
		// Appended last so that our settings win over initdb's defaults.
		f, err := os.OpenFile(main, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("open postgresql.conf: %w", err)
		}
		_, werr := f.WriteString(include)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("write postgresql.conf: %w", werr)
		}
	}
	return nil
}

func (c *Cluster) writeDataFile(name, content string) error {
	p := filepath.Join(c.dataDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := c.runAs.chown(p); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

func (c *Cluster) logMentionsBindFailure() bool {
	b, err := os.ReadFile(c.LogPath())
	if err != nil {
		return false
	}
	s := string(b)
	return strings.Contains(s, "could not bind") || strings.Contains(s, "Address already in use")
}

// logTail returns the last n lines of the server log, for error messages.
func (c *Cluster) logTail(n int) string {
	b, err := os.ReadFile(c.LogPath())
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePort asks the kernel for a free loopback port. The port is free when
// this returns; see startLocked for the race that follows.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	return port, nil
}
