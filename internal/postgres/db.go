package postgres

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// sessionParams are the run-time settings sent in the startup packet of every
// connection this package opens. They fix the text output of the types whose
// form depends on settings, so COPY (snapshot) and pgoutput (stream) produce
// identical bytes for the same value, whatever the server's or the role's
// defaults are.
func sessionParams() map[string]string {
	return map[string]string{
		"DateStyle":          "ISO, YMD",
		"TimeZone":           "UTC",
		"IntervalStyle":      "postgres",
		"extra_float_digits": "3", // shortest exact float text (PG 12+)
		"bytea_output":       "hex",
		"application_name":   "pg-cdc",
	}
}

func applySessionParams(cfg *pgconn.Config) {
	for k, v := range sessionParams() {
		cfg.RuntimeParams[k] = v
	}
}

// serverName names a server in errors and logs without the password.
func serverName(cfg *pgconn.Config) string {
	return fmt.Sprintf("%s:%d/%s (user %s)", cfg.Host, cfg.Port, cfg.Database, cfg.User)
}

// maxIdle bounds the connections DB keeps open between calls.
const maxIdle = 4

// DB is a SQL connection source for catalog queries and snapshot COPY. It
// keeps a few idle connections for reuse and opens more on demand, so
// parallel CopyTable calls each get their own session.
//
// pgxpool would do this, but it needs github.com/jackc/puddle/v2, which is not
// in go.mod; this is the small subset pg-cdc uses (see the package report).
type DB struct {
	spec   ConnSpec
	server string

	mu     sync.Mutex
	idle   []*pgx.Conn
	closed bool

	// partitioned caches, per table OID (uint32), whether the table is
	// partitioned (bool): see rowSourceOf.
	partitioned sync.Map
}

// Connect checks that the server is reachable (one connection, kept for
// reuse) and returns a DB. Every further connection DB opens asks spec
// again. Errors name the server, never the URL.
func Connect(ctx context.Context, spec ConnSpec) (*DB, error) {
	db := &DB{spec: spec}
	conn, err := db.connect(ctx)
	if err != nil {
		return nil, err
	}
	db.server = serverName(&conn.Config().Config)
	db.release(conn)
	return db, nil
}

// Server names the server, as the first connection reached it:
// host:port/database (user), without the password.
func (db *DB) Server() string { return db.server }

// Close closes the idle connections; connections in use are closed when their
// call returns. Calls after Close fail.
func (db *DB) Close() {
	db.mu.Lock()
	idle := db.idle
	db.idle, db.closed = nil, true
	db.mu.Unlock()
	for _, c := range idle {
		closeConn(c)
	}
}

func (db *DB) acquire(ctx context.Context) (*pgx.Conn, error) {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil, fmt.Errorf("use connection to %s: %w", db.server, pgconn.ErrConnClosed)
	}
	for len(db.idle) > 0 {
		c := db.idle[len(db.idle)-1]
		db.idle = db.idle[:len(db.idle)-1]
		if !c.IsClosed() {
			db.mu.Unlock()
			return c, nil
		}
	}
	db.mu.Unlock()
	return db.connect(ctx)
}

// connect opens a new physical connection, with the URL and password as
// db.spec gives them now.
func (db *DB) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := db.spec.connConfig(ctx)
	if err != nil {
		return nil, err
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, connectError("connect to", serverName(&cfg.Config), err)
	}
	return c, nil
}

// release returns a connection for reuse when it is healthy and outside any
// transaction, and closes it otherwise.
func (db *DB) release(c *pgx.Conn) {
	if c.IsClosed() {
		// A failed call may leave pgconn closing the socket in the
		// background (bounded by its own timeout); wait, so no goroutine
		// outlives the call that used the connection.
		<-c.PgConn().CleanupDone()
		return
	}
	if c.PgConn().TxStatus() == 'I' && !c.PgConn().IsBusy() {
		db.mu.Lock()
		if !db.closed && len(db.idle) < maxIdle {
			db.idle = append(db.idle, c)
			db.mu.Unlock()
			return
		}
		db.mu.Unlock()
	}
	closeConn(c)
}

// closeConn discards a connection. Its error is dropped on purpose: the
// connection is being thrown away, and a failed goodbye (Terminate) leaves
// nothing to undo; the server ends the session when the socket closes.
func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// with runs fn on a connection of its own.
func (db *DB) with(ctx context.Context, fn func(*pgx.Conn) error) error {
	c, err := db.acquire(ctx)
	if err != nil {
		return classify(err)
	}
	defer db.release(c)
	return classify(fn(c))
}

// Identity identifies the upstream cluster and database; the manifest records
// it so that a different server behind the same address is refused.
type Identity struct {
	SystemIdentifier string // pg_control_system().system_identifier, decimal
	Timeline         int32
	Database         string
}

// Identity reads the system identifier, the timeline of the latest checkpoint
// and the current database. pg_control_system and pg_control_checkpoint are
// restricted to superusers and pg_monitor members by default; a role with
// only REPLICATION can use ReplConn.IdentifySystem instead.
func (db *DB) Identity(ctx context.Context) (Identity, error) {
	var id Identity
	err := db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT (SELECT system_identifier::text FROM pg_control_system()),
			(SELECT timeline_id FROM pg_control_checkpoint()), current_database()`).
			Scan(&id.SystemIdentifier, &id.Timeline, &id.Database)
	})
	if err != nil {
		return Identity{}, fmt.Errorf("read identity of %s: %w", db.server, err)
	}
	return id, nil
}

// CurrentXID returns the xmin of the current snapshot as a 64-bit,
// epoch-extended transaction id: a reference for cdc.ExtendXID that is older
// than every transaction still in flight.
func (db *DB) CurrentXID(ctx context.Context) (cdc.XID, error) {
	var s string
	err := db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&s)
	})
	if err != nil {
		return 0, fmt.Errorf("read current transaction id on %s: %w", db.server, err)
	}
	x, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read current transaction id on %s: %q: %w", db.server, s, err)
	}
	return cdc.XID(x), nil
}
