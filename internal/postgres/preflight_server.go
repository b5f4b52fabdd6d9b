package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// serverFacts is what serverChecks judges, read in one query.
type serverFacts struct {
	versionNum             int
	version                string
	walLevel               string
	maxSlots, usedSlots    int
	inactiveSlots          []string
	maxSenders, senders    int
	role                   string
	superuser, replication bool
	rdsReplication         bool // a member of rds_replication (RDS, Aurora)
	database               string
	createOnDatabase       bool
	publicationExists      bool
	slotExists, slotActive bool
}

func (db *DB) serverFacts(ctx context.Context, t PreflightTarget) (serverFacts, error) {
	var f serverFacts
	var slotActive *bool
	err := db.with(ctx, func(c *pgx.Conn) error {
		// rds_replication is looked up by OID, so a server without the
		// role gives false instead of an error.
		return c.QueryRow(ctx, `SELECT current_setting('server_version_num')::int, current_setting('server_version'),
				current_setting('wal_level'),
				current_setting('max_replication_slots')::int,
				(SELECT count(*) FROM pg_replication_slots)::int,
				(SELECT coalesce(array_agg(slot_name::text ORDER BY slot_name), '{}') FROM pg_replication_slots WHERE NOT active),
				current_setting('max_wal_senders')::int,
				(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender')::int,
				r.rolname::text, r.rolsuper, r.rolreplication,
				EXISTS (SELECT 1 FROM pg_roles g WHERE g.rolname = 'rds_replication' AND pg_has_role(r.oid, g.oid, 'MEMBER')),
				current_database()::text, has_database_privilege(current_database(), 'CREATE'),
				EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1),
				(SELECT active FROM pg_replication_slots WHERE slot_name = $2)
			FROM pg_roles r WHERE r.rolname = current_user`, t.Publication, t.Slot).
			Scan(&f.versionNum, &f.version, &f.walLevel, &f.maxSlots, &f.usedSlots, &f.inactiveSlots,
				&f.maxSenders, &f.senders, &f.role, &f.superuser, &f.replication, &f.rdsReplication,
				&f.database, &f.createOnDatabase, &f.publicationExists, &slotActive)
	})
	if err != nil {
		return serverFacts{}, fmt.Errorf("preflight %s: %w", db.server, err)
	}
	f.slotExists = slotActive != nil
	f.slotActive = slotActive != nil && *slotActive
	return f, nil
}

