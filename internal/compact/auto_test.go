package compact_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

func TestMajorDue(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	hourAgo, minuteAgo := now.Add(-time.Hour), now.Add(-time.Minute)
	table := func(baseBytes int64, compactedAt, snapshotAt *time.Time, deltas ...int64) *manifest.Table {
		mt := &manifest.Table{Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete, CompletedAt: snapshotAt}}
		if baseBytes >= 0 {
			mt.Base = &manifest.Base{Files: []manifest.File{{Path: "b", Bytes: baseBytes}}, CompactedAt: compactedAt}
		}
		for i, n := range deltas {
			mt.Deltas = append(mt.Deltas, manifest.Delta{Epoch: uint64(i + 1), Files: []manifest.File{{Path: "d", Bytes: n}}})
		}
		return mt
	}
	p := compact.Policy{MajorDeltaRatio: 0.5, MajorMinBytes: 100, MaxDeltaFiles: 3}
	many := []int64{1, 1, 1, 1}
	cases := []struct {
		name   string
		policy compact.Policy
		mt     *manifest.Table
		want   string // a substring of the reason; "" when none is due
	}{
		{"no deltas", p, table(10, nil, nil), ""},
		{"small deltas, big base", p, table(1000, nil, nil, 200, 200), ""},
		{"half the base", p, table(1000, nil, nil, 300, 200), "500 delta bytes"},
		{"a big share below the floor", p, table(10, nil, nil, 50), ""},
		{"no base: the share is infinite, the floor still holds", p, table(-1, nil, nil, 50, 60), "110 delta bytes"},
		{"too many files", p, table(1<<30, nil, nil, many...), "4 delta files, more than 3"},
		{"the clock, off", p, table(1<<30, &hourAgo, nil, 1), ""},
		{"the clock, a compacted base", withInterval(p, 30*time.Minute), table(1<<30, &hourAgo, nil, 1), "base older than 30m"},
		{"the clock, a young base", withInterval(p, 30*time.Minute), table(1<<30, &minuteAgo, nil, 1), ""},
		{"the clock, a snapshot base", withInterval(p, 30*time.Minute), table(1<<30, nil, &hourAgo, 1), "base older"},
		{"the clock, a fresh snapshot", withInterval(p, 30*time.Minute), table(1<<30, nil, &minuteAgo, 1), ""},
		{"the clock, no deltas", withInterval(p, 30*time.Minute), table(1<<30, &hourAgo, nil), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.policy.MajorDue(c.mt, now)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Fatalf("MajorDue = %q, want %q", got, c.want)
			}
		})
	}
}

func withInterval(p compact.Policy, d time.Duration) compact.Policy {
	p.MajorInterval = d
	return p
}

// Auto merges a table's deltas in tiers as flushes come, and writes a new
// base once the deltas pass the policy's count: the merged state is the
// same after every pass, and the table never holds more deltas than the
// tiers allow.
func TestAutoTiersThenMajor(t *testing.T) {
	store := memory.New()
	newManifest(t, store)
	mc := openCommitter(t, store)
	policy := compact.Policy{Tiers: compact.Tiers{Fanout: 3}, MaxDeltaFiles: 5, MajorMinBytes: 1 << 40}
	var minors, majors int
	for i := range 40 {
		writeDelta(t, store, []change{{op: cdc.OpUpdate, lsn: int64(10 * (i + 1)), seq: 1, id: int64(i % 4), a: int64(i), big: "x"}})
		res, err := compact.Auto(context.Background(), store, mc, policy, compact.Options{ScratchDir: t.TempDir(), Log: quiet})
		if err != nil {
			t.Fatal(err)
		}
		minors += len(res.Minor)
		majors += len(res.Major)
		tab := mc.Current().Tables[testTable.ID.String()]
		if len(tab.Deltas) > policy.MaxDeltaFiles {
			t.Fatalf("after flush %d: %d deltas, more than %d", i+1, len(tab.Deltas), policy.MaxDeltaFiles)
		}
	}
	if minors == 0 || majors == 0 {
		t.Fatalf("%d minor and %d major compactions in 40 flushes; want both", minors, majors)
	}
	want := map[int64]stateRow{0: {a: 36, big: "x"}, 1: {a: 37, big: "x"}, 2: {a: 38, big: "x"}, 3: {a: 39, big: "x"}}
	got := mergedState(t, store, t.TempDir())
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("merged state %v, want %v", got, want)
		}
	}
}
