package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// SnapshotTx is an open REPEATABLE READ READ ONLY transaction whose snapshot
// is exported: CopyTable reads tables under exactly that snapshot, on
// connections of their own, for as long as the transaction stays open.
// pg-cdc verify reads the source through it.
type SnapshotTx struct {
	db      *DB
	conn    *pgx.Conn
	tx      pgx.Tx
	name    string
	current cdc.Snapshot
}

// BeginSnapshot opens the transaction on a connection of its own, exports
// its snapshot and records it as pg_current_snapshot() reports it. Both are
// read by the transaction's first statement, which is the one that fixes a
// REPEATABLE READ snapshot, so they describe the same snapshot. The caller
// must Close it.
func (db *DB) BeginSnapshot(ctx context.Context) (*SnapshotTx, error) {
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
	var text string
	if err := tx.QueryRow(ctx, `SELECT pg_export_snapshot(), pg_current_snapshot()::text`).Scan(&s.name, &text); err != nil {
		s.Close()
		return nil, fmt.Errorf("export snapshot on %s: %w", db.server, err)
	}
	if err := validSnapshotName(s.name); err != nil {
		s.Close()
		return nil, fmt.Errorf("export snapshot on %s: %w", db.server, err)
	}
	if s.current, err = cdc.ParseSnapshot(text); err != nil {
		s.Close()
		return nil, fmt.Errorf("export snapshot on %s: %w", db.server, err)
	}
	return s, nil
}

// Current returns the transaction's snapshot.
func (s *SnapshotTx) Current() cdc.Snapshot { return s.current }

// CopyTable reads t under the snapshot (DB.CopyTable).
func (s *SnapshotTx) CopyTable(ctx context.Context, t *cdc.Table, fn func(values []cdc.Datum) error) (int64, error) {
	return s.db.CopyTable(ctx, s.name, t, fn)
}

// Close ends the transaction. Ending a read-only transaction cannot change
// anything, so the rollback's error is dropped; a connection it leaves in a
// bad state is closed by release instead of reused.
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
