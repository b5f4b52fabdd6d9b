package readpath

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/refs"
)

// The reports of the read commands (query --tables, diff, promote, refs)
// know how to write themselves, as the capture's reports do: the command
// picks the output and prints errors.

// Describe names a resolved point for the text outputs: what was asked and
// the version (with its bound) that answers it.
func (a At) Describe() string {
	name := a.Name
	if name == "" {
		name = "latest"
	}
	s := fmt.Sprintf("%s: version %d (epoch %d, end LSN %s)", name, a.Version(), a.Manifest.Epoch, a.Manifest.EndLSN)
	switch {
	case a.Bound.LSN != 0:
		s += fmt.Sprintf(", transactions up to LSN %s", a.Bound.LSN)
	case !a.Bound.Time.IsZero():
		s += ", transactions committed up to " + TimeText(a.Bound.Time)
	}
	return s
}

// Point is a resolved point in the JSON outputs.
type Point struct {
	Name    string `json:"name"`
	Version uint64 `json:"manifest_version"`
	Epoch   uint64 `json:"epoch"`
	EndLSN  string `json:"end_lsn"`
}

// Point is a's JSON form.
func (a At) Point() Point {
	return Point{Name: a.Name, Version: a.Version(), Epoch: a.Manifest.Epoch, EndLSN: a.Manifest.EndLSN.String()}
}

// Diff is what changed between two points (pg-cdc diff).
type Diff struct {
	From, To At
	Verdict  refs.Verdict
	Tables   []refs.TableChange
}

// WriteJSON writes d for scripts.
func (d Diff) WriteJSON(w io.Writer) error {
	return WriteJSON(w, struct {
		From    Point              `json:"from"`
		To      Point              `json:"to"`
		Verdict refs.Verdict       `json:"verdict"`
		Tables  []refs.TableChange `json:"tables"`
	}{d.From.Point(), d.To.Point(), d.Verdict, nonNil(d.Tables)})
}

// WriteText writes d as the points, a table of changes and the verdict.
func (d Diff) WriteText(w io.Writer) {
	fmt.Fprintf(w, "from %s\nto   %s\n\n", d.From.Describe(), d.To.Describe())
	WriteChanges(w, d.Tables)
	fmt.Fprintf(w, "\nverdict: %s\n", d.Verdict)
}

// WriteChanges is the per-table table of diff and promote.
func WriteChanges(w io.Writer, changes []refs.TableChange) {
	if len(changes) == 0 {
		fmt.Fprintln(w, "no table changed")
		return
	}
	tw := NewTabWriter(w)
	fmt.Fprintln(tw, "TABLE\tINSERTED\tDELETED\tCHANGED\tSCHEMA")
	for _, c := range changes {
		schema := "-"
		if len(c.Schema) > 0 {
			schema = strings.Join(c.Schema, "; ")
		}
		if len(c.Breaking) > 0 {
			schema += " (breaking: " + strings.Join(c.Breaking, "; ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", c.Table, c.Inserted, c.Deleted, c.Changed, schema)
	}
	tw.Flush()
}

// WriteText writes the branches, the tags and the history's window;
// mode is promotion.mode and retention history.retention, which the
// listing explains.
func (l *RefList) WriteText(w io.Writer, mode string, retention time.Duration) {
	tw := NewTabWriter(w)
	fmt.Fprintln(tw, "BRANCH\tVERSION\tEPOCH\tEND LSN\tNEWEST COMMIT\tMOVED\tBY")
	for _, name := range slices.Sorted(maps.Keys(l.Branches)) {
		b := l.Branches[name]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", name, b.ManifestVersion, b.Epoch, b.EndLSN, TimeText(b.MaxCommitTime), TimeText(b.UpdatedAt), b.By)
	}
	tw.Flush()
	if len(l.Branches) == 0 {
		fmt.Fprintln(w, "no branches yet: pg-cdc start writes them after its first flush")
	}
	fmt.Fprintf(w, "\npromotion.mode: %s\n", mode)
	if len(l.Tags) > 0 {
		fmt.Fprintln(w)
		tw = NewTabWriter(w)
		fmt.Fprintln(tw, "TAG\tEPOCH\tEND LSN\tNEWEST COMMIT")
		for _, t := range l.Tags {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", t.Name, t.Epoch, t.EndLSN, TimeText(t.MaxCommitTime))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nhistory: versions %d to %d (committed %s to %s; history.retention %s)\n",
		l.Oldest.Version, l.Newest.Version, TimeText(l.Oldest.CommittedAt), TimeText(l.Newest.CommittedAt), retention)
}

// WriteTables writes query --tables in format (table, csv or json).
func WriteTables(w io.Writer, ts []Table, format string) error {
	if format == FormatJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Tables []Table `json:"tables"`
		}{ts})
	}
	res := &Result{Columns: []Column{{Name: "table", Type: "VARCHAR"}, {Name: "rows", Type: "BIGINT"},
		{Name: "schema_version", Type: "INTEGER"}, {Name: "snapshot", Type: "VARCHAR"}, {Name: "fresh_as_of", Type: "TIMESTAMP WITH TIME ZONE"}}}
	aliased := slices.ContainsFunc(ts, func(t Table) bool { return t.View != "" })
	if aliased {
		// Tables whose names differ only in case are read by aliases.
		res.Columns = append(res.Columns, Column{Name: "query_as", Type: "VARCHAR"})
	}
	for _, t := range ts {
		var fresh any
		if !t.FreshAsOf.IsZero() {
			fresh = t.FreshAsOf
		}
		row := []any{t.Name, t.Rows, int32(t.SchemaVersion), t.Snapshot, fresh}
		if aliased {
			row = append(row, t.View)
		}
		res.Rows = append(res.Rows, row)
	}
	return res.Write(w, format)
}

// TimeText formats a time for the text reports: RFC 3339 in UTC, or "-"
// for none.
func TimeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// NewTabWriter aligns the text tables of the read commands.
func NewTabWriter(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 2, 4, 2, ' ', 0) }

// WriteJSON writes v indented, with no HTML escaping (SQL and names print
// as they are).
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
