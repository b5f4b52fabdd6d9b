package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/pgtest"
)

// healthy is a server pg-cdc can use as it is.
func healthy() serverFacts {
	return serverFacts{versionNum: 150004, version: "15.4", walLevel: "logical", maxSlots: 10, usedSlots: 2,
		maxSenders: 10, senders: 1, role: "cdc", replication: true, database: "app", createOnDatabase: true}
}

var target = PreflightTarget{Provider: ProviderAuto, Publication: "pg_cdc_pub", Slot: "pg_cdc_slot"}

// byName indexes checks; a name that occurs twice keeps the last.
func byName(checks []Check) map[string]Check {
	m := make(map[string]Check, len(checks))
	for _, c := range checks {
		m[c.Name] = c
	}
	return m
}

func TestServerChecks(t *testing.T) {
	for _, c := range serverChecks(healthy(), ProviderSelfManaged, target) {
		if c.Status != StatusOK || c.Fix != "" {
			t.Errorf("healthy server: %+v", c)
		}
	}

	f := healthy()
	f.versionNum, f.version, f.walLevel = 130011, "13.11", "replica"
	f.replication = false
	f.createOnDatabase = false
	f.usedSlots, f.inactiveSlots = 10, []string{"stale"}
	f.senders = 10
	got := byName(serverChecks(f, ProviderSelfManaged, target))
	want := map[string][2]string{ // name: detail part, fix part
		"server_version":        {"PostgreSQL 13.11 is older than 14", "pg_upgrade"},
		"wal_level":             {"wal_level is replica, not logical", "ALTER SYSTEM SET wal_level = logical"},
		"replication_privilege": {`role "cdc" has neither SUPERUSER nor REPLICATION`, `ALTER ROLE "cdc" WITH REPLICATION`},
		"database_create":       {`lacks CREATE on database "app"`, `GRANT CREATE ON DATABASE "app" TO "cdc"`},
		"replication_slots":     {"all 10 replication slots are in use", "inactive now: stale"},
		"wal_senders":           {"all 10 WAL senders are in use", "ALTER SYSTEM SET max_wal_senders = 11"},
	}
	for name, w := range want {
		c := got[name]
		if c.Status != StatusFail || !strings.Contains(c.Detail, w[0]) || !strings.Contains(c.Fix, w[1]) {
			t.Errorf("%s = %+v, want a failure with %q, fixed by %q", name, c, w[0], w[1])
		}
	}

	// The slot exists (init drops and recreates it; start streams it) and
	// is active: no further slot or sender is needed.
	f = healthy()
	f.usedSlots, f.senders, f.slotExists, f.slotActive = 10, 10, true, true
	f.publicationExists, f.createOnDatabase = true, false
	for _, c := range serverChecks(f, ProviderSelfManaged, target) {
		if c.Status != StatusOK {
			t.Errorf("full server with our slot and publication: %+v", c)
		}
	}

	// RDS: rds_replication membership is the replication privilege, and
	// its absence is fixed with GRANT.
	f = healthy()
	f.replication, f.rdsReplication = false, true
	if c := byName(serverChecks(f, ProviderRDS, target))["replication_privilege"]; c.Status != StatusOK || !strings.Contains(c.Detail, "rds_replication") {
		t.Errorf("rds_replication member: %+v", c)
	}
	f.rdsReplication, f.walLevel = false, "replica"
	got = byName(serverChecks(f, ProviderRDS, target))
	if c := got["replication_privilege"]; c.Status != StatusFail || !strings.Contains(c.Fix, `GRANT rds_replication TO "cdc"`) {
		t.Errorf("no rds_replication: %+v", c)
	}
	if c := got["wal_level"]; c.Status != StatusFail || !strings.Contains(c.Fix, "rds.logical_replication") {
		t.Errorf("wal_level on RDS: %+v", c)
	}
}

