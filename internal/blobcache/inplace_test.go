package blobcache

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
)

// TestOpenFilesystemSinkInPlace: a filesystem sink is read where it lies;
// nothing is copied and no cache directory is made.
func TestOpenFilesystemSinkInPlace(t *testing.T) {
	store, err := fs.New(filepath.Join(t.TempDir(), "sink"))
	if err != nil {
		t.Fatal(err)
	}
	f := put(t, store, dataKey, "parquet bytes")
	put(t, store, "public/file", "x")
	cacheDir := filepath.Join(t.TempDir(), "cache")
	src, err := Open(store, Options{Dir: cacheDir, MaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, ok := src.(*InPlace); !ok || src.Dir() != store.Root() {
		t.Fatalf("Open(fs sink) = %T on %s, want *InPlace on %s", src, src.Dir(), store.Root())
	}
	paths, release, err := src.Acquire(testCtx(t), []File{f, f})
	if err != nil {
		t.Fatal(err)
	}
	release()
	want := filepath.Join(store.Root(), filepath.FromSlash(dataKey))
	if paths[0] != want || paths[1] != want {
		t.Errorf("paths %q, want the sink's own file %s", paths, want)
	}
	if p, err := src.Path(testCtx(t), f.Key, f.Size); err != nil || p != want {
		t.Errorf("Path = %q, %v", p, err)
	}
	if _, err := os.Stat(cacheDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cache directory was made for a filesystem sink: %v", err)
	}

	var se *SizeError
	if _, err := src.Path(testCtx(t), f.Key, 3); !errors.As(err, &se) || se.Actual != f.Size || se.Expected != 3 {
		t.Errorf("wrong size: %v, want a *SizeError", err)
	}
	for _, key := range []string{"public/missing.parquet", "public/file/under"} {
		if _, _, err := src.Acquire(testCtx(t), []File{{Key: key, Size: 1}}); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Acquire(%q): %v, want blob.ErrNotFound", key, err)
		}
	}
	for _, key := range []string{"../sink/" + dataKey, "/etc/passwd", "public"} {
		if _, err := src.Path(testCtx(t), key, 1); err == nil {
			t.Errorf("Path(%q) succeeded", key)
		}
	}
}

func TestOpenObjectStoreCaches(t *testing.T) {
	src, err := Open(memory.New(), Options{Dir: filepath.Join(t.TempDir(), "cache"), MaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, ok := src.(*Cache); !ok {
		t.Fatalf("Open(memory store) = %T, want *Cache", src)
	}
}
