package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// ReadChunk copies one backfill chunk of t (design.md §5): the next limit rows
// in primary-key order after the key after (text form, one value per key
// column; nil: from the beginning), calling fn for each with DB.CopyTable's
// contract. It returns the snapshot the chunk was read under.
//
// The read runs in a REPEATABLE READ READ ONLY transaction on a connection
// of its own: ACCESS SHARE lock on t first (TRUNCATE and table rewrites are
// not MVCC-safe: one that committed after the snapshot would leave the table
// empty for it, and an empty chunk ends the backfill), then
// pg_current_snapshot(), the transaction's first statement that takes a
// snapshot, so it is the snapshot the COPY reads, then the COPY. The lock
// waits as long as ctx allows: plain DML never conflicts with it.
//
// The key values travel as quoted literals (COPY takes no parameters) that
// the server reads with the key columns' own input functions, under
// standard_conforming_strings, so any text round-trips.
func (db *DB) ReadChunk(ctx context.Context, t *cdc.Table, after []string, limit int, fn func(values []cdc.Datum) error) (cdc.Snapshot, int64, error) {
	// The query is checked before a connection is taken, and written
	// again once the table's kind is known.
	if _, err := chunkSQL(t, "", after, limit); err != nil {
		return cdc.Snapshot{}, 0, err
	}
	c, err := db.acquire(ctx)
	if err != nil {
		return cdc.Snapshot{}, 0, fmt.Errorf("read chunk of %s: %w", t.ID, err)
	}
	defer db.release(c)
	tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return cdc.Snapshot{}, 0, fmt.Errorf("read chunk of %s on %s: begin: %w", t.ID, db.server, err)
	}
	// Ending a read-only transaction cannot change what it read.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	for _, stmt := range []string{"SET LOCAL standard_conforming_strings = on", "SET LOCAL lock_timeout = 0", lockSQL([]cdc.TableID{t.ID})} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return cdc.Snapshot{}, 0, fmt.Errorf("read chunk of %s on %s: %s: %w", t.ID, db.server, stmt, err)
		}
	}
	// One statement, so the snapshot is still the first one taken.
	var (
		text        string
		partitioned bool
	)
	if err := tx.QueryRow(ctx, `SELECT pg_current_snapshot()::text, `+partitionedSQL, pgx.Identifier{t.ID.Schema, t.ID.Name}.Sanitize()).
		Scan(&text, &partitioned); err != nil {
		return cdc.Snapshot{}, 0, fmt.Errorf("read chunk of %s on %s: snapshot: %w", t.ID, db.server, err)
	}
	snap, err := cdc.ParseSnapshot(text)
	if err != nil {
		return cdc.Snapshot{}, 0, fmt.Errorf("read chunk of %s on %s: %w", t.ID, db.server, err)
	}
	sql, err := chunkSQL(t, rowSource(t.ID, partitioned), after, limit)
	if err != nil {
		return cdc.Snapshot{}, 0, err
	}
	p := newCopyParser(len(t.Columns), fn)
	tag, err := c.PgConn().CopyTo(ctx, p, sql)
	if err == nil {
		err = p.Close()
	}
	if err == nil && tag.RowsAffected() != p.rows {
		err = fmt.Errorf("server reported %d rows, parsed %d", tag.RowsAffected(), p.rows)
	}
	if err != nil {
		return cdc.Snapshot{}, p.rows, fmt.Errorf("read chunk of %s after key %v on %s: %w", t.ID, after, db.server, err)
	}
	return snap, p.rows, nil
}

