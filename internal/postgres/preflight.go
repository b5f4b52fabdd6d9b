package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// minServerVersion is PostgreSQL 14: pgoutput protocol version 2 with
// streaming of in-progress transactions.
const minServerVersion = 140000

// Preflight checks that the server can feed pg-cdc: PostgreSQL 14 or newer,
// wal_level = logical, a role with SUPERUSER or REPLICATION, and
// max_replication_slots and max_wal_senders above zero. Every failed check is
// reported at once, in one *cdc.Error of class ErrPreflight whose hint lists
// each fix (cdc.HintOf). Other errors (cannot connect, cannot query) are
// returned wrapped and unclassified.
func (db *DB) Preflight(ctx context.Context) error {
	var (
		walLevel               string
		maxSlots, maxSenders   int
		version                int
		role                   string
		superuser, replication bool
	)
	err := db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT current_setting('wal_level'),
				current_setting('max_replication_slots')::int, current_setting('max_wal_senders')::int,
				current_setting('server_version_num')::int,
				r.rolname::text, r.rolsuper, r.rolreplication
			FROM pg_roles r WHERE r.rolname = current_user`).
			Scan(&walLevel, &maxSlots, &maxSenders, &version, &role, &superuser, &replication)
	})
	if err != nil {
		return fmt.Errorf("preflight %s: %w", db.server, err)
	}
	var problems, fixes []string
	if version < minServerVersion {
		problems = append(problems, fmt.Sprintf("server version %d is older than PostgreSQL 14", version))
		fixes = append(fixes, "upgrade to PostgreSQL 14 or newer (pgoutput protocol 2 with streaming)")
	}
	if walLevel != "logical" {
		problems = append(problems, fmt.Sprintf("wal_level is %s, not logical", walLevel))
		fixes = append(fixes, "set wal_level = logical in postgresql.conf and restart PostgreSQL")
	}
	if !superuser && !replication {
		problems = append(problems, fmt.Sprintf("role %s has neither SUPERUSER nor REPLICATION", role))
		fixes = append(fixes, fmt.Sprintf("as a superuser run ALTER ROLE %s WITH REPLICATION", pgx.Identifier{role}.Sanitize()))
	}
	if maxSlots <= 0 {
		problems = append(problems, "max_replication_slots is 0")
		fixes = append(fixes, "set max_replication_slots to at least 1 (10 is usual) in postgresql.conf and restart PostgreSQL")
	}
	if maxSenders <= 0 {
		problems = append(problems, "max_wal_senders is 0")
		fixes = append(fixes, "set max_wal_senders to at least 1 (10 is usual) in postgresql.conf and restart PostgreSQL")
	}
	if len(problems) == 0 {
		return nil
	}
	return &cdc.Error{
		Class: ErrPreflight,
		Msg:   fmt.Sprintf("%s: %s", db.server, strings.Join(problems, "; ")),
		Hint:  strings.Join(fixes, "; "),
	}
}
