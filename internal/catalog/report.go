package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Report is what pg-cdc catalog sync and status print: the manifest
// version compared and one line per Iceberg table. Drift selects status's
// columns (what a sync would still change, the metadata location) over
// sync's (what it added and removed).
type Report struct {
	ManifestVersion uint64        `json:"manifest_version"`
	Tables          []TableStatus `json:"tables"`
	Drift           bool          `json:"-"`
}

// Sync publishes m now (Publish) and reports what it did: pg-cdc catalog
// sync.
func (p *Publisher) Sync(ctx context.Context, m *manifest.Manifest) (Report, error) {
	st, err := p.Publish(ctx, m)
	return Report{ManifestVersion: m.Version, Tables: st.Tables}, err
}

// Drift is the report of pg-cdc catalog status (and of the catalog
// section of pg-cdc status): Inspect's tables against m.
func (p *Publisher) Drift(ctx context.Context, m *manifest.Manifest) (Report, error) {
	tables, err := p.Inspect(ctx, m)
	return Report{ManifestVersion: m.Version, Tables: tables, Drift: true}, err
}

// WriteJSON writes r for scripts.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// WriteText writes r as a table.
func (r Report) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	if r.Drift {
		fmt.Fprintln(tw, "TABLE\tICEBERG\tPUBLISHED\tFILES\tDRIFT\tMETADATA")
	} else {
		fmt.Fprintln(tw, "TABLE\tICEBERG\tPUBLISHED\tFILES\tADDED\tREMOVED")
	}
	for _, t := range r.Tables {
		switch {
		case t.Err != "":
			fmt.Fprintf(tw, "%s\t%s\terror: %s\n", t.Table, t.Iceberg, t.Err)
		case !r.Drift:
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", t.Table, t.Iceberg, t.Version, t.Files, t.Added, t.Removed)
		default:
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", t.Table, t.Iceberg, t.Version, t.Files, t.Drift.text(), t.Metadata)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nmanifest version %d\n", r.ManifestVersion)
}

// text is the drift column of status.
func (d *Drift) text() string {
	switch {
	case d == nil:
		return "in sync"
	case d.Missing:
		return "not created yet"
	case !d.InSync():
		s := fmt.Sprintf("+%d -%d files", d.Add, d.Remove)
		if d.Schema {
			s += ", schema"
		}
		return s
	}
	return "in sync"
}
