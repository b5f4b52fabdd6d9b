package postgres

import (
	"context"
	"fmt"
	"strings"

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
	// passes the manifest's tables as Include (none: a capture initialized
	// before its tables exist, and no table is discovered).
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

// schemasText names the schemas DiscoverTables looks in.
func schemasText(schemas []string) string {
	if len(schemas) == 0 {
		return "any schema"
	}
	return "schemas " + strings.Join(schemas, ", ")
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

	var tables []*cdc.Table
	if !t.Initialized || len(t.Include) > 0 {
		// After init the manifest's tables are the captured ones: none
		// means none, not the schemas' (start adds those as it finds them).
		tables, err = db.DiscoverTables(ctx, t.Schemas, t.Include, t.Exclude)
	}
	switch {
	case err != nil:
		add(Check{Name: "tables", Status: StatusFail, Detail: err.Error(),
			Fix: "check source.postgres.schemas, tables.include and tables.exclude against the database"})
		return r
	case len(tables) == 0 && t.Initialized:
		add(Check{Name: "tables", Status: StatusOK,
			Detail: "the manifest captures no table yet: start adds each table created in the captured schemas, and backfills it"})
	case len(tables) == 0 && len(t.Include) > 0:
		// An explicit list that leaves nothing can never capture a table:
		// init refuses it.
		add(Check{Name: "tables", Status: StatusFail, Detail: "no tables to capture: none of the tables tables.include lists is captured, and start takes only those",
			Fix: "check tables.include and tables.exclude"})
		return r
	case len(tables) == 0:
		// Init sets up an empty capture, and start takes the tables as
		// the application creates them.
		add(Check{Name: "tables", Status: StatusWarn, Detail: fmt.Sprintf("no tables to capture yet in %s: init creates the publication and the slot with none, "+
			"and start captures each table created there from its first row", schemasText(t.Schemas)),
			Fix: "nothing, if the application creates its tables later; otherwise check source.postgres.schemas, tables.include and tables.exclude"})
	default:
		r.Tables = tables
		add(Check{Name: "tables", Status: StatusOK, Detail: describeTables(tables)})
		add(tableChecks(tables)...)
	}

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
