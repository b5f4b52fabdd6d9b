package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// EnsurePublication makes publication name publish every table in tables.
// A missing publication is created FOR TABLE with those tables (none: a
// publication of no table yet, which init creates on a database whose
// tables do not exist yet) and publish_via_partition_root = true (so a
// partitioned table's changes arrive under the root that DiscoverTables
// returns). An existing one gets ALTER PUBLICATION ... ADD TABLE for the
// tables it does not yet cover, and publish_via_partition_root turned on
// when a listed table is partitioned; tables it already covers, by name,
// FOR ALL TABLES or TABLES IN SCHEMA, are left alone, and so are tables it
// has beyond the list. It runs in one transaction, so the publication
// changes whole or not at all; running it again is a no-op.
//
// Every table is named with ONLY (publishedList): each becomes a member by
// itself. Without ONLY, PostgreSQL also makes every inheritance child of a
// table a member, so a parent and its child captured together would fail
// ("relation is already member of publication") and a child excluded from
// the capture would be published anyway. A partition is not an inheritance
// child in this sense: a partitioned table is published with its
// partitions, ONLY or not.
//
// An existing publication that does not publish all of insert, update,
// delete and truncate is refused with an error of class ErrPreflight (pg-cdc
// would silently miss those changes; changing what someone else configured
// is the operator's call).
func (db *DB) EnsurePublication(ctx context.Context, name string, tables []cdc.TableID) error {
	// Two processes may create the same publication at once; the loser sees
	// duplicate_object and takes the "exists" path on the second attempt.
	for attempt := 1; ; attempt++ {
		err := db.with(ctx, func(c *pgx.Conn) error {
			return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error { return ensurePublication(ctx, tx, name, tables) })
		})
		var pgErr *pgconn.PgError
		if attempt == 1 && errors.As(err, &pgErr) && pgErr.Code == "42710" {
			continue
		}
		if err != nil {
			var ce *cdc.Error
			if errors.As(err, &ce) {
				return err
			}
			return fmt.Errorf("ensure publication %q on %s: %w", name, db.server, err)
		}
		return nil
	}
}

