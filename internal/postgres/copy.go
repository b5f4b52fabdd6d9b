package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// CopyTable reads every row of t and calls fn once per row, in the server's
// order, with the values in t.Columns order in PostgreSQL's text form
// (cdc.DatumText, or cdc.DatumNull). The values, and the bytes they point to,
// are valid only during the call: fn must convert or copy them before it
// returns. It returns the number of rows handed to fn, also on error.
//
// The read runs in a REPEATABLE READ READ ONLY transaction on a connection of
// its own. With snapshot non-empty the transaction first imports that
// exported snapshot (SET TRANSACTION SNAPSHOT), so it sees exactly what the
// snapshot saw; the exporting replication connection must not have run
// another command since CreateSlot, or the import fails. With snapshot empty
// it sees the data as of its start.
//
// The rows are streamed: COPY (SELECT columns FROM table) TO STDOUT in text
// format, parsed as it arrives; no more than one row is held in memory. The
// parse happens inside the COPY's write callback on the caller's goroutine,
// so fn runs on the caller's goroutine too and no goroutine is started
// (PostgreSQL sends one protocol message per row; copyParser also copes
// with rows split across messages).
//
// Errors name the table and, for a malformed row or an error from fn, the row
// number (from 1); fn's error is wrapped with %w. Cancelling ctx aborts the
// COPY. The row count is checked against the server's "COPY n" tag.
func (db *DB) CopyTable(ctx context.Context, snapshot string, t *cdc.Table, fn func(values []cdc.Datum) error) (rows int64, err error) {
	if err := validSnapshotName(snapshot); err != nil {
		return 0, fmt.Errorf("copy table %s: %w", t.ID, err)
	}
	c, err := db.acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("copy table %s: %w", t.ID, err)
	}
	defer db.release(c)

	p := newCopyParser(len(t.Columns), fn)
	err = copyIn(ctx, c, snapshot, t, p)
	if err != nil {
		return p.rows, fmt.Errorf("copy table %s from %s: %w", t.ID, db.server, err)
	}
	return p.rows, nil
}

func copyIn(ctx context.Context, c *pgx.Conn, snapshot string, t *cdc.Table, p *copyParser) error {
	tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// Ending a read-only transaction cannot change what it read: the
	// rollback's own error is dropped, and a connection it leaves in a bad
	// state is closed by release instead of reused.
	defer func() { _ = tx.Rollback(context.Background()) }()
	if snapshot != "" {
		// SET TRANSACTION SNAPSHOT takes no parameters; the name was checked
		// by validSnapshotName.
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+snapshot+"'"); err != nil {
			return fmt.Errorf("import snapshot %s: %w", snapshot, err)
		}
	}
	from, err := lookupRowSource(ctx, tx, t.ID)
	if err != nil {
		return err
	}
	tag, err := tx.Conn().PgConn().CopyTo(ctx, p, copySQL(t, from))
	if err != nil {
		return err
	}
	if err := p.Close(); err != nil {
		return err
	}
	if tag.RowsAffected() != p.rows {
		return fmt.Errorf("server reported %d rows, parsed %d", tag.RowsAffected(), p.rows)
	}
	return nil
}

// copySQL selects the columns by name, in t.Columns order, so that the
// values line up with the table description even if the table has dropped
// or generated columns; from is t's rowSource.
func copySQL(t *cdc.Table, from string) string {
	cols := make([]string, len(t.Columns))
	for i, col := range t.Columns {
		cols[i] = pgx.Identifier{col.Name}.Sanitize()
	}
	return "COPY (SELECT " + strings.Join(cols, ", ") + " FROM " + from + ") TO STDOUT"
}

// rowSource is the FROM item that reads exactly the rows the stream
// delivers under table id. For an ordinary table that is ONLY id: the rows
// of its inheritance children are published under each child
// (EnsurePublication adds every table with ONLY), so reading them as the
// parent's too would put them in the parent's sink table, where no update
// or delete of theirs ever arrives. For a partitioned table it is id
// itself: it holds no rows of its own (ONLY would read none), and its
// partitions' rows are published under it (publish_via_partition_root).
func rowSource(id cdc.TableID, partitioned bool) string {
	name := pgx.Identifier{id.Schema, id.Name}.Sanitize()
	if partitioned {
		return name
	}
	return "ONLY " + name
}

// partitionedSQL says whether the table named $1 (quoted, schema first) is
// partitioned; a table that does not exist is not, and the read that
// follows names it in its error.
const partitionedSQL = `EXISTS (SELECT 1 FROM pg_class WHERE oid = to_regclass($1) AND relkind = 'p')`

// rowQuerier is a connection or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// lookupRowSource reads id's kind from the catalog and returns its
// rowSource. The kind is looked up at each read, not carried with the
// table: a table the stream found while running comes from the manifest,
// which does not record it.
func lookupRowSource(ctx context.Context, q rowQuerier, id cdc.TableID) (string, error) {
	var partitioned bool
	if err := q.QueryRow(ctx, "SELECT "+partitionedSQL, pgx.Identifier{id.Schema, id.Name}.Sanitize()).Scan(&partitioned); err != nil {
		return "", fmt.Errorf("read the kind of table %s: %w", id, err)
	}
	return rowSource(id, partitioned), nil
}

// validSnapshotName accepts the names pg_export_snapshot and
// CREATE_REPLICATION_SLOT produce ("00000003-0000001B-1"): hex digits and
// dashes. Anything else is refused before it reaches SQL.
func validSnapshotName(s string) error {
	if len(s) > 64 {
		return fmt.Errorf("snapshot name %q: too long", s[:64])
	}
	for _, r := range s {
		if !(r == '-' || (r >= '0' && r <= '9') || (r >= 'A' && r <= 'F') || (r >= 'a' && r <= 'f')) {
			return fmt.Errorf("snapshot name %q: want hex digits and dashes", s)
		}
	}
	return nil
}
