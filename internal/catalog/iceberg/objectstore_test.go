package iceberg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	iceberg "github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/glue"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/pg-cdc/pg-cdc/internal/blob/gcs"
	"github.com/pg-cdc/pg-cdc/internal/blob/gcs/gcstest"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3/s3test"
	"github.com/pg-cdc/pg-cdc/internal/catalog"
	adapter "github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
	"github.com/pg-cdc/pg-cdc/internal/catalog/iceberg/gluetest"
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
	srv, bucket, wh := s3Warehouse(t)
	const prefix = "cdc/app"
	s := newSinkOn(t, wh.Store.(*s3.Store))
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

// s3Warehouse starts versitygw (under CI=true a server that cannot be
// built or started fails the test, never skips it), makes a bucket, and
// returns the warehouse of an S3 sink in it under the prefix cdc/app. The
// sink and iceberg-go's IO sign with the AWS SDK's default chain, the
// environment here, as in production.
func s3Warehouse(t *testing.T) (*s3test.Server, string, adapter.Warehouse) {
	t.Helper()
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
	return srv, bucket, wh
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

// TestGlueS3 is the seed's setup, Glue over S3: the changelog and the state
// table (a compaction's tombstone masked by a position delete file) are
// published through the Glue catalog (the recording fake) over an S3 sink
// (versitygw). Every CreateTable and UpdateTable the publisher sent carries
// an s3:// metadata location under the sink's prefix (and so does the
// previous one an update names), each an object in the bucket; the Glue
// tables' storage locations are the bucket's too. Both tables are read
// back with iceberg-go's scanner from their s3:// metadata alone
// (publishToObjectStore) and through a second Glue client, as Athena
// would: Glue for the metadata location, the bucket for the rest. The
// publisher signs Glue calls with static keys of its own and the bucket's
// with the sink's credentials (the environment's chain), as a deployment
// whose Glue and S3 identities differ.
func TestGlueS3(t *testing.T) {
	ctx := context.Background()
	srv, bucket, wh := s3Warehouse(t)
	s := newSinkOn(t, wh.Store.(*s3.Store))
	gsrv := gluetest.New(t)
	ad, closeCat, err := adapter.OpenGlue(ctx, wh, glueProps(gsrv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeCat() })
	publishToObjectStore(t, s, wh, ad)

	// Every metadata location Glue was given is an s3:// object of the
	// bucket under the sink's prefix, in pg-cdc's metadata directory.
	under := "s3://" + bucket + "/cdc/app/" + adapter.MetadataPrefix + "/"
	exists := func(what, loc string) {
		t.Helper()
		if !strings.HasPrefix(loc, under) || !strings.HasSuffix(loc, ".metadata.json") {
			t.Errorf("%s %q: not an s3:// metadata file under %s", what, loc, under)
			return
		}
		rc, err := s.store.Get(ctx, strings.TrimPrefix(loc, wh.Location+"/"))
		if err != nil {
			t.Errorf("%s %s: no object in the bucket: %v", what, loc, err)
			return
		}
		rc.Close()
	}
	writes := published(gsrv, "CreateTable", "UpdateTable")
	count := map[string]int{}
	for _, r := range writes {
		name, in := tableInput(r)
		count[r.Op+" "+name]++
		p := params(in)
		if p["table_type"] != "ICEBERG" {
			t.Errorf("%s %s: table_type %v", r.Op, name, p["table_type"])
		}
		exists(r.Op+" "+name+" metadata_location", fmt.Sprint(p["metadata_location"]))
		if r.Op == "UpdateTable" {
			exists(r.Op+" "+name+" previous_metadata_location", fmt.Sprint(p["previous_metadata_location"]))
		}
		sd, _ := in["StorageDescriptor"].(map[string]any)
		if loc := fmt.Sprint(sd["Location"]); !strings.HasPrefix(loc, under) {
			t.Errorf("%s %s: storage location %q is not under %s", r.Op, name, loc, under)
		}
	}
	for _, name := range []string{"pgcdc_changelog__public.t", "pgcdc__public.t"} {
		if count["CreateTable "+name] != 1 || count["UpdateTable "+name] < 2 {
			t.Errorf("%s: %d CreateTable and %d UpdateTable calls, want one and at least two (the schema, a snapshot)",
				name, count["CreateTable "+name], count["UpdateTable "+name])
		}
		checkChain(t, gsrv, name, nil)
	}

	// Another engine: a Glue client with credentials of its own for Glue
	// and for the bucket.
	reader, err := icecat.Load(ctx, "reader", iceberg.Properties{"type": "glue", glue.Region: "eu-west-1", glue.Endpoint: gsrv.URL,
		glue.AccessKeyID: readerKey, glue.SecretAccessKey: "s3cret-reader", glue.CatalogIdKey: glueCatalog,
		icebergio.S3EndpointURL: srv.Endpoint, icebergio.S3Region: srv.Region, icebergio.S3AccessKeyID: srv.AccessKey,
		icebergio.S3SecretAccessKey: srv.SecretKey, icebergio.S3ForceVirtualAddressing: "false"})
	if err != nil {
		t.Fatal(err)
	}
	gcl := catalog.Ident{Namespace: []string{"pgcdc_changelog__public"}, Name: "t"}
	gst := catalog.Ident{Namespace: []string{"pgcdc__public"}, Name: "t"}
	equal(t, "changelog through Glue", scan(t, reader, gcl), "I:1:a", "I:2:b", "I:3:c", "U:1:a2", "D:2:-", "I:4:d")
	equal(t, "state through Glue", scan(t, reader, gst), "I:3:c", "U:1:a2", "I:4:d")
	for _, id := range []catalog.Ident{gcl, gst} {
		tbl, err := reader.LoadTable(ctx, table.Identifier{id.Namespace[0], id.Name})
		if err != nil {
			t.Fatal(err)
		}
		exists(id.String()+" through Glue", tbl.MetadataLocation())
	}
}
