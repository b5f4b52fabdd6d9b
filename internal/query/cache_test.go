package query

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
)

// A second Reader on a held cache directory fails with ErrCacheInUse, or,
// given PrivateCacheIn, runs on a private cache that Close removes.
func TestPrivateCache(t *testing.T) {
	sink := memory.New()
	state := t.TempDir()
	shared := filepath.Join(state, "cache")
	first, err := NewReader(ReaderOptions{Sink: sink, CacheDir: shared, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if _, err := NewReader(ReaderOptions{Sink: sink, CacheDir: shared, CacheBytes: 1 << 20}); !errors.Is(err, ErrCacheInUse) {
		t.Fatalf("second reader on %s: %v, want ErrCacheInUse", shared, err)
	}
	second, err := NewReader(ReaderOptions{Sink: sink, CacheDir: shared, CacheBytes: 1 << 20, PrivateCacheIn: state})
	if err != nil {
		t.Fatalf("second reader with a private cache: %v", err)
	}
	private := second.private
	if private == "" || filepath.Dir(private) != state {
		t.Fatalf("private cache %q, want a directory in %s", private, state)
	}
	if _, err := os.Stat(private); err != nil {
		t.Fatal(err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(private); !os.IsNotExist(err) {
		t.Errorf("private cache %s after Close: %v, want it removed", private, err)
	}
}
