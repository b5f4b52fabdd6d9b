package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

// dirNames lists every entry of dir, the sink's own files included.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestCreateOnlyLeavesNoFile: a create-only PutIf, the history log's one
// write per manifest version, leaves nothing beside the object, and Delete
// leaves nothing where it was. A file per version would leak an inode a
// second at a flush a second.
func TestCreateOnlyLeavesNoFile(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.Put(ctx, "_pgcdc/history/keep", strings.NewReader("k")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.Root(), "_pgcdc", "history")
	for i := range 3 {
		key := fmt.Sprintf("_pgcdc/history/%020d.json", i)
		if _, err := s.PutIf(ctx, key, []byte("entry"), ""); err != nil {
			t.Fatal(err)
		}
		if got, want := dirNames(t, dir), []string{fmt.Sprintf("%020d.json", i), "keep"}; !slices.Equal(got, want) {
			t.Fatalf("after a create-only PutIf the directory holds %q, want %q", got, want)
		}
		// A losing create leaves nothing either.
		if _, err := s.PutIf(ctx, key, []byte("other"), ""); !errors.Is(err, blob.ErrPrecondition) {
			t.Fatalf("second create-only PutIf = %v, want blob.ErrPrecondition", err)
		}
		if err := s.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if got, want := dirNames(t, dir), []string{"keep"}; !slices.Equal(got, want) {
			t.Fatalf("after Delete the directory holds %q, want %q", got, want)
		}
	}
}

// TestCreateOnlyRace: create-only writers through two Store values on one
// root (which exclude each other as two processes do) race for each key;
// exactly one wins, the others fail with ErrPrecondition, the object holds
// the winner's bytes, and no scratch file is left.
func TestCreateOnlyRace(t *testing.T) {
	ctx := context.Background()
	a := newStore(t)
	b, err := New(a.Root())
	if err != nil {
		t.Fatal(err)
	}
	stores := []*Store{a, b}
	const writers, rounds = 16, 20
	for round := range rounds {
		key := fmt.Sprintf("_pgcdc/history/%020d.json", round)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			mu      sync.Mutex
			winners []int
			version blob.Version
		)
		payload := func(i int) []byte { return []byte(fmt.Sprintf(`{"round":%d,"writer":%d}`, round, i)) }
		for i := range writers {
			wg.Go(func() {
				<-start
				v, err := stores[i%2].PutIf(ctx, key, payload(i), "")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, i)
					version = v
				case !errors.Is(err, blob.ErrPrecondition):
					t.Errorf("round %d: a losing create failed with %v, want blob.ErrPrecondition", round, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d create-only writers won (%v), want exactly 1", round, len(winners), winners)
		}
		data, v, err := a.ReadVersion(ctx, key)
		if err != nil || v != version || string(data) != string(payload(winners[0])) {
			t.Fatalf("round %d: object is %q version %q (%v), want the winner's %q version %q", round, data, v, err, payload(winners[0]), version)
		}
	}
	dir := filepath.Join(a.Root(), "_pgcdc", "history")
	if got := dirNames(t, dir); len(got) != rounds || slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, ".") }) {
		t.Fatalf("the directory holds %q, want the %d objects only", got, rounds)
	}
}
