package iceberg_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// A table published at every version keeps a bounded number of metadata
// files (the current one and the 20 its log names), and its snapshots
// expire by age and count, with every data file left in place.
func TestMetadataBounded(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	cat, ad := openCatalog(t, s)
	clock := time.Now()
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, SnapshotMaxAge: time.Millisecond, SnapshotMinKeep: 5,
		Now: func() time.Time { return clock }, Positions: positions(s)})
	id := catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")
	const versions = 40
	for i := range versions {
		clock = clock.Add(time.Second)
		m := s.delta([]row{{cdc.OpInsert, 0x200 + i, 100 + i, "x", 0}})
		if _, err := p.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := filepath.Glob(filepath.Join(s.dir, "_pgcdc", "iceberg", "pgcdc_changelog", "public", "t", "metadata", "*.metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(meta) == 0 || len(meta) > 21 {
		t.Errorf("%d metadata files after %d versions, want at most 21", len(meta), versions)
	}
	snaps := snapshots(t, cat, id)
	if len(snaps) != 5 {
		t.Errorf("%d snapshots retained after %d versions a second apart with max age 1 ms and min keep 5, want 5", len(snaps), versions)
	}
	if got := len(scan(t, cat, id)); got != 3+versions {
		t.Errorf("the changelog reads %d rows, want %d: expiry must delete no data file", got, 3+versions)
	}
	// What the retained snapshots name, for pg-cdc's garbage collection:
	// every change file (the base and the 40 deltas), nothing else.
	m := s.mc.Current()
	named, err := p.Referenced(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	files := catalog.ChangeFiles(m.Tables["public.t"])
	if len(named) != len(files) || len(files) != 1+versions {
		t.Errorf("retained snapshots name %d files, want the %d change files", len(named), len(files))
	}
	for _, f := range files {
		if !named[f.Path] {
			t.Errorf("%s is not named", f.Path)
		}
	}
}
