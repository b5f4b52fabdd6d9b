package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// minServerVersion is PostgreSQL 14: pgoutput protocol version 2 with
// streaming of in-progress transactions.
const minServerVersion = 140000

// Status is a check's verdict.
type Status string

const (
	// StatusOK: nothing to do (including "init creates it").
	StatusOK Status = "ok"
	// StatusWarn: pg-cdc works, but look: a table captured insert-only, a
	// slot about to lose its WAL, a slot init will drop.
	StatusWarn Status = "warn"
	// StatusFail: init or start would refuse or fail, or lose changes.
	StatusFail Status = "fail"
)

// Check is one named preflight check.
type Check struct {
	// Name is stable, for scripts: "wal_level", "replica_identity", ...
	// (docs/preflight.md lists them). A check about one table or object
	// may appear more than once.
	Name   string
	Status Status
	// Detail says what was found, in one line.
	Detail string
	// Fix is the exact remedy on the detected provider; empty when Status
	// is StatusOK.
	Fix string
}

// PreflightTarget is what the checks are about, besides the server.
type PreflightTarget struct {
	// Provider as configured; ProviderAuto or "" recognises the server.
	Provider Provider
	// Publication and Slot are the names init creates or start uses.
	Publication string
	Slot        string
	// Schemas, Include and Exclude choose the captured tables as
	// DiscoverTables does.
	Schemas []string
	Include []cdc.TableID
	Exclude []string
	// Initialized: the sink has a manifest. The slot and the publication
	// must then exist, EndLSN is the manifest's end LSN, and the caller
	// passes the manifest's tables as Include.
	Initialized bool
	EndLSN      cdc.LSN
}

// Report is what RunPreflight found.
type Report struct {
	// Provider is the one the fixes are for; "" when the server could not
	// be reached and none was configured.
	Provider Provider
	Checks   []Check
	// Tables are the captured tables, nil when discovery failed, for
	// checks the caller adds (the configuration's type overrides).
	Tables []*cdc.Table
	// Identity is the server's; its SystemIdentifier is "" when it could
	// not be read (a failed check says why).
	Identity Identity
}

