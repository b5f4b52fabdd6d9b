package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// pendingManifest is what init writes before the first COPY: every table
// pending, no base.
func pendingManifest(tables []*cdc.Table, lsn cdc.LSN) *manifest.Manifest {
	m := &manifest.Manifest{EndLSN: lsn, Tables: map[string]*manifest.Table{}}
	for _, t := range tables {
		m.Tables[t.ID.String()] = &manifest.Table{Schema: t.ID.Schema, Name: t.ID.Name, Generation: "g0001",
			PrimaryKey: t.PrimaryKey, Snapshot: manifest.Snapshot{State: manifest.SnapshotPending}, Deltas: []manifest.Delta{}}
	}
	return m
}

// TestRecorderConcurrentTables runs a snapshot of many tables on parallel
// workers, each committing its table through the Recorder as it finishes,
// while a second writer (another committer on the same store, as a
// compaction or a status annotation would be) commits edits of its own
// that conflict with them. Every table must end complete with exactly the
// base Run returned, and none of the other writer's edits may be lost.
func TestRecorderConcurrentTables(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	const lsn = cdc.LSN(0x16B3748)
	var tables []*cdc.Table
	rows := map[string]int{}
	for i := range 12 {
		tb := table(fmt.Sprintf("t%02d", i))
		tables = append(tables, tb)
		rows[tb.ID.String()] = 500 * (i + 1)
	}
	c, err := manifest.Create(ctx, store, pendingManifest(tables, lsn), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var conflicts atomic.Int64 // the recorder's commits that lost a race and were merged
	c.SetObserver(manifest.Observer{ConflictResolved: func() { conflicts.Add(1) }})
	rec := NewRecorder(c, lsn)
	rival, err := manifest.Open(ctx, store, manifest.Breaker{})
	if err != nil {
		t.Fatal(err)
	}

	runCtx, stopRival := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(runCtx)
	var bases map[string]*manifest.Base
	g.Go(func() error {
		defer stopRival()
		var err error
		bases, err = Run(gctx, fakeSource{rows: rows}, store, tables, Options{
			LSN: lsn, Time: time.Now(), Workers: 6, Generation: "g0001", SpoolDir: t.TempDir(),
			Done: rec.TableDone,
		}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		return err
	})
	var rivalCommits int
	g.Go(func() error {
		for gctx.Err() == nil {
			rivalCommits++
			path := fmt.Sprintf("rival/%04d", rivalCommits)
			if _, err := rival.Commit(ctx, func(m *manifest.Manifest) error {
				m.Garbage = append(m.Garbage, manifest.RetiredFile{Path: path, RetiredAt: time.Now().UTC()})
				return nil
			}); err != nil {
				return fmt.Errorf("rival commit %d: %w", rivalCommits, err)
			}
			time.Sleep(time.Millisecond) // let the recorder win some races too
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	final, _, err := manifest.Load(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		key := tb.ID.String()
		mt := final.Tables[key]
		if mt.Snapshot.State != manifest.SnapshotComplete || mt.Snapshot.LSN != lsn || mt.Snapshot.CompletedAt == nil {
			t.Errorf("%s: snapshot %+v, want complete at %s", key, mt.Snapshot, lsn)
		}
		if !reflect.DeepEqual(mt.Base, bases[key]) {
			t.Errorf("%s: manifest base %+v, Run returned %+v", key, mt.Base, bases[key])
		}
		if mt.Base == nil || mt.Base.RowCount != int64(rows[key]) || mt.Snapshot.RowsCopied != int64(rows[key]) {
			t.Errorf("%s: base %+v, rows copied %d, want %d rows", key, mt.Base, mt.Snapshot.RowsCopied, rows[key])
		}
	}
	if len(final.Garbage) != rivalCommits {
		t.Errorf("the other writer committed %d edits, the manifest keeps %d", rivalCommits, len(final.Garbage))
	}
	if conflicts.Load() == 0 {
		t.Error("no commit of the recorder met a conflict: the test proved nothing about merging")
	}
	t.Logf("%d recorder commits merged after a conflict, %d rival commits", conflicts.Load(), rivalCommits)
	if final.EndLSN != lsn || final.Epoch != 0 {
		t.Errorf("the snapshot commits moved the stream: epoch %d, end LSN %s", final.Epoch, final.EndLSN)
	}
}

// TestRecorderProgress: counts are recorded for pending tables only, never
// go down, and an unchanged count writes nothing.
func TestRecorderProgress(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	tables := []*cdc.Table{table("a"), table("b")}
	c, err := manifest.Create(ctx, store, pendingManifest(tables, 0x100), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(c, 0x100)
	if err := rec.TableDone(ctx, tables[0], &manifest.Base{RowCount: 7, Files: []manifest.File{{Path: "p", Rows: 7}}}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Record(ctx, map[string]int64{"public.a": 999, "public.b": 40}); err != nil {
		t.Fatal(err)
	}
	_, v1, _ := store.ReadVersion(ctx, manifest.Key)
	if err := rec.Record(ctx, map[string]int64{"public.b": 30}); err != nil {
		t.Fatal(err)
	}
	_, v2, _ := store.ReadVersion(ctx, manifest.Key)
	if v1 != v2 {
		t.Error("a count that did not grow was written")
	}
	m, _, err := manifest.Load(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := m.Tables["public.a"].Snapshot, m.Tables["public.b"].Snapshot; a.RowsCopied != 7 || b.RowsCopied != 40 || b.State != manifest.SnapshotPending {
		t.Errorf("a %+v, b %+v", a, b)
	}
	if err := rec.TableDone(ctx, tables[0], &manifest.Base{}); err == nil || !strings.Contains(err.Error(), "public.a") {
		t.Errorf("a second base for a complete table: %v", err)
	}
}
