package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TableShape is a table's columns as the catalog has them at one moment:
// OID, replica identity and every live column in attnum order, described as
// DescribeColumns describes them (types resolved, attnum, missing value).
// Missing is true when no table has that name any more.
type TableShape struct {
	ID              cdc.TableID
	OID             uint32
	ReplicaIdentity cdc.ReplicaIdentity
	Columns         []cdc.Column
	Missing         bool
}

// EmitAtShapes writes a non-transactional logical decoding message whose
// position in the WAL is exactly where the tables have the shapes it was
// built from. It locks the tables that exist in ACCESS SHARE mode (waiting
// at most lockTimeout), reads their shapes, lets build turn them into the
// message's content, and writes it with pg_logical_emit_message(false, …)
// before the locks are released. Every ALTER TABLE needs a lock that
// conflicts with ACCESS SHARE, so DDL on those tables committed either
// before the message (and build saw it) or after it; a replication stream
// that reaches the message has seen every change made under those shapes.
// build returning ok false writes nothing (emitted false). The locks are
// held for a few catalog reads: writes never wait, a waiting DDL waits that
// long.
func (db *DB) EmitAtShapes(ctx context.Context, tables []cdc.TableID, lockTimeout time.Duration, prefix string,
	build func([]TableShape) (content string, ok bool, err error)) (lsn cdc.LSN, emitted bool, err error) {
	err = db.with(ctx, func(c *pgx.Conn) error {
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		shapes := make([]TableShape, len(tables))
		var present []cdc.TableID
		for i, id := range tables {
			shapes[i].ID = id
			var oid *uint32
			if err := tx.QueryRow(ctx, `SELECT to_regclass($1)::oid`, qualified(id)).Scan(&oid); err != nil {
				return fmt.Errorf("look up table %s: %w", id, err)
			}
			if oid == nil {
				shapes[i].Missing = true
				continue
			}
			present = append(present, id)
		}
		if len(present) > 0 {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", lockTimeout.Milliseconds())); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, lockSQL(present)); err != nil {
				return fmt.Errorf("lock %s in ACCESS SHARE mode (a DDL, TRUNCATE or VACUUM FULL holds or awaits a conflicting lock): %w",
					lockedList(present), err)
			}
		}
		for i := range shapes {
			if shapes[i].Missing {
				continue
			}
			// Read on the locking transaction's connection: its locks are
			// held, so what it reads cannot change until the message is
			// written (READ COMMITTED: each statement sees the latest
			// committed catalog).
			if err := readShape(ctx, tx, &shapes[i]); err != nil {
				return err
			}
		}
		content, ok, err := build(shapes)
		if err != nil || !ok {
			return err
		}
		var text string
		if err := tx.QueryRow(ctx, `SELECT pg_logical_emit_message(false, $1, $2)::text`, prefix, content).Scan(&text); err != nil {
			return fmt.Errorf("emit logical message: %w", err)
		}
		if lsn, err = cdc.ParseLSN(text); err != nil {
			return fmt.Errorf("emit logical message: %w", err)
		}
		emitted = true
		return tx.Commit(ctx)
	})
	if err != nil {
		return 0, false, fmt.Errorf("read table shapes on %s: %w", db.server, err)
	}
	return lsn, emitted, nil
}

// readShape fills s with the table's OID, replica identity and live
// columns in attnum order.
func readShape(ctx context.Context, tx pgx.Tx, s *TableShape) error {
	var ident string
	err := tx.QueryRow(ctx, `SELECT c.oid, c.relreplident::text FROM pg_class c WHERE c.oid = to_regclass($1)`, qualified(s.ID)).Scan(&s.OID, &ident)
	if errors.Is(err, pgx.ErrNoRows) {
		s.Missing = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("read table %s: %w", s.ID, err)
	}
	s.ReplicaIdentity = replicaIdentity(ident)
	rows, err := tx.Query(ctx, `SELECT attname::text FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, s.OID)
	if err != nil {
		return fmt.Errorf("read columns of %s: %w", s.ID, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read columns of %s: %w", s.ID, err)
	}
	cols, err := describeColumns(ctx, tx.Conn(), s.OID, names)
	if err != nil {
		return fmt.Errorf("describe columns of %s: %w", s.ID, err)
	}
	s.Columns = cols
	return nil
}
