package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// fakeFinder is the source of new-table discovery: the tables the
// configuration captures, and a publication.
type fakeFinder struct {
	source      []string // "schema.table" the configuration captures
	refuse      error    // NewTables fails with it
	crash       bool     // EnsurePublication fails: the process died before the ALTER
	published   []string
	publishCall int
}

func (f *fakeFinder) NewTables(_ context.Context, known func(cdc.TableID) bool) ([]*manifest.Table, error) {
	if f.refuse != nil {
		return nil, f.refuse
	}
	var out []*manifest.Table
	for _, key := range f.source {
		id, _ := cdc.ParseTableID(key)
		if !known(id) {
			now := time.Now().UTC()
			out = append(out, &manifest.Table{Schema: id.Schema, Name: id.Name, Generation: "g0001",
				Snapshot: manifest.Snapshot{State: manifest.SnapshotBackfilling, StartedAt: &now}, Deltas: []manifest.Delta{}})
		}
	}
	return out, nil
}

func (f *fakeFinder) EnsurePublication(_ context.Context, ids []cdc.TableID) error {
	f.publishCall++
	if f.crash {
		return errors.New("killed before ALTER PUBLICATION")
	}
	for _, id := range ids {
		if !slices.Contains(f.published, id.String()) {
			f.published = append(f.published, id.String())
		}
	}
	slices.Sort(f.published)
	return nil
}

func discoveryManifest(t *testing.T) *manifest.Committer {
	t.Helper()
	mc, err := manifest.Create(context.Background(), memory.New(), &manifest.Manifest{
		Source: manifest.Source{Slot: "s", Publication: "p"},
		Tables: map[string]*manifest.Table{"public.a": {Schema: "public", Name: "a", Generation: "g0001",
			Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete}, Deltas: []manifest.Delta{}}},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// TestAddNewTables: a table the configuration captures and the manifest
// lacks is recorded first (backfilling), then published; a crash between
// the two leaves it recorded and unpublished, and the next session
// publishes it without recording it twice; a table already captured is
// never published again by discovery.
func TestAddNewTables(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	mc := discoveryManifest(t)
	f := &fakeFinder{source: []string{"public.a", "public.b"}, crash: true, published: []string{"public.a"}}

	err := addNewTables(ctx, f, mc, log)
	if err == nil {
		t.Fatal("the crash before the ALTER went unnoticed")
	}
	mt := mc.Current().Tables["public.b"]
	if mt == nil || mt.Snapshot.State != manifest.SnapshotBackfilling {
		t.Fatalf("the manifest does not name the new table before it is published: %+v", mc.Current().Tables)
	}
	if slices.Contains(f.published, "public.b") {
		t.Fatal("published although the process died first")
	}
	version := mc.Current().Version

	// The next session: the table is known now, but its snapshot is not
	// complete, so it is published.
	f.crash = false
	if err := addNewTables(ctx, f, mc, log); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(f.published) != "[public.a public.b]" {
		t.Errorf("published %v after the restart, want both", f.published)
	}
	if mc.Current().Version != version {
		t.Errorf("the restart recorded the table again (manifest version %d → %d)", version, mc.Current().Version)
	}

	// Once its backfill completed, nothing is left to do: no commit, no
	// publication change.
	if _, err := mc.Commit(ctx, func(m *manifest.Manifest) error {
		m.Tables["public.b"].Snapshot.State = manifest.SnapshotComplete
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	calls, version := f.publishCall, mc.Current().Version
	if err := addNewTables(ctx, f, mc, log); err != nil {
		t.Fatal(err)
	}
	if f.publishCall != calls || mc.Current().Version != version {
		t.Errorf("with nothing new: %d publication changes, manifest version %d → %d", f.publishCall-calls, version, mc.Current().Version)
	}
}

// TestAddNewTablesRefusals: a table that cannot be captured (no primary
// key: a *cdc.Error) stops the session; a failed search is only logged,
// and the captured tables stream on.
func TestAddNewTablesRefusals(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	refused := &cdc.Error{Class: cdc.ErrSchemaChanged, Msg: "table public.k has no primary key"}
	err := addNewTables(ctx, &fakeFinder{refuse: refused}, discoveryManifest(t), log)
	if !errors.Is(err, cdc.ErrSchemaChanged) {
		t.Errorf("a keyless new table: %v, want exit 16", err)
	}
	f := &fakeFinder{refuse: errors.New("relation public.gone does not exist")}
	if err := addNewTables(ctx, f, discoveryManifest(t), log); err != nil || f.publishCall != 0 {
		t.Errorf("a failed search: %v, %d publication changes", err, f.publishCall)
	}
}
