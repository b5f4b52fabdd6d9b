//go:build nodb

package query

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestNoEngine(t *testing.T) {
	_, err := Open(context.Background(), Options{DataDirs: []string{t.TempDir()}, TempDir: t.TempDir()}, nil)
	if !errors.Is(err, ErrNoEngine) {
		t.Fatalf("Open: %v, want ErrNoEngine", err)
	}
	for _, want := range []string{"no query engine", "nodb", "go build", "cgo"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
}
