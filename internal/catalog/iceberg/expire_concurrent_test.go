package iceberg_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	iceberg "github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	adapter "github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// hookCatalog runs its armed hook once, right after the next LoadTable
// returns: another process's commits landing between what an expiry
// loaded and what it commits.
type hookCatalog struct {
	icecat.Catalog
	mu   sync.Mutex
	hook func()
}

func (c *hookCatalog) arm(fn func()) { c.mu.Lock(); c.hook = fn; c.mu.Unlock() }

func (c *hookCatalog) take() func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn := c.hook
	c.hook = nil
	return fn
}

func (c *hookCatalog) LoadTable(ctx context.Context, id table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, id)
	if fn := c.take(); fn != nil && err == nil {
		fn()
	}
	return tbl, err
}

// sqlProcess opens the SQL catalog at path as a process of its own would
// (pg-cdc start, pg-cdc compact, pg-cdc catalog sync: each its own
// connection and its own adapter, caches and retry queue).
func sqlProcess(t *testing.T, path, warehouse string) icecat.Catalog {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cat, err := sqlcat.NewCatalog("pgcdc", db, sqlcat.SQLite, iceberg.Properties{"warehouse": warehouse})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// TestExpireAcrossProcesses: two processes publish the same tables to one
// SQL catalog, each expiring after its commits with its own adapter, while
// the other's commits (and expiries) land between what one expiry loaded
// and its commit, and between its commit and its deletes. After every
// step every snapshot the catalog's current metadata retains reads whole:
// its manifest list, every manifest it names, every data and delete file
// they name. And expiry did delete: the test is not vacuous.
func TestExpireAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	path := filepath.Join(t.TempDir(), "catalog.db")
	warehouse := "file://" + s.dir
	catA := &hookCatalog{Catalog: sqlProcess(t, path, warehouse)}
	catB := sqlProcess(t, path, warehouse)
	adA, adB := adapter.New(catA, warehouse), adapter.New(catB, warehouse)
	opts := func(ad catalog.Catalog) catalog.Options {
		return catalog.Options{Catalog: ad, Retention: time.Hour, SnapshotMaxAge: time.Millisecond, SnapshotMinKeep: 2, Positions: positions(s)}
	}
	pA, pB := catalog.New(opts(adA)), catalog.New(opts(adB))
	// A publishing without expiring, for its expiries to have a backlog.
	keep := opts(adA)
	keep.SnapshotMaxAge = time.Hour
	pAKeep := catalog.New(keep)
	ids := []catalog.Ident{
		catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t"),
		catalog.StateIdent(catalog.DefaultPrefix, "public", "t"),
	}

	// version commits the next manifest version: a delta, every third a
	// compaction (the state table replaced, its position deletes too).
	n := 0
	version := func() *manifest.Manifest {
		n++
		lsn := 0x200 + n
		if n%3 == 0 {
			return s.compact([]row{{cdc.OpInsert, lsn, 1, "a", 0}, {cdc.OpDelete, lsn, 2, "", 0}, {cdc.OpInsert, lsn, 10 + n, "x", 0}}, 1)
		}
		return s.delta([]row{{cdc.OpInsert, lsn, 10 + n, "x", 0}})
	}
	publish := func(who string, p *catalog.Publisher, versions int) {
		t.Helper()
		for range versions {
			time.Sleep(3 * time.Millisecond) // the older snapshots past the max age
			if _, err := p.Publish(ctx, version()); err != nil {
				t.Fatalf("%s: %v", who, err)
			}
		}
	}
	lists := map[string]bool{} // every manifest list a check saw
	check := func(when string) {
		t.Helper()
		for _, id := range ids {
			tbl, err := catB.LoadTable(ctx, append(table.Identifier{}, append(id.Namespace, id.Name)...))
			if err != nil {
				t.Fatalf("%s: %s: %v", when, id, err)
			}
			fio, err := tbl.FS(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, snap := range tbl.Metadata().Snapshots() {
				lists[localPath(t, snap.ManifestList)] = true
				mfs, err := snap.Manifests(fio)
				if err != nil {
					t.Errorf("%s: %s retains snapshot %d, whose manifest list does not read: %v", when, id, snap.SnapshotID, err)
					continue
				}
				for _, mf := range mfs {
					es, err := mf.FetchEntries(fio, true)
					if err != nil {
						t.Errorf("%s: %s retains snapshot %d, whose manifest %s does not read: %v", when, id, snap.SnapshotID, filepath.Base(mf.FilePath()), err)
						continue
					}
					for _, e := range es {
						if _, err := os.Stat(localPath(t, e.DataFile().FilePath())); err != nil {
							t.Errorf("%s: %s retains snapshot %d, which names a missing file: %v", when, id, snap.SnapshotID, err)
						}
					}
				}
			}
		}
	}
	// expire expires both tables with ad, and returns how many files it
	// deleted and the errors, by table.
	expire := func(ad *adapter.Adapter) (int, []error) {
		total := 0
		var errs []error
		for _, id := range ids {
			n, err := ad.Expire(ctx, id, time.Millisecond, 2)
			total += n
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", id, err))
			}
		}
		return total, errs
	}

	// A (the daemon) publishes; B opens, reads the tables and expires
	// (its caches filled).
	publish("A", pA, 6)
	check("A published")
	publish("B", pB, 1)
	if _, errs := expire(adB); errs != nil {
		t.Fatalf("B: %v", errs)
	}
	check("B expired")
	for round := range 3 {
		// B publishes (and expires) between A's expiry's load and its
		// commit: A's view is stale when it would commit. The SQL
		// catalog refuses such an expiry (its base snapshot moved) or
		// iceberg-go replays it on the new metadata: either way what
		// is retained stays whole.
		publish("A", pAKeep, 3)
		catA.arm(func() { publish("B", pB, 2) })
		time.Sleep(3 * time.Millisecond)
		_, errs := expire(adA)
		t.Logf("round %d: A's stale expiry: %v", round, errs)
		check("B committed between A's load and A's expiry")

		// B publishes (and expires, deleting the manifest lists of
		// snapshots A's expiry retained) between A's expiry's commit
		// and its deletes (the adapter reads its clock in between): A
		// deletes what its expiry removed, at once.
		publish("A", pAKeep, 3)
		var once sync.Once
		adapter.SetNow(adA, func() time.Time {
			once.Do(func() { publish("B", pB, 2) })
			return time.Now()
		})
		time.Sleep(3 * time.Millisecond)
		n, errs := expire(adA)
		adapter.SetNow(adA, time.Now)
		if errs != nil || n == 0 {
			t.Errorf("round %d: A's expiry, B committing and expiring before its deletes: %d files deleted, errors %v", round, n, errs)
		}
		check("B committed between A's expiry and its deletes")

		// Each publishing and expiring in turn, with its own caches.
		publish("B", pB, 2)
		publish("A", pA, 2)
		publish("B", pB, 1)
		check("A and B in turn")
	}
	t.Logf("%d manifest versions published", n)
	gone := 0
	for p := range lists {
		if _, err := os.Stat(p); err != nil {
			gone++
		}
	}
	if gone == 0 {
		t.Errorf("none of the %d manifest lists seen was deleted: no expiry deleted anything", len(lists))
	}
	for _, id := range ids {
		if got := len(snapshots(t, catB, id)); got > 4 {
			t.Errorf("%s retains %d snapshots, want at most 4 (2 kept, a state replacement's pair each)", id, got)
		}
	}
}
