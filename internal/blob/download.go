package blob

import (
	"context"
	"fmt"
	"io"
	"os"
)

// Download copies the object at key into a new file in dir, named by
// pattern as os.CreateTemp names it, and returns the file's path. Nothing
// is left in dir when it fails.
func Download(ctx context.Context, s Store, key, dir, pattern string) (string, error) {
	rc, err := s.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", key, err)
	}
	defer rc.Close()
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", key, err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("read %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("read %s: %w", key, err)
	}
	return f.Name(), nil
}
