package manifest

import (
	"errors"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
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

// TestWalk: a walk over a run of versions hands each one exactly as it was
// committed, across checkpoints and compactions, and fails with
// ErrNotReadable on a version the log cannot rebuild.
func TestWalk(t *testing.T) {
	fstore := &failingStore{sink: memory.New()}
	s, streamer := newSim(t, fstore)
	compactor := s.open()
	for i := 1; i <= 130; i++ {
		switch {
		case i == 60:
			// The entry of this version fails once, then is written
			// whole on the retry: readable. The walk's from here on
			// applies it like any other.
			fstore.failNext(1)
			s.commit(streamer, "flush", flush(simTables, 2, false, s.clock))
		case i%20 == 0:
			s.commit(compactor, "compact", compactTable(simTables[i/20%3], 0, s.clock))
		default:
			s.commit(streamer, "flush", flush(simTables, int64(i%5+1), false, s.clock))
		}
	}
	h := NewHistory(fstore)
	var seen []uint64
	err := h.Walk(s.ctx, 3, 130, func(m *Manifest) error {
		got, err := m.Encode()
		if err != nil {
			return err
		}
		if string(got) != string(s.committed[m.Version]) {
			t.Fatalf("walk: version %d (%s) differs from the committed one", m.Version, s.kind[m.Version])
		}
		seen = append(seen, m.Version)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 128 || seen[0] != 3 || seen[127] != 130 {
		t.Fatalf("walked %d versions (%v…%v), want 3 to 130", len(seen), seen[0], seen[len(seen)-1])
	}
	// Version 90's entry deleted behind the log's back: At cannot
	// rebuild it either (the checkpoint after it is version 100's), and
	// the walk must say so rather than skip it.
	if err := fstore.sink.Delete(s.ctx, LogEntryKey(90)); err != nil {
		t.Fatal(err)
	}
	err = h.Walk(s.ctx, 85, 95, func(*Manifest) error { return nil })
	if !isNotReadable(err) {
		t.Fatalf("walk across a lost entry: %v, want ErrNotReadable", err)
	}
	stop := errors.New("stop")
	if err := h.Walk(s.ctx, 101, 130, func(m *Manifest) error {
		if m.Version == 105 {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("walk stopped by its callback: %v", err)
	}
}