// chunkSQL is the COPY of one chunk of from (t's rowSource): columns by
// name in t.Columns order, rows after the key after, in key order.
func chunkSQL(t *cdc.Table, from string, after []string, limit int) (string, error) {
	if len(t.PrimaryKey) == 0 {
		return "", fmt.Errorf("read chunk of %s: the table has no primary key", t.ID)
	}
	if limit <= 0 {
		return "", fmt.Errorf("read chunk of %s: chunk size %d", t.ID, limit)
	}
	if after != nil && len(after) != len(t.PrimaryKey) {
		return "", fmt.Errorf("read chunk of %s: last key has %d values for %d key columns", t.ID, len(after), len(t.PrimaryKey))
	}
	cols := make([]string, len(t.Columns))
	for i, col := range t.Columns {
		cols[i] = pgx.Identifier{col.Name}.Sanitize()
	}
	keys := make([]string, len(t.PrimaryKey))
	for i, k := range t.PrimaryKey {
		keys[i] = pgx.Identifier{k}.Sanitize()
	}
	var b strings.Builder
	b.WriteString("COPY (SELECT " + strings.Join(cols, ", ") + " FROM " + from)
	if after != nil {
		lits := make([]string, len(after))
		for i, v := range after {
			if strings.IndexByte(v, 0) >= 0 {
				return "", fmt.Errorf("read chunk of %s: key column %q holds a NUL byte", t.ID, t.PrimaryKey[i])
			}
			lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		}
		// A row comparison compares column by column in key order, with
		// each column's own type and collation (the literals take the
		// columns' types), exactly as ORDER BY sorts.
		fmt.Fprintf(&b, " WHERE (%s) > (%s)", strings.Join(keys, ", "), strings.Join(lits, ", "))
	}
	fmt.Fprintf(&b, " ORDER BY %s LIMIT %d) TO STDOUT", strings.Join(keys, ", "), limit)
	return b.String(), nil
}

// EmitMarker writes a non-transactional logical decoding message
// (pg_logical_emit_message(false, prefix, content)) and returns its LSN. The
// stream delivers it after every transaction whose commit record precedes
// it: a backfill chunk's marker.
func (db *DB) EmitMarker(ctx context.Context, prefix, content string) (cdc.LSN, error) {
	var text string
	err := db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT pg_logical_emit_message(false, $1, $2)::text`, prefix, content).Scan(&text)
	})
	if err != nil {
		return 0, fmt.Errorf("emit marker %s on %s: %w", content, db.server, err)
	}
	lsn, err := cdc.ParseLSN(text)
	if err != nil {
		return 0, fmt.Errorf("emit marker %s on %s: %w", content, db.server, err)
	}
	return lsn, nil
}

// EstimateRows returns pg_class.reltuples of the table (0 when never
// analysed): an estimate for progress reports.
func (db *DB) EstimateRows(ctx context.Context, id cdc.TableID) (int64, error) {
	var n float64
	err := db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT greatest(reltuples, 0)::float8 FROM pg_class WHERE oid = $1::regclass`,
			pgx.Identifier{id.Schema, id.Name}.Sanitize()).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("estimate rows of %s on %s: %w", id, db.server, err)
	}
	return int64(n), nil
}

// WaitInFlight waits until every transaction that had an xid when it was
// called has ended (the xmin of a fresh snapshot has passed the xmax of the
// first), polling every interval. After ALTER PUBLICATION … ADD TABLE it
// makes the publication's boundary sharp for a backfill: a transaction
// that began before the ALTER (whose changes the stream may or may not
// publish, depending on when its catalog snapshot was taken) has finished,
// so every chunk snapshot taken afterwards sees it; transactions that
// begin later are published.
func (db *DB) WaitInFlight(ctx context.Context, interval time.Duration, waiting func(xmin, until cdc.XID)) error {
	var first string
	err := db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text`).Scan(&first)
	})
	if err != nil {
		return fmt.Errorf("wait for transactions in flight on %s: %w", db.server, err)
	}
	until, err := strconv.ParseUint(first, 10, 64)
	if err != nil {
		return fmt.Errorf("wait for transactions in flight on %s: xmax %q: %w", db.server, first, err)
	}
	for n := 0; ; n++ {
		xmin, err := db.CurrentXID(ctx)
		if err != nil {
			return err
		}
		if uint64(xmin) >= until {
			return nil
		}
		if waiting != nil && n%50 == 49 {
			waiting(xmin, cdc.XID(until))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
