package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// SampleSnapshot counts the rows of t and reads the rows whose primary keys
// are keys (found holds, per key, every column of the row in text form, or
// nil when no row has that key), all in one transaction that imports the
// exported snapshot: the state a snapshot copy of t read, independently of
// that copy. A rebuild checks a new generation's files against it. The
// exporting connection must still be open and idle.
//
// rewritten is true when t's storage was replaced since the snapshot
// (TRUNCATE, or a rewriting ALTER TABLE: its relfilenode as the snapshot
// sees pg_class differs from the current one). Those are not MVCC-safe: a
// transaction whose snapshot predates them reads the new storage, so rows
// and found then describe neither the snapshot nor the copy. For a
// partitioned table the check covers its leaf partitions: rewritten when a
// leaf's storage was replaced, or the set of leaves is not the one the
// snapshot sees (a partition attached, detached, created or dropped since).
func (db *DB) SampleSnapshot(ctx context.Context, snapshot string, t *cdc.Table, keys [][]cdc.Datum) (rows int64, found [][]cdc.Datum, rewritten bool, err error) {
	if snapshot == "" {
		return 0, nil, false, fmt.Errorf("sample table %s: no snapshot to read in", t.ID)
	}
	if err := validSnapshotName(snapshot); err != nil {
		return 0, nil, false, fmt.Errorf("sample table %s: %w", t.ID, err)
	}
	cols := make([]int, len(t.Columns))
	for i := range cols {
		cols[i] = i
	}
	err = db.with(ctx, func(c *pgx.Conn) error {
		rows, found, rewritten = 0, nil, false
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		// A read-only transaction: its rollback cannot change what it read.
		defer func() { _ = tx.Rollback(context.Background()) }()
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+snapshot+"'"); err != nil {
			return fmt.Errorf("import snapshot %s: %w", snapshot, err)
		}
		// The lock keeps a TRUNCATE from slipping in between the check
		// below and the reads, and taking it processes the catalog
		// invalidations, so pg_relation_filenode is current.
		if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{t.ID.Schema, t.ID.Name}.Sanitize()+" IN ACCESS SHARE MODE"); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		// pg_class as of the snapshot, against the storage in use now
		// (pg_relation_filenode reads the current catalog). A partitioned
		// table has no storage of its own (relfilenode 0): its leaves'
		// are compared instead.
		var (
			kind      string
			then, now *uint32
		)
		if err := tx.QueryRow(ctx, "SELECT relkind::text, relfilenode, pg_relation_filenode(oid)::oid FROM pg_class WHERE oid = $1", t.OID).Scan(&kind, &then, &now); err != nil {
			return fmt.Errorf("read relfilenode: %w", err)
		}
		if kind == "p" {
			changed, err := leavesRewritten(ctx, tx, t.OID)
			if err != nil {
				return err
			}
			if changed {
				rewritten = true
				return nil
			}
		} else if then == nil || now == nil || *then != *now {
			rewritten = true
			return nil
		}
		from, err := lookupRowSource(ctx, tx, t.ID)
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+from).Scan(&rows); err != nil {
			return fmt.Errorf("count rows: %w", err)
		}
		for _, key := range keys {
			sql, params, err := rowQuery(t, from, key, cols)
			if err != nil {
				return err
			}
			row, ok, err := queryRow(ctx, tx.Conn().PgConn(), sql, params)
			if err != nil {
				return err
			}
			if !ok {
				row = nil
			}
			found = append(found, row)
		}
		return nil
	})
	if err != nil {
		return 0, nil, false, fmt.Errorf("sample table %s in snapshot %s on %s: %w", t.ID, snapshot, db.server, err)
	}
	return rows, found, rewritten, nil
}

// leavesSQL lists the leaf partitions of the partitioned table $1 as the
// transaction's snapshot sees pg_inherits and pg_class (pg_partition_tree
// reads the current catalog instead), with their relfilenodes then.
const leavesSQL = `WITH RECURSIVE tree(relid) AS (
		SELECT $1::oid
		UNION ALL
		SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.relid)
	SELECT coalesce(array_agg(c.oid ORDER BY c.oid), '{}'), coalesce(array_agg(c.relfilenode ORDER BY c.oid), '{}')
	FROM tree JOIN pg_class c ON c.oid = tree.relid
	WHERE c.relkind NOT IN ('p', 'I')`

// currentLeavesSQL lists the leaf partitions of $1 in the current catalog,
// with the storage each uses now (0 for a leaf without storage, as a
// foreign table's relfilenode is).
const currentLeavesSQL = `SELECT coalesce(array_agg(relid::oid ORDER BY relid::oid), '{}'),
		coalesce(array_agg(coalesce(pg_relation_filenode(relid), 0)::oid ORDER BY relid::oid), '{}')
	FROM pg_partition_tree($1::oid) WHERE isleaf`

// leavesRewritten reports whether the leaves of the partitioned table oid
// differ between the transaction's snapshot and the current catalog: a
// leaf added or gone, or a leaf's storage replaced.
func leavesRewritten(ctx context.Context, tx pgx.Tx, oid uint32) (bool, error) {
	var thenOIDs, thenNodes, nowOIDs, nowNodes []uint32
	if err := tx.QueryRow(ctx, leavesSQL, oid).Scan(&thenOIDs, &thenNodes); err != nil {
		return false, fmt.Errorf("read the partitions as of the snapshot: %w", err)
	}
	if err := tx.QueryRow(ctx, currentLeavesSQL, oid).Scan(&nowOIDs, &nowNodes); err != nil {
		return false, fmt.Errorf("read the partitions: %w", err)
	}
	return !slices.Equal(thenOIDs, nowOIDs) || !slices.Equal(thenNodes, nowNodes), nil
}
