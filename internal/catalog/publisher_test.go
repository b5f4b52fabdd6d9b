package catalog

import (
	"context"
	"errors"
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

func (c *memCatalog) Expire(context.Context, Ident, time.Duration, int) error { return nil }
func (c *memCatalog) MetadataLocation(context.Context, Ident) (string, error) { return "mem://", nil }

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
