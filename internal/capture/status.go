package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// Status is what `pg-cdc status` shows: the slot, how long it would
// survive unconfirmed at the source's WAL rate, and the manifest.
type Status struct {
	Slot     string
	SlotInfo postgres.SlotInfo
	Forecast string             // "" when not measured
	Manifest *manifest.Manifest // nil: not initialized
	SinkName string
	// SourceErr is why the source could not be reached (the slot is then
	// unknown): the manifest's view is shown all the same.
	SourceErr error
}

// Status reads the slot and the manifest; with rateWindow > 0 it measures
// the source's WAL rate over that long for the forecast. A source that
// cannot be reached leaves the slot unknown (Status.SourceErr) and the
// rest of the status as the sink has it: the status of a capture whose
// source is down is what an operator runs it for.
func (c *Capture) Status(ctx context.Context, rateWindow time.Duration) (*Status, error) {
	m, err := c.Load(ctx)
	if err != nil && !errors.Is(err, cdc.ErrNotInitialized) {
		return nil, err
	}
	db, err := postgres.Connect(ctx, c.Source)
	if err != nil {
		return &Status{Slot: c.Slot, Manifest: m, SinkName: c.SinkName, SourceErr: err}, nil
	}
	defer db.Close()
	slot, err := db.Slot(ctx, c.Slot)
	if err != nil {
		return nil, err
	}
	s := &Status{Slot: c.Slot, SlotInfo: slot, Manifest: m, SinkName: c.SinkName}
	if slot.Exists && rateWindow > 0 {
		if s.Forecast, err = forecastSlot(ctx, db, c.Slot, rateWindow); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// WriteText writes the status as `pg-cdc status` prints it.
func (s *Status) WriteText(out io.Writer, now time.Time) {
	if s.SourceErr != nil {
		fmt.Fprintf(out, "source:    UNREACHABLE: %v\n           slot %s unknown; the manifest below is the sink's\n", s.SourceErr, s.Slot)
	} else {
		printSlot(out, s.Slot, s.SlotInfo, s.Manifest)
	}
	if s.Forecast != "" {
		fmt.Fprintf(out, "           %s\n", s.Forecast)
	}
	if s.Manifest == nil {
		fmt.Fprintf(out, "manifest: none in %s (run 'pg-cdc init')\n", s.SinkName)
		return
	}
	printManifest(out, s.Manifest, now)
}

// forecastSlot measures the WAL rate over window and says how long the
// slot would survive at that rate if nothing confirmed it any more: the
// time until max_slot_wal_keep_size invalidates it.
func forecastSlot(ctx context.Context, db *postgres.DB, slot string, window time.Duration) (string, error) {
	first, err := db.SourceHealth(ctx, slot)
	if err != nil {
		return "", err
	}
	started := time.Now()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(window):
	}
	second, err := db.SourceHealth(ctx, slot)
	if err != nil {
		return "", err
	}
	rate := float64(second.CurrentLSN-min(first.CurrentLSN, second.CurrentLSN)) / time.Since(started).Seconds()
	return slotForecast(second.SafeWALSize, rate, window), nil
}

// slotForecast words the invalidation forecast.
func slotForecast(safeSize int64, rate float64, window time.Duration) string {
	measured := fmt.Sprintf("WAL rate %s/s over %s", HumanBytes(int64(rate)), window)
	switch eta := InvalidationETA(safeSize, rate); {
	case safeSize < 0:
		return measured + "; no max_slot_wal_keep_size: the slot is never invalidated, retained WAL grows until the source's disk fills"
	case eta < 0:
		return fmt.Sprintf("%s; %s of WAL left before max_slot_wal_keep_size invalidates the slot", measured, HumanBytes(safeSize))
	default:
		return fmt.Sprintf("%s; at this rate the slot would be invalidated in %s (%s left) if nothing confirmed it",
			measured, (time.Duration(eta) * time.Second).Round(time.Second), HumanBytes(safeSize))
	}
}

func printSlot(out io.Writer, name string, s postgres.SlotInfo, m *manifest.Manifest) {
	if !s.Exists {
		fmt.Fprintf(out, "slot:      %s does not exist\n", name)
		if m != nil {
			fmt.Fprintf(out, "           WARNING: 'start' will refuse to run (exit 10); '%s' recovers\n", RebuildCommand)
		}
		return
	}
	state := "inactive"
	if s.Active {
		state = fmt.Sprintf("active (PID %d)", s.ActivePID)
	}
	fmt.Fprintf(out, "slot:      %s %s, confirmed %s, wal_status %s, retained WAL %s\n",
		name, state, s.ConfirmedFlushLSN, s.WALStatus, HumanBytes(s.RetainedBytes))
	switch {
	case m == nil:
	case s.WALStatus == "lost":
		fmt.Fprintf(out, "           WARNING: the slot is invalidated; 'start' will refuse to run (exit 10); '%s' recovers\n", RebuildCommand)
	case s.ConfirmedFlushLSN > m.EndLSN:
		fmt.Fprintf(out, "           WARNING: the slot is confirmed past the manifest's end LSN %s; 'start' will refuse to run (exit 11); '%s' recovers\n", m.EndLSN, RebuildCommand)
	}
}

// DeltaFilesBound is the most delta files a table holds while compaction
// keeps up (compaction.max_delta_files' default, 48, plus a pass's worth
// of flushes); past it status and start warn.
const DeltaFilesBound = 64

func printManifest(out io.Writer, m *manifest.Manifest, now time.Time) {
	size := ""
	if n := m.EncodedBytes(); n > 0 {
		size = ", " + HumanBytes(int64(n)) // rewritten whole at every flush
	}
	fmt.Fprintf(out, "manifest:  epoch %d, end LSN %s, committed %s%s\n", m.Epoch, m.EndLSN, m.CommittedAt.Format(time.RFC3339), size)
	if n := len(m.History); n > 0 {
		last := m.History[n-1]
		fmt.Fprintf(out, "last flush: epoch %d at %s (newest commit %s)\n", last.Epoch,
			last.FlushedAt.Format(time.RFC3339), last.MaxCommitTime.Format(time.RFC3339))
	}
	keys := make([]string, 0, len(m.Tables))
	for k := range m.Tables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		// Initialized before the application created its tables.
		fmt.Fprintln(out, "tables:    none yet; 'pg-cdc start' captures each table created in the captured schemas, its rows from the first")
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	if len(keys) > 0 {
		fmt.Fprintln(tw, "TABLE\tSNAPSHOT\tBASE ROWS\tTOMBSTONES\tCHANGE ROWS\tDELTAS\tBYTES\tLAST CHANGE EPOCH\tAWAITING\tMERGED\tCOMPACTED")
	}
	var piled []string
	for _, k := range keys {
		t := m.Tables[k]
		var baseRows, tombstones, changeRows, bytes int64
		var lastEpoch uint64
		compacted := "-"
		if t.Base != nil {
			baseRows, tombstones = t.Base.RowCount, t.Base.Tombstones
			for _, f := range t.Base.Files {
				bytes += f.Bytes
			}
			if t.Base.CompactedAt != nil {
				compacted = fmt.Sprintf("epoch %d, %s ago", t.Base.Epoch, now.Sub(*t.Base.CompactedAt).Round(time.Second))
			}
		}
		files, awaiting := t.DeltaFiles()
		merged := t.LastMerged()
		for _, d := range t.Deltas {
			changeRows += d.Rows
			lastEpoch = max(lastEpoch, d.Epoch)
		}
		bytes += awaiting
		if files > DeltaFilesBound {
			piled = append(piled, fmt.Sprintf("%s (%d)", k, files))
		}
		lastMerge := "-"
		if !merged.IsZero() {
			lastMerge = now.Sub(merged).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n", k, SnapshotColumn(t.Snapshot), baseRows, tombstones, changeRows, len(t.Deltas),
			HumanBytes(bytes), lastEpoch, HumanBytes(awaiting), lastMerge, compacted)
	}
	tw.Flush()
	if len(piled) > 0 {
		fmt.Fprintf(out, "WARNING:   more than %d delta files in %s: every read merges them all; compaction is off (compaction.interval 0s) or failing, see the log or run 'pg-cdc compact'\n",
			DeltaFilesBound, strings.Join(piled, ", "))
	}
	if unfinished := Unfinished(m); len(unfinished) > 0 {
		fmt.Fprintf(out, "snapshot:  %d of %d tables are not complete (%s): until they are, their merged state is partial; 'pg-cdc start' completes them as backfills, and dump and verify refuse them\n",
			len(unfinished), len(m.Tables), strings.Join(unfinished, ", "))
	}
	for _, k := range keys {
		if r := m.Tables[k].Resnapshot; r != nil {
			// Readers keep the current generation until the switch.
			fmt.Fprintf(out, "resnapshot: %s: generation %s → %s, %s %s (requested %s); readers see %s until the switch\n",
				k, m.Tables[k].Generation, r.Generation, r.Snapshot.State, SnapshotProgress(r.Snapshot),
				r.RequestedAt.Format(time.RFC3339), m.Tables[k].Generation)
		}
	}
	printAdjusted(out, m, keys)
	if n := len(m.Garbage); n > 0 {
		oldest := slices.MinFunc(m.Garbage, func(a, b manifest.RetiredFile) int { return a.RetiredAt.Compare(b.RetiredAt) }).RetiredAt
		fmt.Fprintf(out, "garbage:   %d retired files, oldest retired %s ago; deleted by compaction once older than gc.grace_period\n",
			n, now.Sub(oldest).Round(time.Second))
	}
	if n := len(m.Folds); n > 0 {
		oldest := slices.MinFunc(m.Folds, func(a, b manifest.Fold) int { return a.Since.Compare(b.Since) }).Since
		fmt.Fprintf(out, "folded:    %d folds of files major compactions retired, the oldest begun %s ago; deleted once older than history.retention\n",
			n, now.Sub(oldest).Round(time.Second))
	}
}

// printAdjusted lists, per table and column, the values a documented type
// rule changed (docs/types.md), summed over the base and the deltas.
func printAdjusted(out io.Writer, m *manifest.Manifest, keys []string) {
	for _, k := range keys {
		t := m.Tables[k]
		sum := t.AdjustedTotals()
		cols := make([]string, 0, len(sum))
		for c := range sum {
			cols = append(cols, c)
		}
		sort.Strings(cols)
		for _, c := range cols {
			fmt.Fprintf(out, "adjusted:  %s column %q: %d values written by a type rule (docs/types.md)\n", k, c, sum[c])
		}
		lost := map[string]int64{}
		if t.Base != nil {
			for c, n := range t.Base.UnrecoveredTOAST {
				lost[c] += n
			}
		}
		for _, d := range t.Deltas {
			for c, n := range d.UnrecoveredTOAST {
				lost[c] += n
			}
		}
		for _, c := range sortedKeys(lost) {
			fmt.Fprintf(out, "unchanged: %s column %q: %d rows left a TOASTed value unchanged after a key change and could not recover it (docs/decisions.md)\n", k, c, lost[c])
		}
	}
}

func sortedKeys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// HumanBytes words a byte count: "512 B", "1.5 MiB".
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
