package snapshot

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Recorder commits a running initial snapshot to the manifest that init
// wrote before the first COPY, with every table pending (design.md §5,
// "Interrupted initial snapshot"): each table's base the moment its files
// are uploaded (TableDone, as Options.Done), and the rows copied so far
// (Watch), so that status can show progress and a crash keeps every table
// already copied.
//
// Run's workers finish tables concurrently, and a manifest.Committer is for
// one goroutine: the Recorder serializes its commits. Each commit edits only
// what it is about (one table's base and snapshot state, or progress
// counters of tables still pending) and the committer applies it again to a
// re-read manifest after a conflict, so another writer's changes are kept.
type Recorder struct {
	mu  sync.Mutex
	c   *manifest.Committer
	lsn cdc.LSN
	now func() time.Time
}

// NewRecorder records into c; lsn is the slot's consistent point, which
// every finished table's snapshot is taken at.
func NewRecorder(c *manifest.Committer, lsn cdc.LSN) *Recorder {
	return &Recorder{c: c, lsn: lsn, now: time.Now}
}

// TableDone commits t's base and marks its snapshot complete at the
// consistent point. A table the manifest does not list, or lists as
// complete already, is an error: init writes each table once.
func (r *Recorder) TableDone(ctx context.Context, t *cdc.Table, base *manifest.Base) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := t.ID.String()
	done := r.now().UTC()
	_, err := r.c.Commit(ctx, func(m *manifest.Manifest) error {
		mt := m.Tables[key]
		switch {
		case mt == nil:
			return fmt.Errorf("table %s is not in the manifest", key)
		case mt.Snapshot.Complete():
			return fmt.Errorf("table %s: the manifest already holds a complete snapshot of it (another init on this storage path?)", key)
		}
		b := *base
		mt.Base = &b
		mt.Snapshot.State = manifest.SnapshotComplete
		mt.Snapshot.LSN = r.lsn
		mt.Snapshot.RowsCopied = base.RowCount
		mt.Snapshot.CompletedAt = &done
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit the snapshot of table %s: %w", key, err)
	}
	return nil
}

// Record commits the rows copied so far of the tables still pending. Counts
// only grow; nothing is written when none changed.
func (r *Recorder) Record(ctx context.Context, rows map[string]int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	grown := func(m *manifest.Manifest) bool {
		for key, n := range rows {
			if mt := m.Tables[key]; mt != nil && !mt.Snapshot.Complete() && n > mt.Snapshot.RowsCopied {
				return true
			}
		}
		return false
	}
	if !grown(r.c.Current()) {
		return nil
	}
	_, err := r.c.Commit(ctx, func(m *manifest.Manifest) error {
		for key, n := range rows {
			if mt := m.Tables[key]; mt != nil && !mt.Snapshot.Complete() {
				mt.Snapshot.RowsCopied = max(mt.Snapshot.RowsCopied, n)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit snapshot progress: %w", err)
	}
	return nil
}

// Watch records p every interval until ctx ends, then returns nil. A failed
// progress commit ends it with the error: the manifest is then failing for
// the tables' commits too.
func (r *Recorder) Watch(ctx context.Context, p *Progress, every time.Duration) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := r.Record(ctx, p.Rows()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}
