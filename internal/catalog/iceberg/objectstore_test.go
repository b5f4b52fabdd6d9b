package iceberg_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	iceberg "github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/pg-cdc/pg-cdc/internal/blob/gcs"
	"github.com/pg-cdc/pg-cdc/internal/blob/gcs/gcstest"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3/s3test"
	"github.com/pg-cdc/pg-cdc/internal/catalog"
	adapter "github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
	"github.com/pg-cdc/pg-cdc/internal/catalog/iceberg/resttest"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestS3Warehouse publishes the changelog and the state table of a sink on
// a real S3 server (versitygw) through the embedded SQL catalog, then reads
// both back with iceberg-go's scanner from the tables' s3:// metadata
// locations alone, and finds every metadata file, manifest list, manifest
// and position delete file in the bucket under the sink's prefix. The IO
// signs with the AWS SDK's default chain (the environment here), as the
// sink does in production.
func TestS3Warehouse(t *testing.T) {
	ctx := context.Background()
	srv := s3test.Start(t)
	bucket := srv.NewTestBucket(t)
	const prefix = "cdc/app"
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	store := storeIn(t, srv, bucket, prefix)
	wh, err := adapter.NewWarehouse(adapter.Sink{Type: adapter.SinkS3, Bucket: bucket, Prefix: prefix, Region: srv.Region,
		Endpoint: srv.Endpoint, ForcePathStyle: true, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if want := "s3://" + bucket + "/" + prefix; wh.Location != want {
		t.Fatalf("warehouse %s, want %s", wh.Location, want)
	}
	s := newSinkOn(t, store)
	t.Run("sql", func(t *testing.T) { publishToObjectStore(t, s, wh, openSQLOn(t, wh)) })
	// The REST catalog (its server over the same bucket) on a sink of its
	// own, the same versions.
	s = newSinkOn(t, storeIn(t, srv, bucket, prefix+"/rest"))
	wh.Location, wh.Store = wh.Location+"/rest", s.store
	t.Run("rest", func(t *testing.T) {
		rs := resttest.NewWithIO(t, wh.Location, wh.IO)
		ad, closeCat, err := adapter.OpenREST(ctx, rs.URL, wh, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeCat() })
		publishToObjectStore(t, s, wh, ad)
	})
}

// storeIn is an S3 store on srv's bucket under prefix, with the
// environment's credentials.
func storeIn(t *testing.T, srv *s3test.Server, bucket, prefix string) *s3.Store {
	t.Helper()
	store, err := s3.New(context.Background(), s3.Options{Bucket: bucket, Prefix: prefix, Region: srv.Region, Endpoint: srv.Endpoint, ForcePathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// openSQLOn opens the embedded SQL catalog over wh.
func openSQLOn(t *testing.T, wh adapter.Warehouse) *adapter.Adapter {
	t.Helper()
	ad, closeCat, err := adapter.OpenSQL(filepath.Join(t.TempDir(), "catalog.db"), wh, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeCat() })
	return ad
}

// TestGCSWarehouse is TestS3Warehouse on fake-gcs-server: gs://
// locations, iceberg-go's GCS IO at the emulator's endpoint.
func TestGCSWarehouse(t *testing.T) {
	ctx := context.Background()
	endpoint, bucket := gcstest.Start(t)
	const prefix = "cdc/app"
	store, err := gcs.New(ctx, gcs.Options{Bucket: bucket, Prefix: prefix, Endpoint: endpoint, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	wh, err := adapter.NewWarehouse(adapter.Sink{Type: adapter.SinkGCS, Bucket: bucket, Prefix: prefix, Endpoint: endpoint, NoAuth: true, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if want := "gs://" + bucket + "/" + prefix; wh.Location != want {
		t.Fatalf("warehouse %s, want %s", wh.Location, want)
	}
	publishToObjectStore(t, newSinkOn(t, store), wh, openSQLOn(t, wh))
}

// publishToObjectStore publishes s's versions through ad, a catalog over
// wh (a snapshot, a delta, a compaction with a tombstone), and checks what
// an engine reading wh.Location would see.
func publishToObjectStore(t *testing.T, s *sink, wh adapter.Warehouse, ad *adapter.Adapter) {
	ctx := context.Background()
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, Positions: adapter.TombstonesIn(s.store)})
	cl := catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")
	st := catalog.StateIdent(catalog.DefaultPrefix, "public", "t")

	if _, err := p.Publish(ctx, s.mc.Current()); err != nil {
		t.Fatal(err)
	}
	m := s.delta([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}})
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The compacted base keeps key 2's delete as a tombstone: a position
	// delete file masks it.
	m = s.compact([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x100, 3, "c", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}}, 1)
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}

	// A reader with the metadata location and the IO properties only: no
	// catalog, nothing of pg-cdc's host.
	read := func(id catalog.Ident) *table.Table {
		t.Helper()
		loc, err := ad.MetadataLocation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(loc, wh.Location+"/"+adapter.MetadataPrefix+"/") {
			t.Fatalf("%s: metadata location %s is not under %s/%s", id, loc, wh.Location, adapter.MetadataPrefix)
		}
		tbl, err := table.NewFromLocation(ctx, table.Identifier{id.Name}, loc, icebergio.LoadFSFunc(wh.IO, loc), nil)
		if err != nil {
			t.Fatalf("%s: read %s: %v", id, loc, err)
		}
		return tbl
	}
	clTbl, stTbl := read(cl), read(st)
	equal(t, "changelog", scanTable(t, clTbl, cl), "I:1:a", "I:2:b", "I:3:c", "U:1:a2", "D:2:-", "I:4:d")
	equal(t, "state (tombstone masked)", scanTable(t, stTbl, st), "I:3:c", "U:1:a2", "I:4:d")

	// Every file the tables name is an object of the bucket under the
	// sink's prefix: listed through the sink's own store.
	objects, err := s.store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, o := range objects {
		have[o.Key] = true
	}
	inBucket := func(what, loc string) {
		t.Helper()
		key, ok := strings.CutPrefix(loc, wh.Location+"/")
		if !ok || !have[key] {
			t.Errorf("%s %s: no object %q in the sink (%s)", what, loc, key, wh.Location)
		}
	}
	deletes := 0
	for _, tbl := range []*table.Table{clTbl, stTbl} {
		inBucket("metadata", tbl.MetadataLocation())
		for e := range tbl.Metadata().PreviousFiles() {
			inBucket("previous metadata", e.MetadataFile)
		}
		fio, err := tbl.FS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, snap := range tbl.Metadata().Snapshots() {
			inBucket("manifest list", snap.ManifestList)
			mfs, err := snap.Manifests(fio)
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				inBucket("manifest", mf.FilePath())
				es, err := mf.FetchEntries(fio, true)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range es {
					inBucket("file", e.DataFile().FilePath())
					if e.DataFile().ContentType() == iceberg.EntryContentPosDeletes {
						deletes++
						if !strings.Contains(e.DataFile().FilePath(), "/"+adapter.MetadataPrefix+"/") {
							t.Errorf("position delete file %s is not under %s", e.DataFile().FilePath(), adapter.MetadataPrefix)
						}
					}
				}
			}
		}
	}
	if deletes == 0 {
		t.Error("no position delete file: the tombstone was not masked by one")
	}

	// Expiry deletes through the same IO: every snapshot but the newest
	// goes, and what they alone named leaves the bucket.
	for _, id := range []catalog.Ident{cl, st} {
		if _, err := ad.Expire(ctx, id, time.Nanosecond, 1); err != nil {
			t.Fatalf("expire %s: %v", id, err)
		}
	}
	equal(t, "changelog after expiry", scanTable(t, read(cl), cl), "I:1:a", "I:2:b", "I:3:c", "U:1:a2", "D:2:-", "I:4:d")
	equal(t, "state after expiry", scanTable(t, read(st), st), "I:3:c", "U:1:a2", "I:4:d")
}
