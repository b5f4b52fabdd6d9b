package capture

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// TestPrintManifestCompaction checks what status shows about compaction: a
// base's tombstones and age, the retired files waiting for collection, and
// unrecovered TOAST values counted in a base as well as in deltas, the
// bytes awaiting a major compaction and the newest minor merge, and a
// warning when a table's delta files pass the bound.
func TestPrintManifestCompaction(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	compacted := now.Add(-90 * time.Second)
	merged := now.Add(-20 * time.Second)
	m := &manifest.Manifest{
		Epoch: 42,
		Tables: map[string]*manifest.Table{
			"public.orders": {
				Schema: "public", Name: "orders",
				Snapshot: manifest.Snapshot{State: "complete"},
				Base: &manifest.Base{
					Epoch: 40, RowCount: 3000, Tombstones: 212, CompactedAt: &compacted,
					Files:            []manifest.File{{Path: "x", Bytes: 2048}},
					UnrecoveredTOAST: map[string]int64{"note": 2},
				},
				Deltas: []manifest.Delta{{Epoch: 41, Rows: 5, UnrecoveredTOAST: map[string]int64{"note": 1}},
					{Epoch: 49, FromEpoch: 42, Level: 1, Rows: 8, MergedAt: &merged, Files: []manifest.File{{Path: "m", Bytes: 3072}}}},
			},
			"public.items": {
				Schema: "public", Name: "items",
				Snapshot: manifest.Snapshot{State: "complete"},
				Base:     &manifest.Base{RowCount: 7},
			},
		},
		Garbage: []manifest.RetiredFile{
			{Path: "a", RetiredAt: now.Add(-10 * time.Minute)},
			{Path: "b", RetiredAt: now.Add(-30 * time.Minute)},
		},
		Folds: []manifest.Fold{{Prefix: "public/orders/g0001/", Through: 40, Since: now.Add(-2 * time.Hour), RetiredAt: compacted}},
	}
	var out bytes.Buffer
	printManifest(&out, m, now)
	got := out.String()
	for _, want := range []string{
		"TOMBSTONES",
		"COMPACTED",
		"epoch 40, 1m30s ago",
		`unchanged: public.orders column "note": 3 rows`,
		"garbage:   2 retired files, oldest retired 30m0s ago",
		"folded:    1 folds of files major compactions retired, the oldest begun 2h0m0s ago",
		"AWAITING",
		"3.0 KiB", // the bytes of orders' deltas
		"20s ago", // orders' newest merge
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "public.orders ") && !strings.Contains(l, " 212 ") {
			t.Errorf("the orders line does not show its 212 tombstones: %q", l)
		}
		if strings.HasPrefix(l, "public.items ") && !strings.HasSuffix(strings.TrimSpace(l), "-") {
			t.Errorf("a snapshot base is shown as compacted: %q", l)
		}
	}
	if strings.Contains(got, "WARNING") {
		t.Errorf("a warning with 2 delta files:\n%s", got)
	}
	items := m.Tables["public.items"]
	for i := range DeltaFilesBound + 1 {
		items.Deltas = append(items.Deltas, manifest.Delta{Epoch: uint64(i + 1), Files: []manifest.File{{Path: "d"}}})
	}
	out.Reset()
	printManifest(&out, m, now)
	if want := "more than 64 delta files in public.items (65)"; !strings.Contains(out.String(), want) {
		t.Errorf("status lacks %q:\n%s", want, out.String())
	}
}

func TestSlotForecast(t *testing.T) {
	for _, c := range []struct {
		safe int64
		rate float64
		want string
	}{
		{-1, 1 << 20, "never invalidated"},
		{1 << 30, 0, "1.0 GiB of WAL left"},
		{1 << 30, 1 << 20, "invalidated in 17m4s (1.0 GiB left)"},
	} {
		got := slotForecast(c.safe, c.rate, 2*time.Second)
		if !strings.Contains(got, c.want) {
			t.Errorf("slotForecast(%d, %v) = %q, want it to contain %q", c.safe, c.rate, got, c.want)
		}
	}
}

