package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// SampleSnapshot counts the rows of t and reads the rows whose primary keys
// are keys (found holds, per key, every column of the row in text form, or
// nil when no row has that key), all in one transaction that imports the
// exported snapshot: the state a snapshot copy of t read, independently of
// that copy. A rebuild checks a new generation's files against it. The
// exporting connection must still be open and idle.
func (db *DB) SampleSnapshot(ctx context.Context, snapshot string, t *cdc.Table, keys [][]cdc.Datum) (rows int64, found [][]cdc.Datum, err error) {
	if snapshot == "" {
		return 0, nil, fmt.Errorf("sample table %s: no snapshot to read in", t.ID)
	}
	if err := validSnapshotName(snapshot); err != nil {
		return 0, nil, fmt.Errorf("sample table %s: %w", t.ID, err)
	}
	cols := make([]int, len(t.Columns))
	for i := range cols {
		cols[i] = i
	}
	err = db.with(ctx, func(c *pgx.Conn) error {
		rows, found = 0, nil
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		// A read-only transaction: its rollback cannot change what it read.
		defer func() { _ = tx.Rollback(context.Background()) }()
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+snapshot+"'"); err != nil {
			return fmt.Errorf("import snapshot %s: %w", snapshot, err)
		}
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{t.ID.Schema, t.ID.Name}.Sanitize()).Scan(&rows); err != nil {
			return fmt.Errorf("count rows: %w", err)
		}
		for _, key := range keys {
			sql, params, err := rowQuery(t, key, cols)
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
		return 0, nil, fmt.Errorf("sample table %s in snapshot %s on %s: %w", t.ID, snapshot, db.server, err)
	}
	return rows, found, nil
}