func ensurePublication(ctx context.Context, tx pgx.Tx, name string, tables []cdc.TableID) error {
	pub := pgx.Identifier{name}.Sanitize()
	var (
		allTables, viaRoot                     bool
		pubInsert, pubUpdate, pubDel, pubTrunc bool
	)
	err := tx.QueryRow(ctx, `SELECT puballtables, pubviaroot, pubinsert, pubupdate, pubdelete, pubtruncate
		FROM pg_publication WHERE pubname = $1`, name).
		Scan(&allTables, &viaRoot, &pubInsert, &pubUpdate, &pubDel, &pubTrunc)
	if errors.Is(err, pgx.ErrNoRows) {
		sql := "CREATE PUBLICATION " + pub
		if len(tables) > 0 {
			sql += " FOR TABLE " + publishedList(tables)
		}
		_, err = tx.Exec(ctx, sql+" WITH (publish_via_partition_root = true)")
		return err
	}
	if err != nil {
		return fmt.Errorf("read publication: %w", err)
	}
	if !(pubInsert && pubUpdate && pubDel && pubTrunc) {
		return &cdc.Error{
			Class: ErrPreflight,
			Msg:   fmt.Sprintf("publication %q does not publish every operation (insert %t, update %t, delete %t, truncate %t)", name, pubInsert, pubUpdate, pubDel, pubTrunc),
			Hint:  fmt.Sprintf("ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')", pub),
		}
	}
	if allTables || len(tables) == 0 {
		return nil
	}
	nsp, names := splitIDs(tables)
	if !viaRoot {
		var partitioned bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relkind = 'p' AND (n.nspname, c.relname) IN (SELECT * FROM unnest($1::text[], $2::text[])))`,
			nsp, names).Scan(&partitioned)
		if err != nil {
			return fmt.Errorf("look for partitioned tables: %w", err)
		}
		if partitioned {
			if _, err := tx.Exec(ctx, "ALTER PUBLICATION "+pub+" SET (publish_via_partition_root = true)"); err != nil {
				return err
			}
		}
	}
	// pg_publication_tables expands FOR ALL TABLES, TABLES IN SCHEMA and
	// partitions, so "covered" means what the server will actually publish.
	rows, err := tx.Query(ctx, `SELECT s, t FROM unnest($2::text[], $3::text[]) AS want(s, t)
		WHERE NOT EXISTS (SELECT 1 FROM pg_publication_tables p
			WHERE p.pubname = $1 AND p.schemaname = want.s AND p.tablename = want.t)`, name, nsp, names)
	if err != nil {
		return fmt.Errorf("list publication tables: %w", err)
	}
	missing, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (cdc.TableID, error) {
		var id cdc.TableID
		return id, r.Scan(&id.Schema, &id.Name)
	})
	if err != nil {
		return fmt.Errorf("list publication tables: %w", err)
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = tx.Exec(ctx, "ALTER PUBLICATION "+pub+" ADD TABLE "+publishedList(missing))
	return err
}

func tableList(tables []cdc.TableID) string {
	parts := make([]string, len(tables))
	for i, t := range tables {
		parts[i] = pgx.Identifier{t.Schema, t.Name}.Sanitize()
	}
	return strings.Join(parts, ", ")
}

// publishedList is tables as a publication's table list: "ONLY a, ONLY
// b", each table a member by itself and none of its inheritance children
// with it (see EnsurePublication). PostgreSQL then publishes a change under
// the relation whose row it is: a row of a child arrives as the child's,
// never as the parent's.
func publishedList(tables []cdc.TableID) string {
	parts := make([]string, len(tables))
	for i, t := range tables {
		parts[i] = "ONLY " + pgx.Identifier{t.Schema, t.Name}.Sanitize()
	}
	return strings.Join(parts, ", ")
}

func splitIDs(tables []cdc.TableID) (schemas, names []string) {
	for _, t := range tables {
		schemas, names = append(schemas, t.Schema), append(names, t.Name)
	}
	return schemas, names
}

// DropPublication drops the publication; a missing one is not an error.
func (db *DB) DropPublication(ctx context.Context, name string) error {
	err := db.with(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{name}.Sanitize())
		return err
	})
	if err != nil {
		return fmt.Errorf("drop publication %q on %s: %w", name, db.server, err)
	}
	return nil
}

// SlotInfo is a replication slot as pg_replication_slots shows it.
type SlotInfo struct {
	Exists    bool
	Plugin    string // "" for a physical slot
	Database  string // "" for a physical slot
	Active    bool
	ActivePID int32 // 0 when inactive
	// ConfirmedFlushLSN: the position the consumer last confirmed; decoding
	// restarts from here. Zero for a physical slot.
	ConfirmedFlushLSN cdc.LSN
	// RestartLSN: the oldest WAL the slot still needs. Zero once the slot is
	// invalidated.
	RestartLSN cdc.LSN
	// WALStatus: reserved, extended, unreserved or lost (invalidated).
	WALStatus string
	// RetainedBytes: WAL held back by the slot (current WAL position minus
	// RestartLSN).
	RetainedBytes int64
}

// Lost reports whether the server has invalidated the slot: the WAL it needs
// is gone and decoding from it is impossible.
func (s SlotInfo) Lost() bool { return s.Exists && s.WALStatus == "lost" }

// Slot reads slot name from pg_replication_slots. A missing slot is not an
// error: the result has Exists false.
func (db *DB) Slot(ctx context.Context, name string) (SlotInfo, error) {
	var (
		info                  = SlotInfo{Exists: true}
		plugin, database, wal *string
		pid                   *int32
		confirmed, restart    *string
		retained              *int64
	)
	err := db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT plugin::text, database::text, active, active_pid,
				confirmed_flush_lsn::text, restart_lsn::text, wal_status,
				pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::int8
			FROM pg_replication_slots WHERE slot_name = $1`, name).
			Scan(&plugin, &database, &info.Active, &pid, &confirmed, &restart, &wal, &retained)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return SlotInfo{}, nil
	}
	if err != nil {
		return SlotInfo{}, fmt.Errorf("read replication slot %q on %s: %w", name, db.server, err)
	}
	info.Plugin, info.Database, info.WALStatus = deref(plugin), deref(database), deref(wal)
	if pid != nil {
		info.ActivePID = *pid
	}
	if retained != nil {
		info.RetainedBytes = *retained
	}
	for _, f := range []struct {
		text *string
		lsn  *cdc.LSN
	}{{confirmed, &info.ConfirmedFlushLSN}, {restart, &info.RestartLSN}} {
		if f.text == nil {
			continue
		}
		if *f.lsn, err = cdc.ParseLSN(*f.text); err != nil {
			return SlotInfo{}, fmt.Errorf("read replication slot %q on %s: %w", name, db.server, err)
		}
	}
	return info, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// DropSlot drops the replication slot. A missing slot is not an error. An
// active slot (a consumer is streaming from it) is not dropped: the error
// names the PID of the walsender holding it.
func (db *DB) DropSlot(ctx context.Context, name string) error {
	err := db.with(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, name)
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42704" {
		return nil
	}
	if err != nil {
		// The server's message for an active slot already names the PID:
		// replication slot "x" is active for PID 1234 (SQLSTATE 55006).
		return fmt.Errorf("drop replication slot %q on %s: %w", name, db.server, err)
	}
	return nil
}
