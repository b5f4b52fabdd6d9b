package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

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