func TestSlotCheck(t *testing.T) {
	ours := SlotInfo{Exists: true, Plugin: "pgoutput", Database: "app", ConfirmedFlushLSN: 100, WALStatus: "reserved"}
	initialized := target
	initialized.Initialized, initialized.EndLSN = true, 100
	mod := func(f func(*SlotInfo)) SlotInfo { s := ours; f(&s); return s }
	cases := []struct {
		name   string
		slot   SlotInfo
		t      PreflightTarget
		status Status
		detail string
	}{
		{"missing before init", SlotInfo{}, target, StatusOK, "init creates it"},
		{"missing after init", SlotInfo{}, initialized, StatusFail, "start exits 10"},
		{"lost", mod(func(s *SlotInfo) { s.WALStatus = "lost" }), initialized, StatusFail, "invalidated"},
		{"ahead", mod(func(s *SlotInfo) { s.ConfirmedFlushLSN = 200 }), initialized, StatusFail, "start exits 11"},
		{"other plugin", mod(func(s *SlotInfo) { s.Plugin = "test_decoding" }), target, StatusFail, "a test_decoding slot"},
		{"other database", mod(func(s *SlotInfo) { s.Database = "other" }), initialized, StatusFail, `database "other"`},
		{"physical", SlotInfo{Exists: true}, target, StatusFail, "a physical slot"},
		{"busy before init", mod(func(s *SlotInfo) { s.Active, s.ActivePID = true, 42 }), target, StatusFail, "in use by PID 42"},
		{"left over", ours, target, StatusWarn, "init drops it"},
		{"unreserved", mod(func(s *SlotInfo) { s.WALStatus = "unreserved" }), initialized, StatusWarn, "will be invalidated"},
		{"streaming", mod(func(s *SlotInfo) { s.Active, s.ActivePID = true, 42 }), initialized, StatusOK, "active (PID 42)"},
	}
	for _, c := range cases {
		got := slotCheck(c.slot, c.t, "app", ProviderSelfManaged)
		if got.Status != c.status || !strings.Contains(got.Detail, c.detail) || (got.Status == StatusOK) != (got.Fix == "") {
			t.Errorf("%s: %+v, want %s with %q", c.name, got, c.status, c.detail)
		}
	}
	if got := slotCheck(mod(func(s *SlotInfo) { s.WALStatus = "lost" }), initialized, "app", ProviderSelfManaged); !strings.Contains(got.Fix, "pg-cdc teardown --yes") {
		t.Errorf("lost slot fix: %q", got.Fix)
	}
}

func TestPublicationCheck(t *testing.T) {
	a, b := cdc.TableID{Schema: "public", Name: "a"}, cdc.TableID{Schema: "public", Name: "b"}
	all := publicationFacts{name: "pub", exists: true, owned: true, insert: true, update: true, delete: true, truncate: true, captured: []cdc.TableID{a, b}}
	initialized := target
	initialized.Initialized = true
	mod := func(f func(*publicationFacts)) publicationFacts { p := all; f(&p); return p }
	cases := []struct {
		name   string
		f      publicationFacts
		t      PreflightTarget
		status Status
		fix    string
	}{
		{"missing before init", publicationFacts{name: "pub", captured: []cdc.TableID{a, b}}, target, StatusOK, ""},
		{"missing, tables not owned", publicationFacts{name: "pub", captured: []cdc.TableID{a, b}, notOwned: []cdc.TableID{b}}, target, StatusFail,
			`CREATE PUBLICATION "pub" FOR TABLE ONLY "public"."a", ONLY "public"."b"`},
		{"missing after init", publicationFacts{name: "pub"}, initialized, StatusFail, "pg-cdc teardown"},
		{"no truncate", mod(func(p *publicationFacts) { p.truncate = false }), target, StatusFail, "publish = 'insert, update, delete, truncate'"},
		{"extra", mod(func(p *publicationFacts) { p.extra = []cdc.TableID{{Schema: "public", Name: "x"}} }), target, StatusFail, `DROP TABLE ONLY "public"."x"`},
		{"missing table before init", mod(func(p *publicationFacts) { p.missing = []cdc.TableID{b} }), target, StatusOK, ""},
		{"missing table, not the owner", mod(func(p *publicationFacts) { p.missing, p.owned = []cdc.TableID{b}, false }), target, StatusFail,
			`ALTER PUBLICATION "pub" ADD TABLE ONLY "public"."b"`},
		{"missing table after init", mod(func(p *publicationFacts) { p.missing = []cdc.TableID{b} }), initialized, StatusFail, "pg-cdc verify"},
		{"complete", all, initialized, StatusOK, ""},
	}
	for _, c := range cases {
		got := publicationCheck(c.f, c.t, "cdc", ProviderSelfManaged)
		if got.Status != c.status || !strings.Contains(got.Fix, c.fix) || (got.Status == StatusOK) != (got.Fix == "") {
			t.Errorf("%s: %+v, want %s fixed by %q", c.name, got, c.status, c.fix)
		}
	}
}

