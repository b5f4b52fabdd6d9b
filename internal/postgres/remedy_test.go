package postgres

import (
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestRemedies: each provider's fix names the commands that work there, and
// none names another provider's (a parameter group on a self-managed
// server, ALTER SYSTEM on RDS).
func TestRemedies(t *testing.T) {
	type want struct {
		fix          string
		has, hasNone []string
	}
	rds := []string{"parameter group", "aws rds", "rds_replication", "rds.logical_replication"}
	selfManaged := []string{"ALTER SYSTEM", "postgresql.conf", "restart PostgreSQL", "ALTER ROLE"}
	cases := map[string]want{
		"wal_level self-managed": {fixWALLevel(ProviderSelfManaged),
			[]string{"ALTER SYSTEM SET wal_level = logical", "postgresql.conf", "restart PostgreSQL"}, rds},
		"wal_level rds": {fixWALLevel(ProviderRDS),
			[]string{"rds.logical_replication = 1", "wal_level = logical", "DB parameter group",
				`aws rds modify-db-parameter-group --db-parameter-group-name <group> --parameters "ParameterName=rds.logical_replication,ParameterValue=1,ApplyMethod=pending-reboot"`,
				"aws rds reboot-db-instance --db-instance-identifier <instance>"},
			append([]string{"cluster"}, selfManaged...)},
		"wal_level aurora": {fixWALLevel(ProviderAurora),
			[]string{"rds.logical_replication = 1", "DB cluster parameter group",
				`aws rds modify-db-cluster-parameter-group --db-cluster-parameter-group-name <group> --parameters "ParameterName=rds.logical_replication,ParameterValue=1,ApplyMethod=pending-reboot"`,
				"reboot the writer instance"},
			selfManaged},
		"role self-managed": {fixReplicationRole(ProviderSelfManaged, "app"),
			[]string{`as a superuser run ALTER ROLE "app" WITH REPLICATION`}, rds},
		"role rds": {fixReplicationRole(ProviderRDS, "app"),
			[]string{`as the master user (a member of rds_superuser) run GRANT rds_replication TO "app"`}, selfManaged},
		"role aurora": {fixReplicationRole(ProviderAurora, `we"ird`),
			[]string{`GRANT rds_replication TO "we""ird"`}, selfManaged},
		"version self-managed": {fixVersion(ProviderSelfManaged), []string{"PostgreSQL 14 or newer", "pg_upgrade"}, rds},
		"version rds": {fixVersion(ProviderRDS),
			[]string{"aws rds modify-db-instance --db-instance-identifier <instance> --engine-version <version> --allow-major-version-upgrade"}, selfManaged},
		"version aurora": {fixVersion(ProviderAurora),
			[]string{"aws rds modify-db-cluster --db-cluster-identifier <cluster> --engine-version <version> --allow-major-version-upgrade"}, selfManaged},
		"create self-managed": {fixCreateOnDatabase(ProviderSelfManaged, "app", "cdc"),
			[]string{`GRANT CREATE ON DATABASE "app" TO "cdc"`, "a superuser"}, rds},
		"create rds": {fixCreateOnDatabase(ProviderRDS, "app", "cdc"),
			[]string{`GRANT CREATE ON DATABASE "app" TO "cdc"`, "the master user"}, selfManaged},
		"slots self-managed": {fixSlots(ProviderSelfManaged, 11, []string{"old_a", "old_b"}),
			[]string{"inactive now: old_a, old_b", "SELECT pg_drop_replication_slot('<name>')", "ALTER SYSTEM SET max_replication_slots = 11", "restart PostgreSQL"}, rds},
		"slots aurora": {fixSlots(ProviderAurora, 10, nil),
			[]string{"ParameterName=max_replication_slots,ParameterValue=10,ApplyMethod=pending-reboot", "DB cluster parameter group"},
			append([]string{"inactive"}, selfManaged...)},
		"senders rds": {fixSenders(ProviderRDS, 12),
			[]string{"ParameterName=max_wal_senders,ParameterValue=12,ApplyMethod=pending-reboot", "reboot-db-instance"}, selfManaged},
		// max_slot_wal_keep_size needs no restart.
		"keep size self-managed": {fixSlotUnreserved(ProviderSelfManaged),
			[]string{"ALTER SYSTEM SET max_slot_wal_keep_size = <size>", "SELECT pg_reload_conf()"}, []string{"restart PostgreSQL"}},
		"keep size rds": {fixSlotLost(ProviderRDS),
			[]string{"pg-cdc teardown --yes", "pg-cdc init", "new storage path", "ApplyMethod=immediate"}, []string{"reboot-db-instance"}},
		"identity with key": {fixReplicaIdentityNothing(cdc.TableID{Schema: "public", Name: "orders"}, true),
			[]string{`ALTER TABLE "public"."orders" REPLICA IDENTITY DEFAULT`}, []string{"FULL"}},
		"identity without key": {fixReplicaIdentityNothing(cdc.TableID{Schema: "a.b", Name: "c"}, false),
			[]string{`ALTER TABLE "a.b"."c" REPLICA IDENTITY FULL`, `ALTER TABLE "a.b"."c" ADD PRIMARY KEY (<columns>)`, "tables.exclude"}, nil},
		"insert-only": {fixInsertOnly(cdc.TableID{Schema: "public", Name: "events"}),
			[]string{`ALTER TABLE "public"."events" ADD PRIMARY KEY (<columns>)`, `ALTER TABLE "public"."events" REPLICA IDENTITY FULL`}, nil},
		"select rds": {fixSelect(ProviderRDS, []cdc.TableID{{Schema: "public", Name: "a"}, {Schema: "s", Name: "b"}}, "cdc"),
			[]string{`GRANT SELECT ON TABLE "public"."a", "s"."b" TO "cdc"`, "the master user"}, nil},
		"create publication": {fixCreatePublication(ProviderSelfManaged, "pg_cdc_pub", []cdc.TableID{{Schema: "public", Name: "a"}}),
			[]string{`CREATE PUBLICATION "pg_cdc_pub" FOR TABLE ONLY "public"."a" WITH (publish_via_partition_root = true)`}, nil},
		"publication extra": {fixPublicationExtra("p", []cdc.TableID{{Schema: "public", Name: "x"}}, false),
			[]string{`ALTER PUBLICATION "p" DROP TABLE ONLY "public"."x"`}, nil},
		"publication all tables": {fixPublicationExtra("p", []cdc.TableID{{Schema: "public", Name: "x"}}, true),
			[]string{`DROP PUBLICATION "p"`}, []string{"DROP TABLE"}},
	}
	for name, c := range cases {
		for _, s := range c.has {
			if !strings.Contains(c.fix, s) {
				t.Errorf("%s: fix lacks %q:\n%s", name, s, c.fix)
			}
		}
		for _, s := range c.hasNone {
			if strings.Contains(c.fix, s) {
				t.Errorf("%s: fix has %q, which belongs to another provider:\n%s", name, s, c.fix)
			}
		}
		if strings.Contains(c.fix, "\n") {
			t.Errorf("%s: fix is not one line: %q", name, c.fix)
		}
	}
}

func TestProviderEvidence(t *testing.T) {
	cases := []struct {
		e    providerEvidence
		want Provider
	}{
		{providerEvidence{}, ProviderSelfManaged},
		{providerEvidence{rdsSuperuser: true, rdsExtensions: true}, ProviderRDS},
		{providerEvidence{rdsExtensions: true}, ProviderRDS},
		{providerEvidence{auroraVersion: true, rdsSuperuser: true, rdsExtensions: true}, ProviderAurora},
	}
	for _, c := range cases {
		if got := c.e.provider(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.e, got, c.want)
		}
	}
}
