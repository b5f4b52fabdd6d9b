package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// resumeInit answers an init run again after one that stopped before every
// table was copied (killed, or failed). It cannot continue the copy itself:
// the exported snapshot the finished tables were read in died with the
// first process's replication connection, and a new snapshot would be
// taken at another point than the slot's consistent point. What it keeps:
// the manifest (the finished tables' bases, at the consistent point) and
// the slot, which the manifest refers to and which holds every change since
// that point. start streams from there and completes the unfinished tables
// as backfills, by primary-key chunks whose placement against the stream is
// decided by visibility (DESIGN §5), so nothing is copied twice or missed.
//
// The only write is a reset of the rows-copied count of a pending table
// whose copy was lost: its backfill starts from the beginning.
func resumeInit(ctx context.Context, out io.Writer, db *postgres.DB, store sink, m *manifest.Manifest, cfg config.Config, log *slog.Logger) error {
	slot, err := db.Slot(ctx, cfg.Replication.Slot)
	if err != nil {
		return err
	}
	// A lost slot or one confirmed past the manifest ends here as it would
	// in start; a slot still active is the killed init's walsender, which
	// PostgreSQL ends when it notices.
	if err := checkSlot(cfg.Replication.Slot, slot, m); err != nil && !errors.As(err, new(*slotBusyError)) {
		return err
	}
	lost := map[string]int64{}
	for _, key := range unfinishedTables(m) {
		if s := m.Tables[key].Snapshot; s.State == manifest.SnapshotPending && len(s.LastKey) == 0 && s.RowsCopied > 0 {
			lost[key] = s.RowsCopied
		}
	}
	if len(lost) > 0 {
		c, err := manifest.Open(ctx, store, manifest.Breaker{})
		if err != nil {
			return err
		}
		if m, err = c.Commit(ctx, func(m *manifest.Manifest) error {
			for key := range lost {
				if t := m.Tables[key]; t != nil && t.Snapshot.State == manifest.SnapshotPending && len(t.Snapshot.LastKey) == 0 {
					t.Snapshot.RowsCopied = 0
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("reset the progress of the interrupted copies: %w", err)
		}
	}
	unfinished := unfinishedTables(m)
	log.Info("init was interrupted; keeping the manifest and the slot", "slot", cfg.Replication.Slot, "lsn", m.EndLSN,
		"complete", len(m.Tables)-len(unfinished), "unfinished", len(unfinished))
	printResume(out, m, lost, cfg.Replication.Slot)
	return nil
}

// printResume says what an interrupted init finished and what is left.
func printResume(out io.Writer, m *manifest.Manifest, lost map[string]int64, slot string) {
	unfinished := unfinishedTables(m)
	fmt.Fprintf(out, "init was interrupted: %d of %d tables are complete at the consistent point %s; %d are not:\n",
		len(m.Tables)-len(unfinished), len(m.Tables), m.EndLSN, len(unfinished))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tSNAPSHOT\tROWS\t")
	var keyless []string
	for _, key := range sortedTables(m) {
		t := m.Tables[key]
		note := ""
		switch {
		case t.Snapshot.Complete():
			rows := int64(0)
			if t.Base != nil {
				rows = t.Base.RowCount
			}
			fmt.Fprintf(tw, "%s\tcomplete\t%d\t\n", key, rows)
			continue
		case lost[key] > 0:
			note = fmt.Sprintf("the interrupted copy had read %d rows; it is copied again from the start", lost[key])
		case len(t.PrimaryKey) == 0:
			keyless = append(keyless, key)
			note = "no primary key: cannot be backfilled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", key, t.Snapshot.State, snapshotProgress(t.Snapshot), note)
	}
	tw.Flush()
	fmt.Fprintf(out, "the manifest and slot %s are kept: the slot holds every change since %s.\n", slot, m.EndLSN)
	fmt.Fprintln(out, "run 'pg-cdc start': it streams from that point and completes the unfinished tables as backfills ('pg-cdc status' shows their progress)")
	for _, key := range keyless {
		fmt.Fprintf(out, "table %s has no primary key, so start cannot backfill it: add a primary key to it, or run 'pg-cdc teardown --yes' and 'pg-cdc init' again\n", key)
	}
}

// sortedTables returns the manifest's table keys in order.
func sortedTables(m *manifest.Manifest) []string {
	return slices.Sorted(maps.Keys(m.Tables))
}

// snapshotProgress words the rows a table's snapshot has copied so far
// against the estimate: "120000 / ~1000000 (12%)", "120000", or "-".
func snapshotProgress(s manifest.Snapshot) string {
	switch {
	case s.RowsEstimate > 0:
		return fmt.Sprintf("%d / ~%d (%d%%)", s.RowsCopied, s.RowsEstimate, min(100, s.RowsCopied*100/s.RowsEstimate))
	case s.RowsCopied > 0:
		return fmt.Sprintf("%d / ?", s.RowsCopied)
	default:
		return "-"
	}
}
