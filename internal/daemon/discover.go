package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// tableFinder is what new-table discovery needs of the source: the tables
// to capture that the manifest lacks, and the publication
// (capture.Finder implements it).
type tableFinder interface {
	NewTables(ctx context.Context, known func(cdc.TableID) bool) ([]*manifest.Table, error)
	EnsurePublication(ctx context.Context, ids []cdc.TableID) error
}

// manifestWriter is what it needs of the manifest: the current version and
// a conditional commit (manifest.Committer implements it).
type manifestWriter interface {
	Current() *manifest.Manifest
	Commit(ctx context.Context, mutate func(*manifest.Manifest) error) (*manifest.Manifest, error)
}

// addNewTables brings the tables the capture takes that the manifest lacks
// into the capture, before a session streams: each is recorded in the
// manifest with its schema and snapshot state backfilling, then added to
// the publication, and the session's chunk worker copies it while the
// stream runs (design.md §5.2).
//
// The order makes a crash harmless:
//  1. the manifest names the table first, so the stream knows it before the
//     publication sends its first change;
//  2. then every table whose snapshot is not complete is made published:
//     a crash before (or in) this step leaves a backfilling table that the
//     next session publishes here (EnsurePublication is a no-op for a
//     table already published).
//
// After the ALTER, the backfill waits for the transactions in flight to
// end (capture.Finder.WaitInFlight): a chunk snapshot then sees every
// transaction the publication may have missed, and every later one is
// published. That wait runs in the session's chunk worker, beside the
// stream (a transaction left open, a prepared one, would otherwise hold
// the stream up).
func addNewTables(ctx context.Context, f tableFinder, mc manifestWriter, log *slog.Logger) error {
	m := mc.Current()
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
	if len(unpublished) == 0 {
		return nil
	}
	return f.EnsurePublication(ctx, unpublished)
}
