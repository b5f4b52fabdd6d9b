package manifest

import (
	"encoding/json"
	"testing"

	"pgregory.net/rapid"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
)

// TestHistoryMatchesEveryVersion drives random sequences of realistic
// mutations through two real committers on one store (a streamer: flushes
// of random tables, schema versions, idle advances, added tables,
// resnapshot requests, an enum label changed in place; compaction: folds
// of some or all of a table's deltas into a base that retire files, and
// garbage collections), which conflict as they interleave, and with the
// history growing past 100 records: History.At returns every committed
// version exactly (same encoding), and each entry's bytes are bounded by
// what its mutation changed, not by the manifest's size.
func TestHistoryMatchesEveryVersion(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		prefill := rapid.SampledFrom([]int{0, 0, 95}).Draw(rt, "history records") // 95: the history passes 100 records after a few flushes
		s, streamer := newSimHistory(rt, memory.New(), prefill)
		compactor := s.open()
		budget := map[uint64]int{} // version → most bytes its entry may take
		largest := 0
		tables := append([]string(nil), simTables...)
		steps, longEvery := rapid.IntRange(1, 30).Draw(rt, "steps"), 24
		if raceEnabled {
			steps, longEvery = min(steps, 8), 99
		}
		if rapid.IntRange(0, longEvery).Draw(rt, "long") == 7 { // not 0 or the maximum, which rapid favours
			steps = rapid.IntRange(100, 115).Draw(rt, "long steps") // past version 100 and its checkpoint
		}
		for range steps {
			var m *Manifest
			switch rapid.IntRange(0, 19).Draw(rt, "action") {
			case 0, 1:
				key := rapid.SampledFrom(tables).Draw(rt, "table")
				n := rapid.IntRange(0, 4).Draw(rt, "fold")
				before := compactor.Current()
				m = s.commit(compactor, "compact", compactTable(key, n, s.clock))
				budget[m.Version] = 1500 + 300*max(0, len(m.Garbage)-len(before.Garbage))
			case 2:
				m = s.commit(compactor, "gc", collect(rapid.IntRange(0, 5).Draw(rt, "collected")))
				budget[m.Version] = 1000
			case 3:
				m = s.commit(streamer, "idle", idle)
				budget[m.Version] = 1000
			case 4:
				key := rapid.SampledFrom([]string{"public.late", "Sales.\"Orders\"", "public.t-1"}).Draw(rt, "new table")
				m = s.commit(streamer, "add table", addTable(key))
				tables = append(tables, key)
				budget[m.Version] = 3000
			case 5:
				m = s.commit(streamer, "resnapshot", resnapshot(rapid.SampledFrom(tables).Draw(rt, "table"), s.clock))
				budget[m.Version] = 1200
			case 6:
				key := rapid.SampledFrom(tables).Draw(rt, "table")
				m = s.commit(streamer, "enum", enumLabel(key))
				budget[m.Version] = 1000 + compactSize(rt, m.Tables[key].Schemas)
			default:
				touched := rapid.SliceOfNDistinct(rapid.SampledFrom(tables), 1, 3, rapid.ID[string]).Draw(rt, "flushed")
				schema := rapid.IntRange(0, 9).Draw(rt, "schema") == 0
				m = s.commit(streamer, "flush", flush(touched, int64(rapid.IntRange(1, 500).Draw(rt, "rows")), schema, s.clock))
				budget[m.Version] = 1000 + 700*len(touched)
				if schema {
					budget[m.Version] += compactSize(rt, m.Tables[touched[0]].CurrentSchema())
				}
			}
			largest = max(largest, len(s.committed[m.Version]))
		}
		s.checkAll()
		for v, max := range budget {
			if n := s.entrySize(v); n > max {
				rt.Errorf("version %d (%s): entry of %d bytes, over its budget of %d (largest manifest %d bytes)", v, s.kind[v], n, max, largest)
			}
		}
	})
}

func compactSize(rt *rapid.T, v any) int {
	data, err := json.Marshal(v)
	if err != nil {
		rt.Fatal(err)
	}
	return len(data)
}
