package refs

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

func version(v uint64) *manifest.Manifest {
	return &manifest.Manifest{Version: v, Epoch: v * 10, EndLSN: cdc.LSN(0x1000 + v)}
}

// TestFollow: staging follows every version, main too in auto mode and
// only once (its start) in manual mode; a branch never moves back; nothing
// is written when nothing moves.
func TestFollow(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for _, mode := range []string{ModeAuto, ModeManual} {
		store := memory.New()
		if _, _, err := Load(ctx, store); !errors.Is(err, ErrNoRefs) {
			t.Fatalf("%s: no refs yet: %v", mode, err)
		}
		for _, v := range []uint64{3, 5, 4} {
			if _, err := Follow(ctx, store, version(v), mode, now); err != nil {
				t.Fatal(err)
			}
		}
		r, _, err := Load(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		wantMain := uint64(5)
		if mode == ModeManual {
			wantMain = 3
		}
		if r.Branches[Staging].ManifestVersion != 5 || r.Branches[Main].ManifestVersion != wantMain {
			t.Errorf("%s: staging %d, main %d; want 5 and %d", mode, r.Branches[Staging].ManifestVersion, r.Branches[Main].ManifestVersion, wantMain)
		}
		before := r.Version
		if _, err := Follow(ctx, store, version(5), mode, now); err != nil {
			t.Fatal(err)
		}
		if r, _, _ = Load(ctx, store); r.Version != before {
			t.Errorf("%s: a follow that moved nothing wrote the file (version %d → %d)", mode, before, r.Version)
		}
		pinned, err := Pinned(ctx, store)
		if err != nil || !slices.Equal(pinned, slices.Compact([]uint64{min(wantMain, 5), 5})) {
			t.Errorf("%s: pinned %v, %v", mode, pinned, err)
		}
	}
}

// TestFollowerRestores: a refs file deleted or damaged under a running
// follower is written again from what it last held, so a manual main keeps
// the position it was promoted to; without that memory a damaged file is
// left alone (the error says how to fix it) and a missing one starts over.
func TestFollowerRestores(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	store := memory.New()
	var restored []error
	f := &Follower{Store: store, Mode: ModeManual, Restored: func(cause error, _ *Refs) { restored = append(restored, cause) }}
	if _, err := f.Follow(ctx, version(3), now); err != nil {
		t.Fatal(err)
	}
	if _, err := Promote(ctx, store, Main, 3, version(7), now, "promote alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Follow(ctx, version(8), now); err != nil { // learns main at 7
		t.Fatal(err)
	}
	for _, damage := range []func() error{
		func() error { return store.Delete(ctx, Key) },
		func() error { return store.Put(ctx, Key, strings.NewReader(`{"format_version": 1, "branches": {`)) },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Follow(ctx, version(8), now); err != nil {
			t.Fatalf("follow after damage: %v", err)
		}
		r, _, err := Load(ctx, store)
		if err != nil {
			t.Fatalf("the follower did not write the refs again: %v", err)
		}
		if r.Branches[Main].ManifestVersion != 7 || r.Branches[Main].By != "promote alice" || r.Branches[Staging].ManifestVersion != 8 {
			t.Errorf("restored refs: main %+v, staging %+v; want main at 7 by promote alice, staging at 8", r.Branches[Main], r.Branches[Staging])
		}
	}
	if len(restored) != 2 || !errors.Is(restored[0], ErrNoRefs) || !errors.Is(restored[1], ErrUnreadable) {
		t.Errorf("Restored told %v, want a missing and an unreadable file", restored)
	}

	// A promotion made since the follower last read the file lives in its
	// record only: the repair takes it from there.
	if _, err := Promote(ctx, store, Main, 7, version(8), now, "promote bob"); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, Key); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Follow(ctx, version(9), now); err != nil {
		t.Fatal(err)
	}
	if r, _, err := Load(ctx, store); err != nil || r.Branches[Main].ManifestVersion != 8 || r.Branches[Main].By != "promote bob" {
		t.Errorf("after a promotion the follower had not seen: %+v, %v; want main at 8 by promote bob", r, err)
	}

	// A follower that remembers nothing (a daemon just started) takes the
	// promotion records too.
	if err := store.Put(ctx, Key, strings.NewReader("{")); err != nil {
		t.Fatal(err)
	}
	fresh := &Follower{Store: store, Mode: ModeManual}
	if _, err := fresh.Follow(ctx, version(10), now); err != nil {
		t.Fatalf("fresh follower with promotion records: %v", err)
	}
	if r, _, err := Load(ctx, store); err != nil || r.Branches[Main].ManifestVersion != 8 || r.Branches[Staging].ManifestVersion != 10 {
		t.Errorf("fresh follower's repair: %+v, %v; want main at 8, staging at 10", r, err)
	}

	// With neither memory nor records, a damaged file is left as it is,
	// with an error that says how to fix it.
	bare := memory.New()
	if err := bare.Put(ctx, Key, strings.NewReader("{")); err != nil {
		t.Fatal(err)
	}
	_, err := (&Follower{Store: bare, Mode: ModeManual}).Follow(ctx, version(9), now)
	if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("a damaged file nobody can restore: %v, want ErrUnreadable with the fix", err)
	}
	if data, _, _ := bare.ReadVersion(ctx, Key); string(data) != "{" {
		t.Errorf("the damaged file was overwritten by a follower that knew nothing: %q", data)
	}
	if _, err := Pinned(ctx, bare); !errors.Is(err, ErrUnreadable) {
		t.Errorf("Pinned on a damaged file: %v, want an error (GC must not guess the pins)", err)
	}
}