// TestRunPreflightReplicaLevel runs every check against a server that
// cannot feed pg-cdc (wal_level = replica) with a table whose replica
// identity is NOTHING (it has a primary key, so the fix is DEFAULT) and a
// table without a key (captured insert-only: a warning), first as the
// superuser, then as a role without any of the privileges pg-cdc needs.
func TestRunPreflightReplicaLevel(t *testing.T) {
	c := pgtest.NewWith(t, pgtest.Options{Settings: []string{"wal_level = replica"}})
	url := c.CreateDatabase(t)
	e := &env{t: t, url: url}
	e.exec(`CREATE TABLE keyed (id int PRIMARY KEY, v text)`,
		`CREATE TABLE nothing (id int PRIMARY KEY, v text)`,
		`ALTER TABLE nothing REPLICA IDENTITY NOTHING`,
		`CREATE TABLE nokey (v text)`)
	ctx := testCtx(t)
	tgt := target
	tgt.Schemas = []string{"public"}

	r := RunPreflight(ctx, StaticURL(url), tgt)
	if r.Provider != ProviderSelfManaged || r.Identity.SystemIdentifier == "" || len(r.Tables) != 3 {
		t.Errorf("provider %q, identity %+v, %d tables", r.Provider, r.Identity, len(r.Tables))
	}
	want := []struct {
		name   string
		status Status
		detail string
		fix    string
	}{
		{"connect", StatusOK, "connected to", ""},
		{"provider", StatusOK, "provider self-managed (detected", ""},
		{"server_version", StatusOK, "PostgreSQL 1", ""},
		{"wal_level", StatusFail, "wal_level is replica, not logical", "ALTER SYSTEM SET wal_level = logical"},
		{"replication_privilege", StatusOK, "is a superuser", ""},
		{"database_create", StatusOK, "has CREATE", ""},
		{"replication_slots", StatusOK, "free", ""},
		{"wal_senders", StatusOK, "free", ""},
		{"replication_connection", StatusOK, "replication connection works", ""},
		{"tables", StatusOK, "3 tables to capture: public.keyed, public.nokey, public.nothing", ""},
		{"replica_identity", StatusWarn, "public.nokey has no primary key", `ALTER TABLE "public"."nokey" REPLICA IDENTITY FULL`},
		{"replica_identity", StatusFail, "public.nothing has REPLICA IDENTITY NOTHING", `ALTER TABLE "public"."nothing" REPLICA IDENTITY DEFAULT`},
		{"table_privileges", StatusOK, "may SELECT", ""},
		{"publication", StatusOK, "init creates it", ""},
		{"slot", StatusOK, "init creates it", ""},
	}
	if len(r.Checks) != len(want) {
		t.Fatalf("%d checks, want %d: %+v", len(r.Checks), len(want), r.Checks)
	}
	for i, w := range want {
		c := r.Checks[i]
		if c.Name != w.name || c.Status != w.status || !strings.Contains(c.Detail, w.detail) || !strings.Contains(c.Fix, w.fix) {
			t.Errorf("check %d = %+v\nwant %s %s with %q fixed by %q", i, c, w.name, w.status, w.detail, w.fix)
		}
	}

	// A role with nothing: it may connect and read the catalog, no more.
	e.exec(`CREATE ROLE preflight_plain LOGIN`)
	t.Cleanup(func() { e.exec(`DROP ROLE preflight_plain`) })
	r = RunPreflight(ctx, StaticURL(strings.Replace(url, "postgres@", "preflight_plain@", 1)), tgt)
	got := map[string]Check{}
	for _, c := range r.Checks {
		if c.Name != "replica_identity" {
			got[c.Name] = c
		}
	}
	fails := map[string]string{
		"replication_privilege": `ALTER ROLE "preflight_plain" WITH REPLICATION`,
		"database_create":       `GRANT CREATE ON DATABASE`,
		"table_privileges":      `GRANT SELECT ON TABLE "public"."keyed", "public"."nokey", "public"."nothing" TO "preflight_plain"`,
		"publication":           `CREATE PUBLICATION "pg_cdc_pub" FOR TABLE ONLY "public"."keyed", ONLY "public"."nokey", ONLY "public"."nothing"`,
	}
	for name, fix := range fails {
		if c := got[name]; c.Status != StatusFail || !strings.Contains(c.Fix, fix) {
			t.Errorf("%s as a plain role = %+v, want a failure fixed by %q", name, c, fix)
		}
	}
	if c, ok := got["replication_connection"]; ok {
		t.Errorf("replication_connection ran although the role may not replicate: %+v", c)
	}
}

