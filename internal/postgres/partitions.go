package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// PartitionLeaves returns, for each of tables that is partitioned, its
// leaf partitions' OIDs in ascending order (sub-partitions walked down to
// the leaves; a partitioned table with no partition has none). Tables that
// are not partitioned, or do not exist, are absent.
func (db *DB) PartitionLeaves(ctx context.Context, tables []cdc.TableID) (map[cdc.TableID][]uint32, error) {
	nsp, names := splitIDs(tables)
	out := map[cdc.TableID][]uint32{}
	err := db.with(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, `SELECT n.nspname::text, c.relname::text,
				coalesce(array_agg(t.relid::oid ORDER BY t.relid::oid) FILTER (WHERE t.isleaf AND t.relid <> c.oid), '{}')
			FROM unnest($1::text[], $2::text[]) AS want(s, t)
			JOIN pg_namespace n ON n.nspname = want.s
			JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = want.t AND c.relkind = 'p'
			CROSS JOIN LATERAL pg_partition_tree(c.oid) t
			GROUP BY n.nspname, c.relname`, nsp, names)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id cdc.TableID
			var leaves []uint32
			if err := rows.Scan(&id.Schema, &id.Name, &leaves); err != nil {
				return err
			}
			out[id] = leaves
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list the partitions of the captured tables on %s: %w", db.server, err)
	}
	return out, nil
}

// PartitionHasRows reports whether the relation oid holds a row of its
// own (ONLY: not its partitions'); a relation that no longer exists holds
// none. A relation renamed between the lookup of its name and the read is
// an error (the caller asks again later), not an empty one.
func (db *DB) PartitionHasRows(ctx context.Context, oid uint32) (bool, error) {
	var has bool
	const nameSQL = `SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
			JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`
	err := db.with(ctx, func(c *pgx.Conn) error {
		var name *string
		if err := c.QueryRow(ctx, nameSQL, oid).Scan(&name); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		}
		err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM ONLY "+*name+")").Scan(&has)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
			return err
		}
		// The name is gone: dropped, or renamed (or moved) meanwhile.
		// Only a relation whose OID is gone too holds no row.
		var again *string
		switch lerr := c.QueryRow(ctx, nameSQL, oid).Scan(&again); {
		case errors.Is(lerr, pgx.ErrNoRows):
			return nil
		case lerr != nil:
			return lerr
		default:
			return fmt.Errorf("%s was renamed to %s while being read: %w", *name, *again, err)
		}
	})
	if err != nil {
		return false, fmt.Errorf("look for rows in partition %d on %s: %w", oid, db.server, err)
	}
	return has, nil
}