// TestPrintManifestUnfinishedSnapshot: a table whose snapshot is not
// complete shows its state and progress, and status says the merged state
// of those tables is partial; the interrupted init's report lists them.
func TestPrintManifestUnfinishedSnapshot(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m := &manifest.Manifest{
		EndLSN: 0x16B3748,
		Tables: map[string]*manifest.Table{
			"public.t1": {Schema: "public", Name: "t1", PrimaryKey: []string{"id"},
				Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete}, Base: &manifest.Base{RowCount: 1000}},
			"public.t3": {Schema: "public", Name: "t3", PrimaryKey: []string{"id"},
				Snapshot: manifest.Snapshot{State: manifest.SnapshotBackfilling, RowsCopied: 250, RowsEstimate: 1000}},
			"public.t4": {Schema: "public", Name: "t4",
				Snapshot: manifest.Snapshot{State: manifest.SnapshotPending}},
			"public.t5": {Schema: "public", Name: "t5", PrimaryKey: []string{"id"}, Generation: "g0001",
				Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete},
				Resnapshot: &manifest.Resnapshot{Generation: "g0002", RequestedAt: now,
					Snapshot: manifest.Snapshot{State: manifest.SnapshotBackfilling, RowsCopied: 10, RowsEstimate: 40}}},
		},
	}
	var out bytes.Buffer
	printManifest(&out, m, now)
	got := out.String()
	for _, want := range []string{
		"backfilling 250 / ~1000 (25%)",
		"resnapshot: public.t5: generation g0001 → g0002, backfilling 10 / ~40 (25%)",
		"snapshot:  2 of 4 tables are not complete (public.t3, public.t4)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "public.t1 ") && !strings.Contains(l, " complete ") {
			t.Errorf("the complete table: %q", l)
		}
	}

	out.Reset()
	delete(m.Tables, "public.t5") // a resnapshot is no part of an interrupted init
	(&Resume{Manifest: m, Lost: map[string]int64{"public.t3": 250}}).WriteText(&out, "slot_x")
	got = out.String()
	for _, want := range []string{
		"init was interrupted: 1 of 3 tables are complete at the consistent point 0/16B3748; 2 are not",
		"the interrupted copy had read 250 rows",
		"slot slot_x are kept",
		"run 'pg-cdc start'",
		"table public.t4 has no primary key, so start cannot backfill it",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the resume report lacks %q:\n%s", want, got)
		}
	}
}

// With the source down, status shows the sink's manifest and marks the
// source unreachable, instead of only the dial error.
func TestStatusSourceUnreachable(t *testing.T) {
	ctx := context.Background()
	sink := memory.New()
	m := &manifest.Manifest{Source: manifest.Source{SystemIdentifier: "1"}, EndLSN: 0x100, Tables: map[string]*manifest.Table{
		"public.orders": {Schema: "public", Name: "orders", Snapshot: manifest.Snapshot{State: "complete"}, Base: &manifest.Base{RowCount: 3}},
	}}
	if _, err := manifest.Create(ctx, sink, m, time.Now()); err != nil {
		t.Fatal(err)
	}
	c := &Capture{Sink: sink, SinkName: "mem", Slot: "s1", Log: slog.New(slog.DiscardHandler),
		Source: postgres.ConnSpec{URL: func(context.Context) (string, error) {
			return "postgresql://u@127.0.0.1:1/db?sslmode=disable&connect_timeout=5", nil
		}}}
	s, err := c.Status(ctx, 0)
	if err != nil || s.SourceErr == nil {
		t.Fatalf("status with the source down: %+v, %v", s, err)
	}
	var b bytes.Buffer
	s.WriteText(&b, time.Now())
	if !strings.Contains(b.String(), "source:    UNREACHABLE: ") || !strings.Contains(b.String(), "public.orders") {
		t.Errorf("status with the source down:\n%s", b.String())
	}
}

// status shows the stored manifest's size, which every flush rewrites.
func TestPrintManifestSize(t *testing.T) {
	m := &manifest.Manifest{FormatVersion: manifest.FormatVersion, Tables: map[string]*manifest.Table{}}
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	stored, err := manifest.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printManifest(&out, stored, time.Now())
	if want := HumanBytes(int64(len(data))); !strings.Contains(out.String(), "committed 0001-01-01T00:00:00Z, "+want+"\n") {
		t.Fatalf("status does not show the manifest's %s:\n%s", want, out.String())
	}
}
