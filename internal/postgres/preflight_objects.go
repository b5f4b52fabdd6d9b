package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

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
