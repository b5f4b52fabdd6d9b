package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// logSizes tells entries from checkpoints by their keys and counts the
// other _pgcdc objects apart from the manifest.
func TestLogSizes(t *testing.T) {
	sink := t.TempDir()
	files := map[string]int{
		manifest.Key:                500,
		manifest.LogEntryKey(99):    10,
		manifest.LogEntryKey(100):   20,
		manifest.CheckpointKey(100): 300,
		manifest.LogEntryKey(1001):  30,
		manifest.OldestKey:          7,
	}
	for key, n := range files {
		path := filepath.Join(sink, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entries, checkpoints, other, err := logSizes(sink)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || entries[99] != 10 || entries[100] != 20 || entries[1001] != 30 {
		t.Errorf("entries = %v", entries)
	}
	if len(checkpoints) != 1 || checkpoints[100] != 300 {
		t.Errorf("checkpoints = %v", checkpoints)
	}
	if other != 7 {
		t.Errorf("other = %d, want 7 (oldest.json; the manifest is apart)", other)
	}
}

func TestRatiosPairRepetitions(t *testing.T) {
	s := ratios([]float64{2, 4, 9}, []float64{1, 2, 0})
	if s.N != 2 || s.Median != 2 {
		t.Errorf("ratios = %+v, want two ratios of 2 (a zero denominator skipped)", s)
	}
}