// serverChecks judges the server: server_version, wal_level,
// replication_privilege, database_create, replication_slots, wal_senders.
func serverChecks(f serverFacts, p Provider, t PreflightTarget) []Check {
	var out []Check
	c := Check{Name: "server_version", Status: StatusOK, Detail: "PostgreSQL " + f.version}
	if f.versionNum < minServerVersion {
		c = Check{Name: c.Name, Status: StatusFail,
			Detail: fmt.Sprintf("PostgreSQL %s is older than 14 (pg-cdc needs pgoutput protocol 2 with streaming)", f.version), Fix: fixVersion(p)}
	}
	out = append(out, c)

	c = Check{Name: "wal_level", Status: StatusOK, Detail: "wal_level = logical"}
	if f.walLevel != "logical" {
		c = Check{Name: c.Name, Status: StatusFail, Detail: fmt.Sprintf("wal_level is %s, not logical", f.walLevel), Fix: fixWALLevel(p)}
	}
	out = append(out, c)

	c = Check{Name: "replication_privilege", Status: StatusOK}
	switch role := ident(f.role); {
	case f.superuser:
		c.Detail = fmt.Sprintf("role %s is a superuser", role)
	case f.replication:
		c.Detail = fmt.Sprintf("role %s has REPLICATION", role)
	case f.rdsReplication:
		c.Detail = fmt.Sprintf("role %s is a member of rds_replication", role)
	default:
		c.Status, c.Fix = StatusFail, fixReplicationRole(p, f.role)
		c.Detail = fmt.Sprintf("role %s has neither SUPERUSER nor REPLICATION", role)
		if managed(p) {
			c.Detail = fmt.Sprintf("role %s is not a member of rds_replication", role)
		}
	}
	out = append(out, c)

	c = Check{Name: "database_create", Status: StatusOK}
	switch {
	case f.publicationExists:
		c.Detail = fmt.Sprintf("publication %s exists, so CREATE on database %s is not needed", ident(t.Publication), ident(f.database))
	case f.createOnDatabase:
		c.Detail = fmt.Sprintf("role %s has CREATE on database %s, for the publication", ident(f.role), ident(f.database))
	default:
		c.Status, c.Fix = StatusFail, fixCreateOnDatabase(p, f.database, f.role)
		c.Detail = fmt.Sprintf("role %s lacks CREATE on database %s, which init needs to create publication %s",
			ident(f.role), ident(f.database), ident(t.Publication))
	}
	out = append(out, c)

	// An existing slot of this name is reused (start) or dropped and
	// created again (init): either way it needs no second one.
	need := 1
	if f.slotExists {
		need = 0
	}
	free := f.maxSlots - f.usedSlots
	c = Check{Name: "replication_slots", Status: StatusOK, Detail: fmt.Sprintf("%d of max_replication_slots = %d free", free, f.maxSlots)}
	switch {
	case f.maxSlots <= 0:
		c.Status, c.Detail, c.Fix = StatusFail, "max_replication_slots is 0", fixSlots(p, 10, nil)
	case free < need:
		c.Status, c.Fix = StatusFail, fixSlots(p, max(10, f.usedSlots+need), f.inactiveSlots)
		c.Detail = fmt.Sprintf("all %d replication slots are in use (max_replication_slots = %d); pg-cdc needs one for %s", f.usedSlots, f.maxSlots, t.Slot)
	case need == 0:
		c.Detail += fmt.Sprintf("; slot %s exists", t.Slot)
	}
	out = append(out, c)

	// A slot that is active is streamed by someone, usually this pg-cdc
	// (slotCheck says more): that walsender is already counted.
	need = 1
	if f.slotActive {
		need = 0
	}
	free = f.maxSenders - f.senders
	c = Check{Name: "wal_senders", Status: StatusOK, Detail: fmt.Sprintf("%d of max_wal_senders = %d free", free, f.maxSenders)}
	switch {
	case f.maxSenders <= 0:
		c.Status, c.Detail, c.Fix = StatusFail, "max_wal_senders is 0", fixSenders(p, 10)
	case free < need:
		c.Status, c.Fix = StatusFail, fixSenders(p, max(10, f.senders+need))
		c.Detail = fmt.Sprintf("all %d WAL senders are in use (max_wal_senders = %d); pg-cdc needs one to stream", f.senders, f.maxSenders)
	}
	out = append(out, c)
	return out
}

// replicationConnectionCheck opens a replication connection, as init and
// start do, and runs IDENTIFY_SYSTEM. It is skipped (ok false) when the
// server checks already show why it would fail: no privilege, no free WAL
// sender.
func (db *DB) replicationConnectionCheck(ctx context.Context, p Provider, server []Check) (Check, bool) {
	for _, c := range server {
		if (c.Name == "replication_privilege" || c.Name == "wal_senders") && c.Status == StatusFail {
			return Check{}, false
		}
	}
	c := Check{Name: "replication_connection", Status: StatusOK}
	repl, err := ConnectReplication(ctx, db.spec)
	if err == nil {
		var id Identity
		id, _, err = repl.IdentifySystem(ctx)
		if cerr := repl.Close(context.WithoutCancel(ctx)); err == nil {
			err = cerr
		}
		c.Detail = fmt.Sprintf("replication connection works (IDENTIFY_SYSTEM: database %s)", ident(id.Database))
	}
	if err != nil {
		c.Status, c.Detail, c.Fix = StatusFail, err.Error(), fixReplicationConnection(p)
	}
	return c, true
}
