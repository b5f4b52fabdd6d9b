package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// shared is the cluster of one test binary; see doc.go for why it is the one
// package-level variable.
var shared struct {
	mu          sync.Mutex
	mainRunning bool
	started     bool
	cluster     *Cluster
	err         error
}

// startTimeout bounds initdb plus the first start on a loaded machine.
const startTimeout = 3 * time.Minute

// Main runs the tests and then stops and removes the shared cluster, if one
// was started. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// A failure to stop the cluster turns a passing run into a failing one.
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.mainRunning = true
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.mainRunning = false
	if shared.cluster != nil {
		if err := shared.cluster.Remove(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: remove shared cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		shared.cluster = nil
	}
	return code
}

// Shared returns the cluster shared by every test of this test binary,
// starting it on first use. Tests must not stop, restart or kill it (use New
// for that) and should work in their own database (CreateDatabase).
//
// Without a PostgreSQL installation the test is skipped, or fails when the
// environment variable CI is true.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.mainRunning {
		tb.Fatal("pgtest.Shared: TestMain must call pgtest.Main, which stops the shared cluster after the tests")
	}
	if !shared.started {
		shared.started = true
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		shared.cluster, shared.err = StartCluster(ctx, Options{})
		cancel()
	}
	if shared.err != nil {
		skipOrFatal(tb, shared.err)
	}
	return shared.cluster
}

// New starts a cluster for this test alone, stopped and removed when the test
// ends. Use it for tests that stop, restart or kill PostgreSQL.
func New(tb testing.TB) *Cluster {
	tb.Helper()
	return NewWith(tb, Options{})
}

// NewWith is New with options, for a test that needs other server settings
// than the shared cluster's (Options.Settings: wal_level = replica, say).
func NewWith(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := StartCluster(ctx, opts)
	if err != nil {
		skipOrFatal(tb, err)
	}
	tb.Cleanup(func() {
		if err := c.Remove(); err != nil {
			tb.Errorf("pgtest: remove cluster: %v", err)
		}
	})
	return c
}

func skipOrFatal(tb testing.TB, err error) {
	tb.Helper()
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); errors.Is(err, ErrNoPostgres) && !ci {
		tb.Skipf("pgtest: %v", err)
		return
	}
	tb.Fatalf("pgtest: %v", err)
}

// CreateDatabase creates a database with a unique name and returns its URL.
// When the test ends, the database's replication slots are dropped (their
// walsenders terminated first) and then the database itself, even if
// sessions are still connected. If the cluster is not running at that point
// (a test stopped or killed it), nothing is dropped.
func (c *Cluster) CreateDatabase(tb testing.TB) string {
	tb.Helper()
	name := c.databaseName(tb.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if !c.Running() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.dropDatabase(ctx, name); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return c.URL(name)
}

// databaseName makes a valid, unique, recognisable name from a test name.
func (c *Cluster) databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	base := b.String()
	if len(base) > 40 {
		base = base[:40]
	}
	return fmt.Sprintf("t_%s_%d", base, c.dbSeq.Add(1))
}

// exec runs one statement in the postgres database.
func (c *Cluster) exec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// dropDatabase drops the database's replication slots, then the database. A
// logical slot keeps its database from being dropped, and an active slot
// cannot be dropped, so walsenders are terminated first; a terminated
// walsender releases its slot a moment later, hence the loop.
func (c *Cluster) dropDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for {
		rows, err := conn.Query(ctx, `SELECT slot_name::text, active_pid FROM pg_replication_slots WHERE database = $1`, name)
		if err != nil {
			return fmt.Errorf("list replication slots: %w", err)
		}
		type slot struct {
			name string
			pid  *int32
		}
		slots, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (slot, error) {
			var s slot
			return s, r.Scan(&s.name, &s.pid)
		})
		if err != nil {
			return fmt.Errorf("list replication slots: %w", err)
		}
		if len(slots) == 0 {
			break
		}
		for _, s := range slots {
			if s.pid != nil {
				if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, *s.pid); err != nil {
					return fmt.Errorf("terminate walsender %d of slot %s: %w", *s.pid, s.name, err)
				}
				continue
			}
			if _, err := conn.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, s.name); err != nil {
				var pgErr *pgconn.PgError
				// 42704: dropped meanwhile; 55006: picked up again; both are
				// settled by the next round.
				if !errors.As(err, &pgErr) || (pgErr.Code != "42704" && pgErr.Code != "55006") {
					return fmt.Errorf("drop replication slot %s: %w", s.name, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop replication slots: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return err
	}
	return nil
}