// TestUpdateConcurrent: writers racing on the refs file each land exactly
// once (compare-and-swap, retried on conflict).
func TestUpdateConcurrent(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := Update(ctx, store, func(r *Refs) (bool, error) {
				r.Branches[strings.Repeat("b", i+1)] = Branch{ManifestVersion: uint64(i)}
				return true, nil
			}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	r, _, err := Load(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Branches) != 8 || r.Version != 8 {
		t.Errorf("%d branches after 8 writers, file version %d", len(r.Branches), r.Version)
	}
}

func TestTags(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 0, 0, 123456000, time.UTC)
	name := Tag(at)
	if name != "raw@2026-12-01T08:00:00.123456Z" {
		t.Errorf("tag %q", name)
	}
	if got, ok := ParseTag(name); !ok || !got.Equal(at) {
		t.Errorf("ParseTag(%q) = %v, %v", name, got, ok)
	}
	for _, bad := range []string{"main", "raw@yesterday", "raw@"} {
		if _, ok := ParseTag(bad); ok {
			t.Errorf("%q read as a tag", bad)
		}
	}
}

func table(cols ...manifest.Column) *manifest.Table {
	return &manifest.Table{Schema: "public", Name: "t", PrimaryKey: []string{"id"}, Generation: "g0001", SchemaVersion: 1,
		Schemas: []manifest.SchemaVersion{{Version: 1, Columns: cols}}}
}

func col(name, pt string, id int) manifest.Column {
	return manifest.Column{Name: name, ParquetType: pt, PGType: strings.ToLower(pt), FieldID: id}
}

// TestJudge: the verdict of a promotion by what changed.
func TestJudge(t *testing.T) {
	id, a := col("id", "INT64", 1), col("a", "INT32", 2)
	base := &manifest.Manifest{Tables: map[string]*manifest.Table{"public.t": table(id, a)}}
	evolved := func(cols ...manifest.Column) *manifest.Manifest {
		mt := table(cols...)
		mt.SchemaVersion, mt.Schemas[0].Version = 2, 2
		return &manifest.Manifest{Tables: map[string]*manifest.Table{"public.t": mt}}
	}
	widened, renamed, retyped := a, a, a
	widened.ParquetType = "INT64"
	renamed.Name = "a2"
	retyped.ParquetType = "STRING"
	other := &manifest.Manifest{Tables: map[string]*manifest.Table{"public.t": table(id, a), "public.u": table(id)}}
	for _, c := range []struct {
		name string
		to   *manifest.Manifest
		data map[string]Counts
		want Verdict
	}{
		{"nothing", base, nil, NoChange},
		{"rows", base, map[string]Counts{"public.t": {Inserted: 3, Changed: 1}}, Safe},
		{"column added", evolved(id, a, col("b", "STRING", 3)), nil, SchemaChange},
		{"widened", evolved(id, widened), map[string]Counts{"public.t": {Changed: 2}}, SchemaChange},
		{"table added", other, nil, SchemaChange},
		{"column dropped", evolved(id), nil, Breaking},
		{"renamed", evolved(id, renamed), nil, Breaking},
		{"int to text", evolved(id, retyped), nil, Breaking},
	} {
		got, changes := Judge(base, c.to, c.data)
		if got != c.want {
			t.Errorf("%s: %s (%+v), want %s", c.name, got, changes, c.want)
		}
		if c.want != NoChange && len(changes) == 0 {
			t.Errorf("%s: no table listed", c.name)
		}
	}
	if v, _ := Judge(other, base, nil); v != Breaking {
		t.Errorf("a table removed: %s", v)
	}
}

// TestPromote: main moves to the version promoted (forward, and back to an
// older one) only while it is where the verdict was judged; a follower in
// manual mode leaves it there; staging and names that read as points are
// refused.
func TestPromote(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	store := memory.New()
	for _, v := range []uint64{3, 7} {
		if _, err := Follow(ctx, store, version(v), ModeManual, now); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Promote(ctx, store, Main, 3, version(7), now, "promote alice")
	if err != nil || r.Branches[Main].ManifestVersion != 7 || r.Branches[Main].By != "promote alice" {
		t.Fatalf("promote main 3 → 7: %+v, %v", r, err)
	}
	if _, err := Promote(ctx, store, Main, 3, version(5), now, "promote"); !errors.Is(err, ErrMoved) {
		t.Errorf("a promotion judged against version 3 after main moved to 7: %v, want ErrMoved", err)
	}
	if r, err = Promote(ctx, store, Main, 7, version(4), now, "promote"); err != nil || r.Branches[Main].ManifestVersion != 4 {
		t.Errorf("promote main back to 4: %v", err)
	}
	if _, err := Follow(ctx, store, version(9), ModeManual, now); err != nil {
		t.Fatal(err)
	}
	if r, _, _ = Load(ctx, store); r.Branches[Main].ManifestVersion != 4 || r.Branches[Staging].ManifestVersion != 9 {
		t.Errorf("after a manual-mode follow: main %d, staging %d; want 4 and 9", r.Branches[Main].ManifestVersion, r.Branches[Staging].ManifestVersion)
	}
	if r, err = Promote(ctx, store, "release-1", 0, version(9), now, "promote"); err != nil || r.Branches["release-1"].ManifestVersion != 9 {
		t.Errorf("a new branch: %v", err)
	}
	for _, to := range []string{Staging, "raw@2026-12-01T08:00:00Z", "", "12", "a b", "lsn:0/1"} {
		if _, err := Promote(ctx, store, to, 0, version(9), now, "promote"); err == nil {
			t.Errorf("promote to %q was accepted", to)
		}
	}
}
