package main

import (
	"context"
	"log/slog"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// capturedTables discovers the tables the configuration captures
// (source.postgres.schemas, tables.include and tables.exclude), keeps
// those for which keep is true (all when keep is nil), applies the
// configuration's type overrides to them and logs what postgres.CheckTables
// warns about. init, rebuild and the search for new tables share it, so a
// table is captured the same way whichever of them finds it. With keep
// nil, an override naming no column of the result is an error (a typo
// would go unnoticed); with keep, only the overrides of the kept tables
// apply, the others name tables captured before.
func capturedTables(ctx context.Context, db *postgres.DB, cfg config.Config, keep func(cdc.TableID) bool, log *slog.Logger) ([]*cdc.Table, error) {
	include, err := cfg.IncludeIDs()
	if err != nil {
		return nil, usageError{err}
	}
	found, err := db.DiscoverTables(ctx, cfg.Source.Postgres.Schemas, include, cfg.Tables.Exclude)
	if err != nil {
		return nil, err
	}
	types := cfg.Types
	if keep != nil {
		kept := found[:0]
		for _, t := range found {
			if keep(t.ID) {
				kept = append(kept, t)
			}
		}
		found = kept
		types = overridesFor(found, cfg.Types)
	}
	if len(found) == 0 {
		return nil, nil
	}
	if err := applyTypeOverrides(found, types); err != nil {
		return nil, usageError{err}
	}
	warnings, err := postgres.CheckTables(found)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	return found, nil
}
