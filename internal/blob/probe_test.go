package blob_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
)

const probeKey = "_pgcdc/probe"

// ignoresAll accepts every conditional put: a store that drops
// If-None-Match and If-Match on the floor.
type ignoresAll struct{ *memory.Store }

func (s ignoresAll) PutIf(ctx context.Context, key string, data []byte, _ blob.Version) (blob.Version, error) {
	if err := s.Put(ctx, key, bytes.NewReader(data)); err != nil {
		return "", err
	}
	_, v, err := s.ReadVersion(ctx, key)
	return v, err
}

// ignoresMatch honours create-only puts but not versions.
type ignoresMatch struct{ *memory.Store }

func (s ignoresMatch) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (blob.Version, error) {
	if expected != "" {
		return ignoresAll(s).PutIf(ctx, key, data, expected)
	}
	return s.Store.PutIf(ctx, key, data, expected)
}

// writesAnyway reports the failed precondition but writes all the same.
type writesAnyway struct{ *memory.Store }

func (s writesAnyway) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (blob.Version, error) {
	v, err := s.Store.PutIf(ctx, key, data, expected)
	if errors.Is(err, blob.ErrPrecondition) {
		if _, err := (ignoresAll{s.Store}).PutIf(ctx, key, data, expected); err != nil {
			return "", err
		}
	}
	return v, err
}

// broken fails every conditional put with an error of its own.
type broken struct{ *memory.Store }

var errBroken = errors.New("connection reset")

func (broken) PutIf(context.Context, string, []byte, blob.Version) (blob.Version, error) {
	return "", errBroken
}

func newFS(t *testing.T) blob.ConditionalStore {
	s, err := fs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestProbeConditional(t *testing.T) {
	tests := []struct {
		name  string
		store func(t *testing.T) blob.ConditionalStore
		// wantIgnored is "" for a store that passes, else a word the
		// error must contain to name what the store ignored.
		wantIgnored string
		wantErr     error
	}{
		{"memory", func(*testing.T) blob.ConditionalStore { return memory.New() }, "", nil},
		{"fs", newFS, "", nil},
		{"ignores every condition", func(*testing.T) blob.ConditionalStore { return ignoresAll{memory.New()} }, "If-None-Match", blob.ErrConditionalIgnored},
		{"ignores If-Match", func(*testing.T) blob.ConditionalStore { return ignoresMatch{memory.New()} }, "stale version", blob.ErrConditionalIgnored},
		{"refuses but writes", func(*testing.T) blob.ConditionalStore { return writesAnyway{memory.New()} }, "changed", blob.ErrConditionalIgnored},
		{"broken", func(*testing.T) blob.ConditionalStore { return broken{memory.New()} }, "", errBroken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := tt.store(t)
			err := blob.ProbeConditional(ctx, s, probeKey)
			t.Logf("ProbeConditional: %v", err)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("ProbeConditional = %v, want nil", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("ProbeConditional = %v, want an error matching %v", err, tt.wantErr)
			case errors.Is(err, blob.ErrConditionalIgnored) != (tt.wantErr == blob.ErrConditionalIgnored):
				t.Fatalf("ProbeConditional = %v: ErrConditionalIgnored for a store that only failed", err)
			case err != nil && !strings.Contains(err.Error(), tt.wantIgnored):
				t.Errorf("ProbeConditional = %q, want it to name %q", err, tt.wantIgnored)
			}
			infos, err := s.List(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(infos) != 0 {
				t.Errorf("the probe left objects behind: %v", infos)
			}
		})
	}
}

func TestProbeConditionalLeftover(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	// A probe that crashed left its object.
	if _, err := s.PutIf(ctx, probeKey, []byte("old probe"), ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "other", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	if err := blob.ProbeConditional(ctx, s, probeKey); err != nil {
		t.Fatalf("ProbeConditional over a leftover probe object = %v", err)
	}
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Key != "other" {
		t.Errorf("after the probe the store holds %v, want only %q", infos, "other")
	}
}

func TestProbeConditionalInvalidKey(t *testing.T) {
	if err := blob.ProbeConditional(context.Background(), memory.New(), "../x"); err == nil {
		t.Fatal("ProbeConditional accepted an invalid key")
	}
}
