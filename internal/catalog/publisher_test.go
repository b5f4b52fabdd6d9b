package catalog

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/icebergschema"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// memCatalog is the port in memory; its first fail commits are refused.
type memCatalog struct {
	mu     sync.Mutex
	tables map[string]Published
	fail   int
}

func (c *memCatalog) Load(_ context.Context, id Ident) (Published, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.tables[id.String()]
	return p, ok, nil
}

func (c *memCatalog) Create(_ context.Context, id Ident, s icebergschema.Schema, _ map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tables[id.String()] = Published{Files: map[string]bool{}, SchemaID: s.SchemaID}
	return nil
}

func (c *memCatalog) Commit(_ context.Context, cm Commit) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return errors.New("503 from the catalog")
	}
	p := c.tables[cm.Ident.String()]
	for _, f := range cm.Add {
		p.Files[f.Path] = true
	}
	for _, k := range cm.Remove {
		delete(p.Files, k)
	}
	p.ManifestVersion = VersionOf(cm.Summary)
	c.tables[cm.Ident.String()] = p
	return nil
}

func (c *memCatalog) ReplaceState(_ context.Context, sc StateCommit) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := Published{Files: map[string]bool{}, ManifestVersion: VersionOf(sc.Summary), SchemaID: c.tables[sc.Ident.String()].SchemaID}
	for _, f := range sc.Files {
		p.Files[f.Path] = true
	}
	c.tables[sc.Ident.String()] = p
	return nil
}

func (c *memCatalog) Expire(context.Context, Ident, time.Duration, int) (int, error) { return 0, nil }
func (c *memCatalog) MetadataLocation(context.Context, Ident) (string, error)        { return "mem://", nil }

// seen records what the publisher reported.
type seen struct {
	mu       sync.Mutex
	failed   int
	commits  int
	behind   []uint64
	caughtUp chan struct{}
}

func (s *seen) Published(_ string, _ uint64, _ time.Duration, committed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if committed {
		s.commits++
	}
}
func (s *seen) Failed(string) { s.mu.Lock(); s.failed++; s.mu.Unlock() }
func (s *seen) Behind(v uint64, _ time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.behind = append(s.behind, v)
	if v == 0 && s.commits > 0 {
		select {
		case s.caughtUp <- struct{}{}:
		default:
		}
	}
}

// TestFollowRetries: a refused commit is counted, reported as lag, retried
// with a backoff, and the next attempt publishes the version; Follow
// returns nil when stopped, never the catalog's error.
func TestFollowRetries(t *testing.T) {
	cat := &memCatalog{tables: map[string]Published{}, fail: 1}
	obs := &seen{caughtUp: make(chan struct{}, 1)}
	p := New(Options{Catalog: cat, Retention: time.Hour, Observer: obs})
	feed := manifest.NewFeed()
	mt := table(false, []string{"b0"}, "d1")
	feed.Publish(&manifest.Manifest{Version: 4, Tables: map[string]*manifest.Table{"public.t": mt}})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Follow(ctx, feed) }()
	select {
	case <-obs.caughtUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the publisher never caught up after a refused commit")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Follow: %v", err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.failed != 1 || obs.commits != 1 || len(obs.behind) < 2 || obs.behind[0] != 4 || obs.behind[len(obs.behind)-1] != 0 {
		t.Errorf("failed %d, commits %d, behind %v; want 1 failure, 1 commit, behind 4 then 0", obs.failed, obs.commits, obs.behind)
	}
	got := cat.tables["pgcdc_changelog.public.t"]
	if got.ManifestVersion != 4 || !got.Files["b0"] || !got.Files["d1"] {
		t.Errorf("published %+v", got)
	}
	if st := p.Status(); st.Version != 4 || st.Err != "" {
		t.Errorf("status %+v", st)
	}
}

// fakeTimer is Options.After under the test's control: fire ends the wait
// Follow asked for.
type fakeTimer struct {
	asked chan time.Duration
	fire  chan time.Time
}

func (f *fakeTimer) After(d time.Duration) <-chan time.Time {
	f.asked <- d
	return f.fire
}

// awaitBehind waits until the publisher reports versions behind.
func (s *seen) awaitBehind(t *testing.T, versions uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		ok := slices.Contains(s.behind, versions)
		s.mu.Unlock()
		if ok {
			return
		}
	}
	t.Fatalf("the publisher never reported %d versions behind", versions)
}

// TestFollowCommitInterval: with a commit interval, the first version is
// published at once; the versions that land within the interval wait for
// its end (reported as lag meanwhile) and become one commit of the newest;
// a stop during the interval publishes the newest version at once instead
// of waiting the interval out.
func TestFollowCommitInterval(t *testing.T) {
	cat := &memCatalog{tables: map[string]Published{}}
	obs := &seen{caughtUp: make(chan struct{}, 1)}
	timer := &fakeTimer{asked: make(chan time.Duration, 1), fire: make(chan time.Time)}
	p := New(Options{Catalog: cat, Retention: time.Hour, Observer: obs, CommitInterval: time.Hour, After: timer.After})
	feed := manifest.NewFeed()
	version := func(v uint64, deltas ...string) *manifest.Manifest {
		return &manifest.Manifest{Version: v, Tables: map[string]*manifest.Table{"public.t": table(false, []string{"b0"}, deltas...)}}
	}
	feed.Publish(version(1))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Follow(ctx, feed) }()
	select {
	case <-obs.caughtUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the first version was not published at once")
	}
	feed.Publish(version(2, "d1"))
	if d := <-timer.asked; d <= 0 || d > time.Hour {
		t.Fatalf("Follow waits %v, want the rest of the hour", d)
	}
	feed.Publish(version(3, "d1", "d2"))
	feed.Publish(version(4, "d1", "d2", "d3"))
	obs.awaitBehind(t, 3) // versions 2..4 wait, and the lag says so
	if got := cat.tables["pgcdc_changelog.public.t"].ManifestVersion; got != 1 {
		t.Fatalf("published version %d within the interval, want 1", got)
	}
	timer.fire <- now
	select {
	case <-obs.caughtUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the interval ended and nothing was published")
	}
	obs.mu.Lock()
	commits := obs.commits
	obs.mu.Unlock()
	if got := cat.tables["pgcdc_changelog.public.t"]; commits != 2 || got.ManifestVersion != 4 || !got.Files["d3"] {
		t.Fatalf("%d commits, published %+v; want 2 commits, the second of version 4", commits, got)
	}

	// A version held by the interval when Follow stops is published then.
	obs.mu.Lock()
	obs.behind = nil
	obs.mu.Unlock()
	feed.Publish(version(5, "d1", "d2", "d3", "d4"))
	<-timer.asked
	obs.awaitBehind(t, 1)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Follow: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow waited the interval out after its context ended")
	}
	if got := cat.tables["pgcdc_changelog.public.t"]; got.ManifestVersion != 5 || !got.Files["d4"] {
		t.Errorf("on stop, published %+v; want version 5", got)
	}
	if st := p.Status(); st.Version != 5 || st.Err != "" {
		t.Errorf("status %+v", st)
	}
}
