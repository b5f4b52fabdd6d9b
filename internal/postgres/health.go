package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// SourceHealth is what the streamer's health poller reads from the source:
// the slot's state, how much WAL it pins and how much more may be written
// before max_slot_wal_keep_size invalidates it, and the oldest open
// transaction (which holds back what logical decoding can send).
type SourceHealth struct {
	CurrentLSN cdc.LSN // pg_current_wal_lsn()
	Slot       SlotInfo
	// SafeWALSize is pg_replication_slots.safe_wal_size, or -1 when the
	// server sets no limit (max_slot_wal_keep_size = -1).
	SafeWALSize int64
	// OldestXactAge is the age in seconds of the oldest open transaction of
	// any other session, 0 when none is open.
	OldestXactAge float64
}

// SourceHealth reads the slot and server gauges in one query. The caller
// bounds it with a context deadline; the query also carries a statement
// timeout of its own, so a saturated server answers with an error rather
// than holding the poller.
func (db *DB) SourceHealth(ctx context.Context, slot string) (SourceHealth, error) {
	var (
		h                  = SourceHealth{SafeWALSize: -1}
		current            string
		exists, active     *bool
		wal, confirmed     *string
		retained, safeSize *int64
	)
	err := db.with(ctx, func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, `SET statement_timeout = '5s'`); err != nil {
			return err
		}
		defer func() { _, _ = c.Exec(context.WithoutCancel(ctx), `RESET statement_timeout`) }()
		return c.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text,
				s.slot_name IS NOT NULL, s.active, s.wal_status, s.confirmed_flush_lsn::text,
				pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn)::int8, s.safe_wal_size,
				coalesce((SELECT extract(epoch FROM max(now() - xact_start))::float8 FROM pg_stat_activity
					WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid() AND backend_type = 'client backend'), 0)
			FROM (SELECT 1) one LEFT JOIN pg_replication_slots s ON s.slot_name = $1`, slot).
			Scan(&current, &exists, &active, &wal, &confirmed, &retained, &safeSize, &h.OldestXactAge)
	})
	if err != nil {
		return SourceHealth{}, fmt.Errorf("read source health on %s: %w", db.server, err)
	}
	if h.CurrentLSN, err = cdc.ParseLSN(current); err != nil {
		return SourceHealth{}, fmt.Errorf("read source health on %s: %w", db.server, err)
	}
	if exists == nil || !*exists {
		return h, nil
	}
	h.Slot = SlotInfo{Exists: true, WALStatus: deref(wal)}
	if active != nil {
		h.Slot.Active = *active
	}
	if retained != nil {
		h.Slot.RetainedBytes = *retained
	}
	if safeSize != nil {
		h.SafeWALSize = *safeSize
	}
	if confirmed != nil {
		if h.Slot.ConfirmedFlushLSN, err = cdc.ParseLSN(*confirmed); err != nil {
			return SourceHealth{}, fmt.Errorf("read source health on %s: %w", db.server, err)
		}
	}
	return h, nil
}

// WALSenderTimeout reads wal_sender_timeout (zero when disabled). A live
// walsender sends a keepalive at least every half of it, whatever it is
// busy with, so a client may call a connection dead after that long.
func (db *DB) WALSenderTimeout(ctx context.Context) (time.Duration, error) {
	var ms int64
	err := db.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT setting::int8 FROM pg_settings WHERE name = 'wal_sender_timeout'`).Scan(&ms)
	})
	if err != nil {
		return 0, fmt.Errorf("read wal_sender_timeout on %s: %w", db.server, err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
