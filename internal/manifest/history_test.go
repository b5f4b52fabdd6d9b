package manifest

import (
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func record(epoch uint64) EpochRecord {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	return EpochRecord{Epoch: epoch, EndLSN: cdc.LSN(0x1000 * epoch), MaxCommitTime: t0.Add(time.Duration(epoch) * time.Second), FlushedAt: t0.Add(time.Duration(epoch)*time.Second + time.Millisecond)}
}

func TestAppendHistory(t *testing.T) {
	t.Run("appends to an empty history", func(t *testing.T) {
		var m Manifest
		m.AppendHistory(record(1))
		if len(m.History) != 1 || m.History[0] != record(1) {
			t.Fatalf("History = %+v", m.History)
		}
	})
	t.Run("keeps up to HistoryLimit", func(t *testing.T) {
		var m Manifest
		for e := uint64(1); e <= HistoryLimit; e++ {
			m.AppendHistory(record(e))
		}
		if len(m.History) != HistoryLimit || m.History[0] != record(1) || m.History[HistoryLimit-1] != record(HistoryLimit) {
			t.Fatalf("History has %d records, first %+v", len(m.History), m.History[0])
		}
	})
	t.Run("drops the oldest past HistoryLimit", func(t *testing.T) {
		var m Manifest
		for e := uint64(1); e <= HistoryLimit+3; e++ {
			m.AppendHistory(record(e))
		}
		if len(m.History) != HistoryLimit {
			t.Fatalf("History has %d records, want %d", len(m.History), HistoryLimit)
		}
		for i, r := range m.History {
			if want := record(uint64(i) + 4); r != want {
				t.Fatalf("History[%d] = %+v, want %+v", i, r, want)
			}
		}
	})
	t.Run("a trimmed history does not alias the slice it replaces", func(t *testing.T) {
		full := make([]EpochRecord, 0, HistoryLimit+10)
		for e := uint64(1); e <= HistoryLimit; e++ {
			full = append(full, record(e))
		}
		m := Manifest{History: full}
		m.AppendHistory(record(HistoryLimit + 1))
		if &m.History[0] == &full[1] {
			t.Fatal("the trimmed history shares the old backing array")
		}
		// Writing through the old slice leaves the manifest's history alone.
		full[1] = record(999)
		if m.History[0] != record(2) {
			t.Fatalf("History[0] = %+v after a write to the old slice, want epoch 2", m.History[0])
		}
		if full[0] != record(1) {
			t.Fatalf("the old slice's records changed: %+v", full[0])
		}
	})
}
