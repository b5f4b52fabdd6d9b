package capture

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// WriteText says what init did: nothing (already initialized), what an
// interrupted init left, or the snapshot it took into sink.
func (r *InitResult) WriteText(out io.Writer, slot, sink string) {
	switch {
	case r.Already != nil:
		m := r.Already
		fmt.Fprintf(out, "already initialized: %d tables, epoch %d, end LSN %s (manifest %s in %s); nothing changed\n",
			len(m.Tables), m.Epoch, m.EndLSN, manifest.Key, sink)
		if len(r.Pending) > 0 {
			names := make([]string, len(r.Pending))
			for i, id := range r.Pending {
				names[i] = id.Quoted()
			}
			fmt.Fprintf(out, "not captured yet: %s; pg-cdc start adds each to the publication and backfills it while it streams (init does not)\n", strings.Join(names, ", "))
		}
	case r.Resumed != nil:
		r.Resumed.WriteText(out, slot)
	case r.Snapshot.Tables == 0:
		fmt.Fprintf(out, "initialized with no tables yet (none exists in the captured schemas) at LSN %s into %s; run 'pg-cdc start': "+
			"it captures each table created there, its rows from the first (every backfill.discover_interval_sec while it runs, and whenever it starts)\n",
			r.Snapshot.LSN, sink)
	default:
		fmt.Fprintf(out, "initialized: %d tables, %d rows snapshotted at LSN %s into %s; run 'pg-cdc start' to stream\n",
			r.Snapshot.Tables, r.Snapshot.Rows, r.Snapshot.LSN, sink)
	}
}

// WriteText says what a rebuild did and what comes next; grace is
// gc.grace_period, after which the old generation's files go.
func (r *RebuildResult) WriteText(out io.Writer, grace time.Duration) {
	fmt.Fprintf(out, "rebuilt: slot %q was %s; %d tables, %d rows in %d files copied at LSN %s into generation %s and validated (row counts, %d rows compared with the source); manifest epoch %d; %d files of the previous generations wait for gc (gc.grace_period %s); took %s\n",
		r.Slot, r.SlotWas, r.Tables, r.Rows, r.Files, r.LSN, r.Generation, r.Sampled, r.Epoch, r.Retired, grace, r.Took.Round(time.Millisecond))
	if len(r.Uncompared) > 0 {
		fmt.Fprintf(out, "not compared with the source (truncated or rewritten after the snapshot; the stream applies it): %s\n", strings.Join(r.Uncompared, ", "))
	}
	if id := r.NewUpstream; id != nil {
		fmt.Fprintf(out, "the manifest's upstream is now system %s timeline %d database %q\n", id.SystemIdentifier, id.Timeline, id.Database)
	}
	fmt.Fprintln(out, "run 'pg-cdc start' to stream from the new slot")
}

// WriteText says what an interrupted init finished and what is left.
func (r *Resume) WriteText(out io.Writer, slot string) {
	m, lost := r.Manifest, r.Lost
	unfinished := Unfinished(m)
	fmt.Fprintf(out, "init was interrupted: %d of %d tables are complete at the consistent point %s; %d are not:\n",
		len(m.Tables)-len(unfinished), len(m.Tables), m.EndLSN, len(unfinished))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tSNAPSHOT\tROWS\t")
	var keyless []string
	for _, key := range SortedTables(m) {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", key, t.Snapshot.State, SnapshotProgress(t.Snapshot), note)
	}
	tw.Flush()
	fmt.Fprintf(out, "the manifest and slot %s are kept: the slot holds every change since %s.\n", slot, m.EndLSN)
	fmt.Fprintln(out, "run 'pg-cdc start': it streams from that point and completes the unfinished tables as backfills ('pg-cdc status' shows their progress)")
	for _, key := range keyless {
		fmt.Fprintf(out, "table %s has no primary key, so start cannot backfill it: add a primary key to it, or run 'pg-cdc teardown --yes' and 'pg-cdc init' again\n", key)
	}
}

// Write writes the report as text (one line per check, its fix below)
// or, with format "json", as JSON.
func (rep PreflightReport) Write(out io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		return nil
	}
	mark := map[string]string{string(postgres.StatusOK): "✓", string(postgres.StatusWarn): "!", string(postgres.StatusFail): "✗"}
	for _, c := range rep.Checks {
		fmt.Fprintf(out, "%s %s\n", mark[c.Status], c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(out, "    fix: %s\n", c.Fix)
		}
	}
	provider := rep.Provider
	if provider == "" {
		provider = "unknown"
	}
	warnings := "warnings"
	if rep.Warnings == 1 {
		warnings = "warning"
	}
	_, err := fmt.Fprintf(out, "preflight: %d passed, %d %s, %d failed (fixes for provider %s)\n",
		len(rep.Checks)-rep.Failed-rep.Warnings, rep.Warnings, warnings, rep.Failed, provider)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// CompactReport is what a compaction pass did.
type CompactReport struct {
	Results []compact.Result
	GC      compact.CollectResult
}

// WriteText writes a line per table and one for the garbage collected.
func (r *CompactReport) WriteText(out io.Writer) {
	for _, res := range r.Results {
		if res.Skipped != "" {
			fmt.Fprintf(out, "%s: nothing to do (%s)\n", res.Table, res.Skipped)
			continue
		}
		fmt.Fprintf(out, "%s: base of epoch %d from %d deltas: %d rows (%d tombstones kept, %d purged), %d files, %s, %s\n",
			res.Table, res.Epoch, res.FoldedDeltas, res.Rows, res.Tombstones, res.Purged, res.Files, HumanBytes(res.Bytes), res.Duration.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "garbage: %d retired and %d orphaned files deleted, %d waiting (grace period, history retention or a branch)\n", r.GC.Retired, r.GC.Orphans, r.GC.Waiting)
}