// Preflight runs the server checks init needs before it changes anything
// (serverChecks: PostgreSQL 14 or newer, wal_level = logical, a role that
// may replicate, CREATE on the database while the publication does not
// exist, a free replication slot and WAL sender). Every failed check is
// reported at once, in one *cdc.Error of class ErrPreflight whose hint
// lists each fix for the provider (cdc.HintOf). Other errors (cannot
// connect, cannot query) are returned wrapped and unclassified.
func (db *DB) Preflight(ctx context.Context, t PreflightTarget) error {
	provider, err := db.Provider(ctx, t.Provider)
	if err != nil {
		return err
	}
	f, err := db.serverFacts(ctx, t)
	if err != nil {
		return err
	}
	var problems, fixes []string
	for _, c := range serverChecks(f, provider, t) {
		if c.Status == StatusFail {
			problems, fixes = append(problems, c.Detail), append(fixes, c.Fix)
		}
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

// RunPreflight connects through spec and runs every source check, in this order:
// connect, provider, the server checks (see Preflight), the replication
// connection, the captured tables (discovery, names, replica identity,
// SELECT), the publication and the slot. It changes nothing on the server.
// A check that cannot be run (a query fails) fails with the error as its
// detail; the others still run. ctx ending shows as such failures, so the
// caller should look at ctx.Err() too.
func RunPreflight(ctx context.Context, spec ConnSpec, t PreflightTarget) Report {
	var r Report
	add := func(cs ...Check) { r.Checks = append(r.Checks, cs...) }
	fixProvider := t.Provider
	if fixProvider == ProviderAuto {
		fixProvider = ""
	}
	db, err := Connect(ctx, spec)
	if err != nil {
		r.Provider = fixProvider
		add(Check{Name: "connect", Status: StatusFail, Detail: err.Error(), Fix: fixConnect(fixProvider)})
		return r
	}
	defer db.Close()
	if r.Identity, err = db.Identity(ctx); err != nil {
		add(Check{Name: "connect", Status: StatusFail, Detail: err.Error(),
			Fix: "the role needs EXECUTE on pg_control_system() and pg_control_checkpoint(): GRANT pg_monitor TO <role>"})
	} else {
		add(Check{Name: "connect", Status: StatusOK, Detail: fmt.Sprintf("connected to %s: system %s, timeline %d",
			db.server, r.Identity.SystemIdentifier, r.Identity.Timeline)})
	}

	providerCheck, provider := db.providerCheck(ctx, t.Provider)
	r.Provider = provider
	add(providerCheck)

	f, err := db.serverFacts(ctx, t)
	if err != nil {
		add(Check{Name: "server", Status: StatusFail, Detail: err.Error()})
		return r
	}
	server := serverChecks(f, provider, t)
	add(server...)
	if c, ok := db.replicationConnectionCheck(ctx, provider, server); ok {
		add(c)
	}

	tables, err := db.DiscoverTables(ctx, t.Schemas, t.Include, t.Exclude)
	switch {
	case err != nil:
		add(Check{Name: "tables", Status: StatusFail, Detail: err.Error(),
			Fix: "check source.postgres.schemas, tables.include and tables.exclude against the database"})
		return r
	case len(tables) == 0:
		add(Check{Name: "tables", Status: StatusFail, Detail: fmt.Sprintf("no tables to capture in schemas %s", strings.Join(t.Schemas, ", ")),
			Fix: "create the tables first, or check source.postgres.schemas, tables.include and tables.exclude"})
		return r
	}
	r.Tables = tables
	add(Check{Name: "tables", Status: StatusOK, Detail: describeTables(tables)})
	add(tableChecks(tables)...)

	privs, err := db.tablePrivileges(ctx, tables)
	if err != nil {
		add(Check{Name: "table_privileges", Status: StatusFail, Detail: err.Error()})
		return r
	}
	add(privilegeCheck(privs, f.role, provider))
	pub, err := db.publicationFacts(ctx, t.Publication, tables, privs)
	if err != nil {
		add(Check{Name: "publication", Status: StatusFail, Detail: err.Error()})
	} else {
		add(publicationCheck(pub, t, f.role, provider))
	}
	slot, err := db.Slot(ctx, t.Slot)
	if err != nil {
		add(Check{Name: "slot", Status: StatusFail, Detail: err.Error()})
	} else {
		add(slotCheck(slot, t, f.database, provider))
	}
	return r
}

// providerCheck resolves the provider and says how: as configured, or
// detected and why. A configured provider the server contradicts is a
// warning (the fixes follow the configuration). When detection fails, the
// fixes are the self-managed ones.
func (db *DB) providerCheck(ctx context.Context, configured Provider) (Check, Provider) {
	e, err := db.providerEvidence(ctx)
	if err != nil {
		p := configured
		if p == ProviderAuto || p == "" {
			p = ProviderSelfManaged
		}
		return Check{Name: "provider", Status: StatusWarn, Detail: fmt.Sprintf("%v; fixes below are for %s", err, p),
			Fix: "set source.postgres.provider to self-managed, rds or aurora"}, p
	}
	detected := e.provider()
	switch {
	case configured == ProviderAuto || configured == "":
		return Check{Name: "provider", Status: StatusOK, Detail: fmt.Sprintf("provider %s (detected: %s)", detected, e)}, detected
	case configured != detected:
		return Check{Name: "provider", Status: StatusWarn,
			Detail: fmt.Sprintf("provider %s (configured), but the server looks %s (%s); fixes below are for %s", configured, detected, e, configured),
			Fix:    fmt.Sprintf("set source.postgres.provider to %s, or to auto", detected)}, configured
	default:
		return Check{Name: "provider", Status: StatusOK, Detail: fmt.Sprintf("provider %s (configured; detected: %s)", configured, e)}, configured
	}
}

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

// describeTables lists the captured tables, the first few by name.
func describeTables(tables []*cdc.Table) string {
	const shown = 5
	names := make([]string, 0, shown)
	for i, t := range tables {
		if i == shown {
			names = append(names, fmt.Sprintf("and %d more", len(tables)-shown))
			break
		}
		names = append(names, t.ID.String())
	}
	noun := "tables"
	if len(tables) == 1 {
		noun = "table"
	}
	return fmt.Sprintf("%d %s to capture: %s", len(tables), noun, strings.Join(names, ", "))
}

// tableChecks judges the captured tables as init does (CheckTables):
// names that collide with the sink's layout fail (table_names), and so
// does REPLICA IDENTITY NOTHING, one check per table (replica_identity); a
// table without a key and without FULL is captured insert-only, which is a
// warning, as init's. When every table identifies its rows there is one
// passing replica_identity check.
func tableChecks(tables []*cdc.Table) []Check {
	var out []Check
	identified := true
	if err := checkNames(tables); err != nil {
		ce := err.(*cdc.Error) // checkNames returns only these
		out = append(out, Check{Name: "table_names", Status: StatusFail, Detail: ce.Msg, Fix: ce.Hint})
	}
	for _, t := range tables {
		switch {
		case t.ReplicaIdentity == cdc.ReplicaIdentityNothing:
			identified = false
			out = append(out, Check{Name: "replica_identity", Status: StatusFail,
				Detail: fmt.Sprintf("table %s has REPLICA IDENTITY NOTHING: its updates and deletes cannot be captured (init refuses it)", t.ID),
				Fix:    fixReplicaIdentityNothing(t.ID, len(t.PrimaryKey) > 0)})
		case t.InsertOnly():
			identified = false
			out = append(out, Check{Name: "replica_identity", Status: StatusWarn,
				Detail: fmt.Sprintf("table %s has no primary key and REPLICA IDENTITY %s: it is captured insert-only, and PostgreSQL rejects its UPDATE and DELETE once it is published",
					t.ID, strings.ToUpper(string(t.ReplicaIdentity))),
				Fix: fixInsertOnly(t.ID)})
		}
	}
	if identified {
		out = append(out, Check{Name: "replica_identity", Status: StatusOK,
			Detail: "every captured table has a primary key, a replica identity index or REPLICA IDENTITY FULL"})
	}
	return out
}

// tablePrivilege is the role's standing on one captured table.
type tablePrivilege struct {
	id         cdc.TableID
	selectable bool // SELECT: the snapshot COPY reads it
	owned      bool // the owner's privileges (or a superuser's): it may be published
}

func (db *DB) tablePrivileges(ctx context.Context, tables []*cdc.Table) ([]tablePrivilege, error) {
	oids := make([]uint32, len(tables))
	byOID := make(map[uint32]cdc.TableID, len(tables))
	for i, t := range tables {
		oids[i], byOID[t.OID] = t.OID, t.ID
	}
	byID := make(map[cdc.TableID]tablePrivilege, len(tables))
	err := db.with(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, `SELECT c.oid, has_table_privilege(c.oid, 'SELECT'), pg_has_role(c.relowner, 'USAGE')
			FROM pg_class c WHERE c.oid = ANY($1::oid[])`, oids)
		if err != nil {
			return err
		}
		var (
			oid uint32
			p   tablePrivilege
		)
		_, err = pgx.ForEachRow(rows, []any{&oid, &p.selectable, &p.owned}, func() error {
			p.id = byOID[oid]
			byID[p.id] = p
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read table privileges on %s: %w", db.server, err)
	}
	out := make([]tablePrivilege, 0, len(tables))
	for _, t := range tables { // in the tables' order, for stable output
		if p, ok := byID[t.ID]; ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// privilegeCheck: SELECT on every captured table (table_privileges).
func privilegeCheck(privs []tablePrivilege, role string, p Provider) Check {
	var denied []cdc.TableID
	for _, t := range privs {
		if !t.selectable {
			denied = append(denied, t.id)
		}
	}
	if len(denied) == 0 {
		return Check{Name: "table_privileges", Status: StatusOK, Detail: fmt.Sprintf("role %s may SELECT every captured table", ident(role))}
	}
	return Check{Name: "table_privileges", Status: StatusFail,
		Detail: fmt.Sprintf("role %s lacks SELECT on %s, which the snapshot reads", ident(role), joinIDs(denied)),
		Fix:    fixSelect(p, denied, role)}
}

// publicationFacts is the publication as the checks see it.
type publicationFacts struct {
	name                             string
	exists, allTables, owned         bool
	insert, update, delete, truncate bool
	missing                          []cdc.TableID // captured, not published
	extra                            []cdc.TableID // published, not captured
	notOwned                         []cdc.TableID // captured, and the role may not publish them
	captured                         []cdc.TableID
}

func (db *DB) publicationFacts(ctx context.Context, name string, tables []*cdc.Table, privs []tablePrivilege) (publicationFacts, error) {
	f := publicationFacts{name: name}
	captured := make(map[cdc.TableID]bool, len(tables))
	for _, t := range tables {
		captured[t.ID] = true
		f.captured = append(f.captured, t.ID)
	}
	for _, p := range privs {
		if !p.owned {
			f.notOwned = append(f.notOwned, p.id)
		}
	}
	err := db.with(ctx, func(c *pgx.Conn) error {
		err := c.QueryRow(ctx, `SELECT puballtables, pubinsert, pubupdate, pubdelete, pubtruncate, pg_has_role(pubowner, 'USAGE')
			FROM pg_publication WHERE pubname = $1`, name).
			Scan(&f.allTables, &f.insert, &f.update, &f.delete, &f.truncate, &f.owned)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		f.exists = true
		// pg_publication_tables expands FOR ALL TABLES and TABLES IN
		// SCHEMA. Partitions are left out of "extra": without
		// publish_via_partition_root they are listed in place of a
		// captured root, and init turns that setting on.
		rows, err := c.Query(ctx, `SELECT p.schemaname::text, p.tablename::text
			FROM pg_publication_tables p
			JOIN pg_namespace n ON n.nspname = p.schemaname
			JOIN pg_class k ON k.relnamespace = n.oid AND k.relname = p.tablename
			WHERE p.pubname = $1 AND NOT k.relispartition`, name)
		if err != nil {
			return err
		}
		var id cdc.TableID
		published := make(map[cdc.TableID]bool)
		_, err = pgx.ForEachRow(rows, []any{&id.Schema, &id.Name}, func() error {
			published[id] = true
			if !captured[id] {
				f.extra = append(f.extra, id)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, t := range tables {
			if !published[t.ID] {
				f.missing = append(f.missing, t.ID)
			}
		}
		return nil
	})
	if err != nil {
		return publicationFacts{}, fmt.Errorf("read publication %q on %s: %w", name, db.server, err)
	}
	return f, nil
}

// publicationCheck judges the publication (publication). Before init a
// missing one is fine when the role may create it; after init it must
// exist and publish exactly the captured tables.
func publicationCheck(f publicationFacts, t PreflightTarget, role string, p Provider) Check {
	c := Check{Name: "publication", Status: StatusFail}
	pub := ident(f.name)
	switch {
	case !f.exists && t.Initialized:
		c.Detail = fmt.Sprintf("publication %s does not exist, but the sink is initialized: start cannot stream", pub)
		c.Fix = rebuild
	case !f.exists && len(f.notOwned) > 0:
		c.Detail = fmt.Sprintf("publication %s does not exist, and role %s may not publish %s (not their owner)", pub, ident(role), joinIDs(f.notOwned))
		c.Fix = fixCreatePublication(p, f.name, f.captured)
	case !f.exists:
		c.Status, c.Detail = StatusOK, fmt.Sprintf("publication %s does not exist yet; init creates it", pub)
	case !(f.insert && f.update && f.delete && f.truncate):
		c.Detail = fmt.Sprintf("publication %s does not publish every operation (insert %t, update %t, delete %t, truncate %t)",
			pub, f.insert, f.update, f.delete, f.truncate)
		c.Fix = fixPublicationOps(f.name)
	case len(f.extra) > 0:
		c.Detail = fmt.Sprintf("publication %s also publishes %s, which pg-cdc does not capture: start stops (exit 16) at their first change",
			pub, joinIDs(f.extra))
		c.Fix = fixPublicationExtra(f.name, f.extra, f.allTables)
	case len(f.missing) > 0 && t.Initialized:
		c.Detail = fmt.Sprintf("publication %s does not publish %s: their changes are not streamed", pub, joinIDs(f.missing))
		c.Fix = fixPublicationAdd(p, f.name, f.missing) + "; then run 'pg-cdc verify': changes made meanwhile are missing from the sink (rebuild if it finds differences)"
	case len(f.missing) > 0 && (!f.owned || len(f.notOwned) > 0):
		c.Detail = fmt.Sprintf("publication %s does not publish %s, and role %s may not add them (it must own the publication and the tables)",
			pub, joinIDs(f.missing), ident(role))
		c.Fix = fixPublicationAdd(p, f.name, f.missing)
	case len(f.missing) > 0:
		c.Status, c.Detail = StatusOK, fmt.Sprintf("publication %s exists; init adds %s", pub, joinIDs(f.missing))
	default:
		c.Status, c.Detail = StatusOK, fmt.Sprintf("publication %s publishes every operation of the captured tables", pub)
	}
	return c
}

// slotCheck judges the slot (slot). Before init a missing one is fine, and
// an inactive one is dropped and created again by init (a warning); after
// init it must exist, be pg-cdc's, keep its WAL, and be confirmed no
// further than the manifest.
func slotCheck(s SlotInfo, t PreflightTarget, database string, p Provider) Check {
	c := Check{Name: "slot", Status: StatusFail}
	name := ident(t.Slot) // for details; fixes quote it as SQL needs
	state := func() string {
		active := "inactive"
		if s.Active {
			active = fmt.Sprintf("active (PID %d)", s.ActivePID)
		}
		return fmt.Sprintf("%s, confirmed_flush_lsn %s, wal_status %s, retained WAL %d MiB", active, s.ConfirmedFlushLSN, s.WALStatus, s.RetainedBytes>>20)
	}
	switch {
	case !s.Exists && t.Initialized:
		c.Detail = fmt.Sprintf("slot %s does not exist, but the sink is initialized: the changes since its end LSN are gone (start exits 10)", name)
		c.Fix = rebuild
	case !s.Exists:
		c.Status, c.Detail = StatusOK, fmt.Sprintf("slot %s does not exist yet; init creates it", name)
	case s.Plugin != "pgoutput" || s.Database != database:
		kind := "a physical slot"
		if s.Plugin != "" {
			kind = fmt.Sprintf("a %s slot of database %s", s.Plugin, ident(s.Database))
		}
		c.Detail = fmt.Sprintf("slot %s is %s, not pg-cdc's (pgoutput, database %s)", name, kind, ident(database))
		c.Fix = fixSlotForeign(t.Slot)
	case s.Lost():
		c.Detail = fmt.Sprintf("slot %s is invalidated (wal_status lost): the WAL it needs is gone (start exits 10)", name)
		c.Fix = fixSlotLost(p)
	case t.Initialized && s.ConfirmedFlushLSN > t.EndLSN:
		c.Detail = fmt.Sprintf("slot %s is confirmed at %s, past the manifest's end LSN %s: another consumer used it (start exits 11)",
			name, s.ConfirmedFlushLSN, t.EndLSN)
		c.Fix = "find the other consumer (each pg-cdc needs its own slot), then " + rebuild
	case !t.Initialized && s.Active:
		c.Detail = fmt.Sprintf("slot %s exists and is in use by PID %d, but the sink has no manifest: init refuses it", name, s.ActivePID)
		c.Fix = fixSlotBusy(t.Slot, s.ActivePID)
	case !t.Initialized:
		c.Status = StatusWarn
		c.Detail = fmt.Sprintf("slot %s exists but the sink has no manifest: left over from an init that did not finish, init drops it and creates it again (%s)", name, state())
		c.Fix = "nothing, if the slot is pg-cdc's; if something else uses it, choose another replication.slot"
	case s.WALStatus == "unreserved":
		c.Status = StatusWarn
		c.Detail = fmt.Sprintf("slot %s holds more WAL than max_slot_wal_keep_size allows and will be invalidated: %s", name, state())
		c.Fix = fixSlotUnreserved(p)
	default:
		c.Status, c.Detail = StatusOK, fmt.Sprintf("slot %s: %s", name, state())
	}
	return c
}

func joinIDs(ids []cdc.TableID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return strings.Join(s, ", ")
}
