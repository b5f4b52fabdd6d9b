package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Err is the verdict: nil when every table is equal,
// cdc.ErrDifferences (exit 19) naming the tables otherwise.
func (rep *Report) Err() error {
	var names []string
	for _, t := range rep.Tables {
		if !t.Equal {
			names = append(names, t.Table)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &cdc.Error{Class: cdc.ErrDifferences,
		Msg:  fmt.Sprintf("%d of %d tables differ: %s", len(names), len(rep.Tables), strings.Join(names, ", ")),
		Hint: "the report lists the differing key ranges; see docs/operations.md#verify for what to do"}
}

// Write writes rep as text, or as JSON when format is "json".
func (rep *Report) Write(out io.Writer, format string) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.WriteText(out)
	return nil
}

// WriteText writes the human-readable report.
func (rep *Report) WriteText(out io.Writer) {
	if len(rep.Tables) == 0 {
		fmt.Fprintln(out, "no tables to verify")
		return
	}
	first := rep.Tables[0]
	fmt.Fprintf(out, "as of source snapshot %s; watermark %s passed by manifest epoch %d (end LSN %s)\n",
		first.Snapshot, first.Watermark, first.Epoch, first.EndLSN)
	equal := 0
	for _, t := range rep.Tables {
		how := ""
		if t.Multiset {
			how = " (no primary key: compared as multisets of whole rows)"
		}
		if t.Newer > 0 {
			how += fmt.Sprintf("; %d sink versions newer than the snapshot ignored", t.Newer)
		}
		if t.Snapshot != first.Snapshot {
			how += fmt.Sprintf(" (as of snapshot %s, watermark %s)", t.Snapshot, t.Watermark)
		}
		if t.Equal {
			equal++
			fmt.Fprintf(out, "%s: equal: %d rows in the source, %d in the sink%s\n", t.Table, t.SourceRows, t.SinkRows, how)
			writeAdjusted(out, t)
			continue
		}
		fmt.Fprintf(out, "%s: DIFFERENT: %d rows in the source, %d in the sink: %d matching, %d missing in the sink, %d extra in the sink, %d with different values%s\n",
			t.Table, t.SourceRows, t.SinkRows, t.Matching, t.Missing, t.Extra, t.Changed, how)
		if len(t.Columns) > 0 {
			fmt.Fprintf(out, "  columns that differ: %s\n", countList(t.Columns))
		}
		if t.Unrecovered > 0 {
			fmt.Fprintf(out, "  %d of the differing values are unchanged TOAST values the sink never received (counted in 'pg-cdc status')\n", t.Unrecovered)
		}
		fmt.Fprintf(out, "  key ranges that differ (key %s):\n", strings.Join(t.Key, ", "))
		for _, r := range t.Ranges {
			span := r.First
			if r.Last != r.First {
				span += " .. " + r.Last
			}
			fmt.Fprintf(out, "    %s: %s\n", span, rangeCounts(r))
		}
		if t.MoreRanges > 0 {
			fmt.Fprintf(out, "    … and %d more ranges\n", t.MoreRanges)
		}
		if len(t.Examples) > 0 {
			fmt.Fprintf(out, "  values that differ (first %d):\n", len(t.Examples))
			for _, e := range t.Examples {
				note := ""
				if e.Unrecovered {
					note = " (unchanged TOAST, never received)"
				}
				fmt.Fprintf(out, "    %s %s: source %s, sink %s%s\n", e.Key, e.Column, e.Source, e.Sink, note)
			}
		}
		writeAdjusted(out, t)
	}
	fmt.Fprintf(out, "%d tables: %d equal, %d different\n", len(rep.Tables), equal, len(rep.Tables)-equal)
}

func writeAdjusted(out io.Writer, t TableResult) {
	if len(t.Adjusted) > 0 {
		fmt.Fprintf(out, "  source values a type rule changed, compared as the sink stores them (docs/types.md): %s\n", countList(t.Adjusted))
	}
}

func rangeCounts(r Range) string {
	noun := "keys"
	if r.Keys == 1 {
		noun = "key"
	}
	var parts []string
	for _, p := range []struct {
		n    int64
		what string
	}{{r.Missing, "missing in the sink"}, {r.Extra, "extra in the sink"}, {r.Changed, "with different values"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.what))
		}
	}
	return fmt.Sprintf("%d %s (%s)", r.Keys, noun, strings.Join(parts, ", "))
}

// countList prints "a (2), b (1)" in name order.
func countList(m map[string]int64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s (%d)", n, m[n])
	}
	return strings.Join(parts, ", ")
}
