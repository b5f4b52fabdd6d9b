package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// The remedies: for each problem preflight finds, the exact fix on the
// provider it runs on. They are pure functions of the provider and the
// names involved, so every provider's text is tested without a server of
// that kind (remedy_test.go). A fix is one line; <angle brackets> mark
// what only the operator knows (the parameter group, the instance).

// admin names who can grant a privilege on the provider.
func admin(p Provider) string {
	if managed(p) {
		return "the master user (a member of rds_superuser)"
	}
	return "a superuser"
}

func managed(p Provider) bool { return p == ProviderRDS || p == ProviderAurora }

// fixSetting says how to change a server setting. restart is true for a
// setting that takes effect only when the server starts.
func fixSetting(p Provider, name, value string, restart bool) string {
	apply, reboot := "pending-reboot", true
	if !restart {
		apply, reboot = "immediate", false
	}
	switch p {
	case ProviderRDS:
		s := fmt.Sprintf("set %[1]s = %[2]s in the instance's DB parameter group: aws rds modify-db-parameter-group "+
			"--db-parameter-group-name <group> --parameters \"ParameterName=%[1]s,ParameterValue=%[2]s,ApplyMethod=%[3]s\"", name, value, apply)
		if reboot {
			s += ", then reboot the instance: aws rds reboot-db-instance --db-instance-identifier <instance>"
		}
		return s + " (a default parameter group cannot be changed: create a custom one and attach it with aws rds modify-db-instance --db-parameter-group-name)"
	case ProviderAurora:
		s := fmt.Sprintf("set %[1]s = %[2]s in the cluster's DB cluster parameter group: aws rds modify-db-cluster-parameter-group "+
			"--db-cluster-parameter-group-name <group> --parameters \"ParameterName=%[1]s,ParameterValue=%[2]s,ApplyMethod=%[3]s\"", name, value, apply)
		if reboot {
			s += ", then reboot the writer instance: aws rds reboot-db-instance --db-instance-identifier <writer instance>"
		}
		return s + " (a default parameter group cannot be changed: create a custom one and attach it with aws rds modify-db-cluster --db-cluster-parameter-group-name)"
	default:
		s := fmt.Sprintf("as a superuser run ALTER SYSTEM SET %s = %s (or set %s = %s in postgresql.conf)", name, value, name, value)
		if reboot {
			return s + ", then restart PostgreSQL (pg_ctl restart -D <data directory>, or systemctl restart postgresql)"
		}
		return s + ", then SELECT pg_reload_conf()"
	}
}

// fixVersion: pgoutput protocol 2 with streaming needs PostgreSQL 14.
func fixVersion(p Provider) string {
	switch p {
	case ProviderRDS:
		return "upgrade the instance to PostgreSQL 14 or newer: aws rds modify-db-instance --db-instance-identifier <instance> " +
			"--engine-version <version> --allow-major-version-upgrade --apply-immediately"
	case ProviderAurora:
		return "upgrade the cluster to Aurora PostgreSQL 14 or newer: aws rds modify-db-cluster --db-cluster-identifier <cluster> " +
			"--engine-version <version> --allow-major-version-upgrade --apply-immediately"
	default:
		return "upgrade to PostgreSQL 14 or newer (pg_upgrade, or a dump and restore)"
	}
}

// fixWALLevel: on RDS and Aurora wal_level cannot be set; the parameter
// rds.logical_replication = 1 sets it to logical.
func fixWALLevel(p Provider) string {
	if managed(p) {
		return "rds.logical_replication = 1 makes wal_level = logical: " + fixSetting(p, "rds.logical_replication", "1", true)
	}
	return fixSetting(p, "wal_level", "logical", true)
}

// fixReplicationRole: RDS and Aurora have no REPLICATION attribute to hand
// out; membership in rds_replication stands for it.
func fixReplicationRole(p Provider, role string) string {
	if managed(p) {
		return fmt.Sprintf("as %s run GRANT rds_replication TO %s", admin(p), ident(role))
	}
	return fmt.Sprintf("as %s run ALTER ROLE %s WITH REPLICATION", admin(p), ident(role))
}

// fixCreateOnDatabase: CREATE PUBLICATION needs CREATE on the database.
func fixCreateOnDatabase(p Provider, database, role string) string {
	return fmt.Sprintf("as the database's owner or %s run GRANT CREATE ON DATABASE %s TO %s", admin(p), ident(database), ident(role))
}

// fixSlots: free a slot, or allow more. inactive names the slots nobody
// streams from now, which are the candidates for dropping.
func fixSlots(p Provider, want int, inactive []string) string {
	raise := "raise max_replication_slots: " + fixSetting(p, "max_replication_slots", fmt.Sprint(want), true)
	if len(inactive) == 0 {
		return raise
	}
	return fmt.Sprintf("drop a replication slot nobody uses (inactive now: %s) with SELECT pg_drop_replication_slot('<name>'), or %s",
		strings.Join(inactive, ", "), raise)
}

// fixSenders: allow more WAL senders.
func fixSenders(p Provider, want int) string {
	return "stop a replication client that is no longer needed, or raise max_wal_senders: " + fixSetting(p, "max_wal_senders", fmt.Sprint(want), true)
}

