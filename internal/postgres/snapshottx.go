package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// SnapshotTx is an open REPEATABLE READ READ ONLY transaction that holds
// ACCESS SHARE locks on the tables it reads: CopyTable reads them under
// exactly its snapshot, for as long as the transaction stays open.
// pg-cdc verify reads the source through it.
//
// The locks are taken before the snapshot, as pg_dump does, because
// TRUNCATE and table rewrites (ALTER TABLE … TYPE, VACUUM FULL, CLUSTER)
// are not MVCC-safe: one that commits after the snapshot leaves the table
// empty (or rewritten) for it. With the locks held they wait until Close,
// and so do the writes queued behind them; plain INSERT, UPDATE and DELETE
// never wait. The copies run on the transaction's own connection: a second
// connection asking for the same lock would queue behind a waiting TRUNCATE
// that waits for this transaction, a deadlock PostgreSQL cannot see.
type SnapshotTx struct {
	db      *DB
	conn    *pgx.Conn
	tx      pgx.Tx
	current cdc.Snapshot
}

// BeginSnapshot opens the transaction on a connection of its own, locks
// tables in ACCESS SHARE mode (waiting at most lockTimeout, 0 for no limit)
// and records its snapshot as pg_current_snapshot() reports it. That is the
// transaction's first statement that needs a snapshot (SET and LOCK do
// not), so it fixes the REPEATABLE READ snapshot the copies read, after
// the locks are held. The caller must Close it.
func (db *DB) BeginSnapshot(ctx context.Context, tables []cdc.TableID, lockTimeout time.Duration) (*SnapshotTx, error) {
	c, err := db.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin snapshot: %w", err)
	}
	tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		db.release(c)
		return nil, fmt.Errorf("begin snapshot on %s: %w", db.server, err)
	}
	s := &SnapshotTx{db: db, conn: c, tx: tx}
	if len(tables) > 0 {
		// lock_timeout takes no parameters; the value is an integer.
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", lockTimeout.Milliseconds())); err != nil {
			s.Close()
			return nil, fmt.Errorf("begin snapshot on %s: %w", db.server, err)
		}
		if _, err := tx.Exec(ctx, lockSQL(tables)); err != nil {
			s.Close()
			return nil, fmt.Errorf("lock %s in ACCESS SHARE mode on %s (a TRUNCATE, DDL or VACUUM FULL holds or awaits a conflicting lock): %w",
				lockedList(tables), db.server, err)
		}
	}
	var text string
	if err := tx.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&text); err != nil {
		s.Close()
		return nil, fmt.Errorf("read snapshot on %s: %w", db.server, err)
	}
	if s.current, err = cdc.ParseSnapshot(text); err != nil {
		s.Close()
		return nil, fmt.Errorf("read snapshot on %s: %w", db.server, err)
	}
	return s, nil
}

// lockSQL locks the tables for reading (tableList quotes the names).
func lockSQL(tables []cdc.TableID) string {
	return "LOCK TABLE " + tableList(tables) + " IN ACCESS SHARE MODE"
}

// lockedList names the tables for an operator.
func lockedList(tables []cdc.TableID) string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.String()
	}
	return strings.Join(names, ", ")
}

// Current returns the transaction's snapshot.
func (s *SnapshotTx) Current() cdc.Snapshot { return s.current }

// CopyTable reads every row of t under the snapshot, with DB.CopyTable's
// contract for fn and the values, on the transaction's connection. t should
// be one of the tables BeginSnapshot locked. A failed copy aborts the
// transaction: later copies fail too.
func (s *SnapshotTx) CopyTable(ctx context.Context, t *cdc.Table, fn func(values []cdc.Datum) error) (int64, error) {
	if s.tx == nil {
		return 0, fmt.Errorf("copy table %s: the snapshot transaction is closed", t.ID)
	}
	from, err := lookupRowSource(ctx, s.tx, t.ID)
	if err != nil {
		return 0, fmt.Errorf("copy table %s from %s under the snapshot: %w", t.ID, s.db.server, err)
	}
	p := newCopyParser(len(t.Columns), fn)
	tag, err := s.conn.PgConn().CopyTo(ctx, p, copySQL(t, from))
	if err == nil {
		err = p.Close()
	}
	if err == nil && tag.RowsAffected() != p.rows {
		err = fmt.Errorf("server reported %d rows, parsed %d", tag.RowsAffected(), p.rows)
	}
	if err != nil {
		return p.rows, fmt.Errorf("copy table %s from %s under the snapshot: %w", t.ID, s.db.server, err)
	}
	return p.rows, nil
}

// Close ends the transaction, releasing its locks. Ending a read-only
// transaction cannot change anything, so the rollback's error is dropped; a
// connection it leaves in a bad state is closed by release instead of
// reused. Closing twice is a no-op.
func (s *SnapshotTx) Close() error {
	if s.tx != nil {
		_ = s.tx.Rollback(context.Background())
		s.tx = nil
		s.db.release(s.conn)
	}
	return nil
}

// EmitMessage commits a transaction holding one transactional logical
// decoding message (pg_logical_emit_message(true, prefix, content)) and
// returns the end of the message's WAL record: the transaction's commit
// record comes after it, so a stream position at or past the returned LSN
// includes every transaction that had committed when the message was
// written. The role needs EXECUTE on pg_logical_emit_message (superusers
// and, by default, every role on PostgreSQL 14 and 15).
func (db *DB) EmitMessage(ctx context.Context, prefix, content string) (cdc.LSN, error) {
	var text string
	err := db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT pg_logical_emit_message(true, $1, $2)::text`, prefix, content).Scan(&text)
	})
	if err != nil {
		return 0, fmt.Errorf("emit logical message on %s: %w", db.server, err)
	}
	lsn, err := cdc.ParseLSN(text)
	if err != nil {
		return 0, fmt.Errorf("emit logical message on %s: %w", db.server, err)
	}
	return lsn, nil
}
