package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/replicate"
)

// addNewTables brings the tables the configuration captures (tables.include,
// or the watched schemas) that the manifest lacks into the capture: each is
// recorded in the manifest with its schema and snapshot state backfilling,
// then added to the publication, and the session's backfill copies it while
// the stream runs (docs/decisions.md, online backfill).
//
// The order makes a crash harmless: the manifest names the table first, so
// the stream knows it before the publication sends its first change; a
// crash before the ALTER PUBLICATION leaves a backfilling table that the
// next start adds to the publication again (EnsurePublication is a no-op
// for a table already published). After the ALTER, the backfill waits for
// the transactions in flight to end (postgres.DB.WaitInFlight): a chunk
// snapshot then sees every transaction the publication may have missed,
// and every later one is published. The wait runs in the session's backfill
// worker, beside the stream (a transaction left open, a prepared one, would
// otherwise hold the stream up).
func addNewTables(ctx context.Context, cfg config.Config, db *postgres.DB, mc *manifest.Committer, log *slog.Logger) error {
	m := mc.Current()
	f := tableFinder{cfg: cfg, db: db, log: log}
	added, err := f.NewTables(ctx, func(id cdc.TableID) bool { return m.Tables[id.String()] != nil })
	var refused *cdc.Error
	if errors.As(err, &refused) {
		return err
	}
	if err != nil {
		// Streaming the captured tables does not depend on it (a table
		// named in tables.include was dropped, say).
		log.Warn("looking for new tables to capture failed; streaming the captured ones", "err", err)
	}
	var unpublished []cdc.TableID
	for _, mt := range m.Tables {
		if !mt.Snapshot.Complete() {
			unpublished = append(unpublished, mt.ID())
		}
	}
	if len(added) == 0 && len(unpublished) == 0 {
		return nil
	}
	if len(added) > 0 {
		if _, err := mc.Commit(ctx, func(m *manifest.Manifest) error {
			for _, mt := range added {
				if m.Tables[mt.ID().String()] == nil {
					m.Tables[mt.ID().String()] = mt
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("record new tables: %w", err)
		}
		names := make([]string, len(added))
		for i, mt := range added {
			names[i] = mt.ID().String()
			unpublished = append(unpublished, mt.ID())
		}
		log.Info("new tables captured; they are backfilled while streaming", "tables", strings.Join(names, ","))
	}
	slices.SortFunc(unpublished, func(a, b cdc.TableID) int { return strings.Compare(a.String(), b.String()) })
	return db.EnsurePublication(ctx, cfg.Replication.Publication, unpublished)
}

// tableFinder finds tables to capture that are not captured yet, and
// publishes them: the replicate.TableSource of a session.
type tableFinder struct {
	cfg config.Config
	db  *postgres.DB
	log *slog.Logger
}

var _ replicate.TableSource = tableFinder{}

// NewTables returns, as the manifest is to record them (snapshot
// backfilling, no base), the tables the configuration captures for which
// known is false. A table without a primary key is refused: a backfill
// places rows by key.
func (f tableFinder) NewTables(ctx context.Context, known func(cdc.TableID) bool) ([]*manifest.Table, error) {
	fresh, err := capturedTables(ctx, f.db, f.cfg, func(id cdc.TableID) bool { return !known(id) }, f.log)
	if err != nil || len(fresh) == 0 {
		return nil, err
	}
	var out []*manifest.Table
	for _, t := range fresh {
		if len(t.PrimaryKey) == 0 {
			return nil, &cdc.Error{
				Class: cdc.ErrSchemaChanged,
				Msg:   fmt.Sprintf("table %s has no primary key: a table captured after init is backfilled by primary key, and it has none", t.ID),
				Hint:  fmt.Sprintf("add a primary key to it (ALTER TABLE %s ADD PRIMARY KEY (...)), or leave it out with tables.exclude; REPLICA IDENTITY FULL is not enough", t.ID),
			}
		}
		mt, err := manifestTable(t, nil, 0)
		if err != nil {
			return nil, err
		}
		now := time.Now().UTC()
		mt.Snapshot = manifest.Snapshot{State: manifest.SnapshotBackfilling, StartedAt: &now}
		out = append(out, mt)
	}
	return out, nil
}

// Publish adds the tables to the publication and waits for the
// transactions older than that change to end.
func (f tableFinder) Publish(ctx context.Context, ids []cdc.TableID) error {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b cdc.TableID) int { return strings.Compare(a.String(), b.String()) })
	if err := f.db.EnsurePublication(ctx, f.cfg.Replication.Publication, ids); err != nil {
		return err
	}
	return f.WaitInFlight(ctx)
}

// WaitInFlight waits for the transactions open now to end.
func (f tableFinder) WaitInFlight(ctx context.Context) error {
	return f.db.WaitInFlight(ctx, 100*time.Millisecond, func(xmin, until cdc.XID) {
		f.log.Info("backfill waits for transactions older than the publication change to end", "xmin", uint64(xmin), "until", uint64(until))
	})
}

// overridesFor keeps the types: overrides that name a column of tables.
func overridesFor(tables []*cdc.Table, types map[string]string) map[string]string {
	out := map[string]string{}
	for _, ref := range slices.Sorted(maps.Keys(types)) {
		schema, table, _, err := config.ParseColumnRef(ref)
		if err != nil {
			out[ref] = types[ref] // reported by applyTypeOverrides
			continue
		}
		for _, t := range tables {
			if t.ID.Schema == schema && t.ID.Name == table {
				out[ref] = types[ref]
			}
		}
	}
	return out
}