// TestRunPreflightInitialized: after init the slot and the publication
// must exist and match the manifest; before it, a left-over slot is a
// warning.
func TestRunPreflightInitialized(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY)`, `CREATE TABLE b (id int PRIMARY KEY)`)
	tgt := PreflightTarget{Provider: ProviderSelfManaged, Publication: "pf_pub", Slot: "pf_slot",
		Include: []cdc.TableID{{Schema: "public", Name: "a"}}}
	if err := e.db.EnsurePublication(ctx, tgt.Publication, tgt.Include); err != nil {
		t.Fatal(err)
	}
	repl, err := ConnectReplication(ctx, StaticURL(e.url))
	if err != nil {
		t.Fatal(err)
	}
	lsn, _, err := repl.CreateSlot(ctx, tgt.Slot)
	if cerr := repl.Close(context.Background()); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	last := func(tgt PreflightTarget, name string) Check {
		t.Helper()
		var found Check
		for _, c := range RunPreflight(ctx, StaticURL(e.url), tgt).Checks {
			if c.Name == name {
				found = c
			}
		}
		return found
	}
	if c := last(tgt, "slot"); c.Status != StatusWarn || !strings.Contains(c.Detail, "init drops it") {
		t.Errorf("slot before init: %+v", c)
	}
	tgt.Initialized, tgt.EndLSN = true, lsn
	for _, name := range []string{"provider", "publication", "slot"} {
		if c := last(tgt, name); c.Status != StatusOK {
			t.Errorf("%s after init: %+v", name, c)
		}
	}
	tgt.EndLSN = lsn - 1
	if c := last(tgt, "slot"); c.Status != StatusFail || !strings.Contains(c.Detail, "start exits 11") {
		t.Errorf("slot ahead of the manifest: %+v", c)
	}
	tgt.EndLSN = lsn
	e.exec(`ALTER PUBLICATION pf_pub ADD TABLE b`)
	if c := last(tgt, "publication"); c.Status != StatusFail || !strings.Contains(c.Fix, `ALTER PUBLICATION "pf_pub" DROP TABLE ONLY "public"."b"`) {
		t.Errorf("publication with a table not captured: %+v", c)
	}
	if c := last(tgt, "provider"); c.Status != StatusOK || !strings.Contains(c.Detail, "configured") {
		t.Errorf("configured provider: %+v", c)
	}
	tgt.Provider = ProviderRDS
	if c := last(tgt, "provider"); c.Status != StatusWarn || !strings.Contains(c.Fix, "self-managed") {
		t.Errorf("provider configured against the evidence: %+v", c)
	}
}
