package manifest

import (
	"testing"
	"time"
)

func TestNextGeneration(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"g0001", "g0002"}, {"g0009", "g0010"}, {"g0999", "g1000"}, {"g9999", "g10000"}, {"g10000", "g10001"},
	} {
		got, err := NextGeneration(c.in)
		if err != nil || got != c.want {
			t.Errorf("NextGeneration(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "g", "0001", "g0000", "g-001", "g+001", "gx", "G0001", "g0001a"} {
		if got, err := NextGeneration(bad); err == nil {
			t.Errorf("NextGeneration(%q) = %q, want an error", bad, got)
		}
	}
}

func TestGenerationAfter(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"g0002", "g0001", true}, {"g0001", "g0002", false}, {"g0001", "g0001", false},
		{"g0010", "g0009", true}, {"g10000", "g9999", true}, {"g9999", "g10000", false},
	} {
		if got := GenerationAfter(c.a, c.b); got != c.want {
			t.Errorf("GenerationAfter(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestSwitchGenerationRetiresTheWholeOldGeneration(t *testing.T) {
	m := sample()
	old := m.Tables["public.orders"]
	old.Deltas = []Delta{{Epoch: 1, Files: []File{{Path: "public/orders/g0001/delta/00000001/part-00000.parquet"}}}}
	// A file compaction already retired keeps its first retirement time.
	early := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.Garbage = []RetiredFile{{Path: "public/orders/g0001/delta/00000001/part-00000.parquet", RetiredAt: early}}

	next := *old
	next.Generation = "g0002"
	next.Base = &Base{Epoch: 2, Files: []File{{Path: "public/orders/g0002/base/00000000/part-00000.parquet"}}}
	next.Deltas = []Delta{}
	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	if err := m.SwitchGeneration(&next, at); err != nil {
		t.Fatal(err)
	}
	if got := m.Tables["public.orders"]; got.Generation != "g0002" || len(got.Files()) != 1 {
		t.Fatalf("table after the switch: %+v", got)
	}
	want := map[string]time.Time{
		"public/orders/g0001/delta/00000001/part-00000.parquet": early,
		"public/orders/g0001/base/00000000/part-00000.parquet":  at,
	}
	if len(m.Garbage) != len(want) {
		t.Fatalf("garbage = %+v, want %v", m.Garbage, want)
	}
	for _, g := range m.Garbage {
		if at, ok := want[g.Path]; !ok || !g.RetiredAt.Equal(at) {
			t.Errorf("garbage entry %+v, want %v", g, want)
		}
	}
	if err := m.SwitchGeneration(&next, at); err == nil {
		t.Error("switching a table to its current generation succeeded; it would retire its own files")
	}
}