// fixReplicaIdentityNothing: under REPLICA IDENTITY NOTHING a table's
// updates and deletes carry no key; with a primary key, DEFAULT uses it.
func fixReplicaIdentityNothing(table cdc.TableID, hasKey bool) string {
	name := qualified(table)
	if hasKey {
		return fmt.Sprintf("ALTER TABLE %s REPLICA IDENTITY DEFAULT", name)
	}
	return fmt.Sprintf("ALTER TABLE %[1]s REPLICA IDENTITY FULL (or add a primary key, ALTER TABLE %[1]s ADD PRIMARY KEY (<columns>), "+
		"and run ALTER TABLE %[1]s REPLICA IDENTITY DEFAULT), or leave the table out with tables.exclude", name)
}

// fixInsertOnly: a table without a key is captured insert-only.
func fixInsertOnly(table cdc.TableID) string {
	name := qualified(table)
	return fmt.Sprintf("to capture its updates and deletes, add a primary key (ALTER TABLE %[1]s ADD PRIMARY KEY (<columns>)) "+
		"or run ALTER TABLE %[1]s REPLICA IDENTITY FULL", name)
}

// fixSelect: the snapshot COPY reads every captured table.
func fixSelect(p Provider, tables []cdc.TableID, role string) string {
	return fmt.Sprintf("as the tables' owner or %s run GRANT SELECT ON TABLE %s TO %s", admin(p), tableList(tables), ident(role))
}

// fixCreatePublication: only the owner of a table (or a superuser) may
// publish it; init uses a publication that exists.
func fixCreatePublication(p Provider, pub string, tables []cdc.TableID) string {
	return fmt.Sprintf("as the tables' owner or %s create the publication, which init then uses: CREATE PUBLICATION %s FOR TABLE %s "+
		"WITH (publish_via_partition_root = true)", admin(p), ident(pub), publishedList(tables))
}

// fixPublicationAdd: only the publication's owner may add tables to it,
// and only tables it owns.
func fixPublicationAdd(p Provider, pub string, tables []cdc.TableID) string {
	return fmt.Sprintf("as the publication's and tables' owner or %s run ALTER PUBLICATION %s ADD TABLE %s",
		admin(p), ident(pub), publishedList(tables))
}

// fixPublicationOps: pg-cdc needs every operation published.
func fixPublicationOps(pub string) string {
	return fmt.Sprintf("as the publication's owner run ALTER PUBLICATION %s SET (publish = 'insert, update, delete, truncate')", ident(pub))
}

// fixPublicationExtra: the stream stops (exit 16) at the first change of a
// published table that is not captured.
func fixPublicationExtra(pub string, tables []cdc.TableID, allTables bool) string {
	if allTables {
		return fmt.Sprintf("%s is FOR ALL TABLES: drop it (DROP PUBLICATION %s) so that init creates one FOR TABLE the captured tables, "+
			"or capture every table (tables.include, tables.exclude, source.postgres.schemas)", ident(pub), ident(pub))
	}
	return fmt.Sprintf("as the publication's owner run ALTER PUBLICATION %s DROP TABLE %s, or capture them (tables.include, tables.exclude)",
		ident(pub), publishedList(tables))
}

// rebuild is the one way back from lost changes (docs/exit-codes.md, 10).
const rebuild = "run 'pg-cdc teardown --yes', then 'pg-cdc init' with a new storage path, to rebuild"

// fixSlotLost: the WAL the slot needs is gone.
func fixSlotLost(p Provider) string {
	return rebuild + "; to keep a stopped pg-cdc from losing its slot again, keep it running or raise max_slot_wal_keep_size: " +
		fixSetting(p, "max_slot_wal_keep_size", "<size>", false)
}

// fixSlotForeign: a slot of the configured name that pg-cdc did not make.
func fixSlotForeign(slot string) string {
	return fmt.Sprintf("choose another replication.slot, or, if nothing uses %[1]s, drop it: SELECT pg_drop_replication_slot('%[1]s')", slot)
}

// fixSlotBusy: before init, a slot in use belongs to another consumer.
func fixSlotBusy(slot string, pid int32) string {
	return fmt.Sprintf("stop the consumer streaming from %s (PID %d: SELECT pg_terminate_backend(%d)), or choose another replication.slot", slot, pid, pid)
}

// fixSlotUnreserved: the slot holds more WAL than max_slot_wal_keep_size
// allows and is lost at the next checkpoint that removes it.
func fixSlotUnreserved(p Provider) string {
	return "start pg-cdc now so it catches up before the next checkpoint removes the WAL, or raise max_slot_wal_keep_size: " +
		fixSetting(p, "max_slot_wal_keep_size", "<size>", false)
}

// fixConnect: the SQL connection failed.
func fixConnect(p Provider) string {
	if managed(p) {
		return "check source.postgres.url (host, port, database, user, password or IAM), that the instance's security group lets this host in, and that the user exists"
	}
	return "check source.postgres.url (host, port, database, user, password), that the server listens on that address (listen_addresses), and that pg_hba.conf lets this host and user connect"
}

// fixReplicationConnection: a walsender connection (replication=database)
// failed although the SQL connection worked.
func fixReplicationConnection(p Provider) string {
	if managed(p) {
		return "logical replication connections need rds.logical_replication = 1 and the rds_replication role; read the server's error above"
	}
	return "logical replication connections match pg_hba.conf's lines for the database (not the 'replication' lines) and need REPLICATION; read the server's error above"
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func qualified(id cdc.TableID) string { return pgx.Identifier{id.Schema, id.Name}.Sanitize() }
