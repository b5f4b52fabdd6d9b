package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	iceberg "github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/glue"
	"github.com/apache/iceberg-go/table"
	gluetypes "github.com/aws/aws-sdk-go-v2/service/glue/types"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	adapter "github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
	"github.com/pg-cdc/pg-cdc/internal/catalog/iceberg/gluetest"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/icebergschema"
)

// The access keys the publisher and the test's reader sign with, so the
// recording tells their calls apart.
const (
	publisherKey = "AKIDPGCDCPUBLISHER"
	readerKey    = "AKIDPGCDCREADER"
	glueCatalog  = "123456789012"
)

// glueProps are the publisher's properties for srv.
func glueProps(srv *gluetest.Server) map[string]string {
	return map[string]string{glue.Region: "eu-west-1", glue.Endpoint: srv.URL, glue.CatalogIdKey: glueCatalog,
		glue.AccessKeyID: publisherKey, glue.SecretAccessKey: "s3cret-publisher", glue.SessionToken: "s3cret-session",
		adapter.PropRequestTimeout: "5s"}
}

// openGlue starts a Glue server and opens the publisher's adapter on it,
// and a plain iceberg-go Glue client to read through, as another engine
// would: it names the tables by their Glue database.
func openGlue(t *testing.T, s *sink) (*gluetest.Server, *adapter.Adapter, icecat.Catalog) {
	t.Helper()
	ctx := context.Background()
	srv := gluetest.New(t)
	ad, closeCat, err := adapter.OpenGlue(ctx, s.warehouse(), glueProps(srv))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeCat() })
	reader, err := icecat.Load(ctx, "reader", iceberg.Properties{"type": "glue", glue.Region: "eu-west-1", glue.Endpoint: srv.URL,
		glue.AccessKeyID: readerKey, glue.SecretAccessKey: "s3cret-reader", glue.CatalogIdKey: glueCatalog})
	if err != nil {
		t.Fatal(err)
	}
	return srv, ad, reader
}

// published are the publisher's calls of ops (the reader's left out).
func published(srv *gluetest.Server, ops ...string) []gluetest.Request {
	var out []gluetest.Request
	for _, r := range srv.Requests(ops...) {
		if r.AccessKey == publisherKey {
			out = append(out, r)
		}
	}
	return out
}

// tableInput is a CreateTable or UpdateTable call's TableInput, and the
// table it names ("db.name").
func tableInput(r gluetest.Request) (string, map[string]any) {
	in, _ := r.Body["TableInput"].(map[string]any)
	return fmt.Sprint(r.Body["DatabaseName"], ".", in["Name"]), in
}

func params(in map[string]any) map[string]any {
	p, _ := in["Parameters"].(map[string]any)
	return p
}

// fieldIDs are a TableInput's columns: name → iceberg.field.id, for the
// current schema's columns.
func fieldIDs(in map[string]any) map[string]string {
	out := map[string]string{}
	sd, _ := in["StorageDescriptor"].(map[string]any)
	cols, _ := sd["Columns"].([]any)
	for _, c := range cols {
		col, _ := c.(map[string]any)
		p, _ := col["Parameters"].(map[string]any)
		if p["iceberg.field.current"] == "true" {
			out[fmt.Sprint(col["Name"])] = fmt.Sprint(p["iceberg.field.id"])
		}
	}
	return out
}

// Kinds of UpdateTable calls that Glue did not apply (checkChain).
const (
	refusedConflict = "conflict" // refused by an injected conflict
	refusedRetry    = "retry"    // the AWS SDK's retry of the call before, applied already
)

// checkChain checks the publisher's writes of one Glue table, given the
// UpdateTable calls that were not applied (by their index among the
// table's updates): created once, then each UpdateTable conditional on
// the VersionId the one applied before left (1 after the create, one more
// per update) and naming the metadata it replaces as
// previous_metadata_location; an SDK retry repeats the call before it.
func checkChain(t *testing.T, srv *gluetest.Server, name string, refused map[int]string) {
	t.Helper()
	version, metadata, n := 0, "", 0
	var last map[string]any
	for _, r := range published(srv, "CreateTable", "UpdateTable") {
		tn, in := tableInput(r)
		if tn != name {
			continue
		}
		p := params(in)
		switch r.Op {
		case "CreateTable":
			if version != 0 {
				t.Errorf("%s: created twice", name)
			}
			version = 1
		case "UpdateTable":
			if refused[n] == refusedRetry {
				if !reflect.DeepEqual(r.Body, last) {
					t.Errorf("%s: update %d, a retry, is not the call before it:\n%v\n%v", name, n, r.Body, last)
				}
				n++
				continue
			}
			last = r.Body
			if got := fmt.Sprint(r.Body["VersionId"]); got != strconv.Itoa(version) {
				t.Errorf("%s: update %d conditional on VersionId %s, want %d (the one read before)", name, n, got, version)
			}
			if got := fmt.Sprint(p["previous_metadata_location"]); got != metadata {
				t.Errorf("%s: update %d: previous_metadata_location %s, want %s", name, n, got, metadata)
			}
			if refused[n] == refusedConflict {
				n++
				continue
			}
			version++
			n++
		}
		metadata = fmt.Sprint(p["metadata_location"])
	}
	if got := srv.VersionID(strings.Split(name, ".")[0], strings.Split(name, ".")[1]); got != strconv.Itoa(version) {
		t.Errorf("%s: Glue holds VersionId %s, the chain of writes %d", name, got, version)
	}
}

// TestGlue publishes the changelog and the state table through the Glue
// catalog and reads them back with iceberg-go's scanner through a second
// Glue client: the same rows as through the other catalogs. The recorded
// calls show what a Glue reader (Athena) gets: one database per namespace
// (prefix__schema), EXTERNAL_TABLE tables whose parameters say ICEBERG and
// where the metadata is, columns carrying pg-cdc's field ids, and every
// commit an UpdateTable conditional on the VersionId read. Then Glue's
// faults: conflicts on UpdateTable, and a 500 after the update was
// applied; each fails the publication, and its retry converges, nothing
// published twice.
func TestGlue(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	srv, ad, reader := openGlue(t, s)
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, Positions: positions(s)})
	cl := catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")
	st := catalog.StateIdent(catalog.DefaultPrefix, "public", "t")
	gcl := catalog.Ident{Namespace: []string{"pgcdc_changelog__public"}, Name: "t"}
	gst := catalog.Ident{Namespace: []string{"pgcdc__public"}, Name: "t"}
	// versions are the pgcdc.manifest-version of each of a table's
	// snapshots, through the reader.
	versions := func(id catalog.Ident) []uint64 {
		t.Helper()
		var out []uint64
		for _, sn := range snapshots(t, reader, id) {
			out = append(out, catalog.VersionOf(sn.Summary.Properties))
		}
		return out
	}

	m := s.mc.Current()
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	equal(t, "changelog after the snapshot", scan(t, reader, gcl), "I:1:a", "I:2:b", "I:3:c")
	equal(t, "state after the snapshot", scan(t, reader, gst), "I:1:a", "I:2:b", "I:3:c")
	if got := srv.Databases(); !slices.Equal(got, []string{"pgcdc__public", "pgcdc_changelog__public"}) {
		t.Errorf("Glue databases %q: want one per namespace, none for a parent level", got)
	}
	tbl, err := reader.LoadTable(ctx, table.Identifier{"pgcdc_changelog__public", "t"})
	if err != nil {
		t.Fatal(err)
	}
	if got := catalog.VersionOf(tbl.CurrentSnapshot().Summary.Properties); got != m.Version {
		t.Errorf("summary manifest version %d, want %d", got, m.Version)
	}
	// The ids pg-cdc assigned: the metadata columns' fixed ones, the
	// table's columns' own.
	wantIDs := map[string]string{"__op": "2000000001", "__lsn": "2000000002", "__seq": "2000000003", "__xid": "2000000004",
		"__op_ts": "2000000005", "__unchanged": strconv.Itoa(icebergschema.FieldUnchanged), "id": "1", "v": "2"}
	for name, want := range wantIDs {
		if f, ok := tbl.Schema().FindFieldByName(name); !ok || strconv.Itoa(f.ID) != want {
			t.Errorf("field %s through Glue: %+v, want id %s", name, f, want)
		}
	}

	creates := published(srv, "CreateTable")
	if len(creates) != 2 {
		t.Fatalf("%d CreateTable calls, want 2 (changelog and state)", len(creates))
	}
	for _, r := range creates {
		name, in := tableInput(r)
		p := params(in)
		if r.Body["CatalogId"] != glueCatalog || in["TableType"] != "EXTERNAL_TABLE" || p["table_type"] != "ICEBERG" ||
			!strings.HasPrefix(fmt.Sprint(p["metadata_location"]), "file://"+s.dir+"/_pgcdc/iceberg/") || !strings.HasSuffix(fmt.Sprint(p["metadata_location"]), ".metadata.json") {
			t.Errorf("CreateTable %s: catalog %v, type %v, parameters %v", name, r.Body["CatalogId"], in["TableType"], p)
		}
		// iceberg-go's create renumbers the field ids; the adapter's
		// next commit, the schema push, carries pg-cdc's.
		ids := fieldIDs(in)
		if !slices.Equal(slices.Sorted(maps.Keys(ids)), slices.Sorted(maps.Keys(wantIDs))) {
			t.Errorf("CreateTable %s: columns %v, want %v", name, ids, slices.Sorted(maps.Keys(wantIDs)))
		}
	}
	for _, r := range published(srv, "UpdateTable") {
		name, in := tableInput(r)
		if ids := fieldIDs(in); !maps.Equal(ids, wantIDs) {
			t.Errorf("UpdateTable %s (VersionId %v): columns' field ids %v, want pg-cdc's %v", name, r.Body["VersionId"], ids, wantIDs)
		}
		if r.Body["SkipArchive"] != true || r.Body["CatalogId"] != glueCatalog {
			t.Errorf("UpdateTable %s: SkipArchive %v, CatalogId %v", name, r.Body["SkipArchive"], r.Body["CatalogId"])
		}
	}
	if len(published(srv, "UpdateTable")) == 0 {
		t.Error("no UpdateTable after the creates: the exact schema was not pushed")
	}

	m = s.delta([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}})
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	changes := []string{"I:1:a", "I:2:b", "I:3:c", "U:1:a2", "D:2:-", "I:4:d"}
	equal(t, "changelog after a delta", scan(t, reader, gcl), changes...)
	m = s.compact([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x100, 3, "c", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}}, 1)
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	equal(t, "state after a compaction (tombstone masked)", scan(t, reader, gst), "I:3:c", "U:1:a2", "I:4:d")
	equal(t, "changelog after a compaction", scan(t, reader, gcl), changes...)
	checkChain(t, srv, "pgcdc_changelog__public.t", nil)
	checkChain(t, srv, "pgcdc__public.t", nil)

	// Each fault: a delta whose publication fails as many times as armed,
	// then is retried. mid is how many snapshots the failed attempts
	// leave: one when Glue applied the update, none when it refused it.
	updates := func() int { return len(published(srv, "UpdateTable")) }
	refused := map[int]string{}
	clUpdates := func() int { // the changelog's updates so far
		n := 0
		for _, r := range published(srv, "UpdateTable") {
			if name, _ := tableInput(r); name == "pgcdc_changelog__public.t" {
				n++
			}
		}
		return n
	}
	for _, f := range []struct {
		name  string
		arm   func()
		fails int
		mid   int
	}{
		{"a conflict", func() { srv.ConflictNextUpdates(1) }, 1, 0},
		{"two conflicts in a row", func() { srv.ConflictNextUpdates(2) }, 2, 0},
		{"a 500 after the update was applied", srv.LoseNextUpdate, 1, 1},
	} {
		id := len(changes) + 1
		m = s.delta([]row{{cdc.OpInsert, 0x300 + id, id, fmt.Sprintf("v%d", id), 0}})
		before := len(snapshots(t, reader, gcl))
		version := srv.VersionID("pgcdc_changelog__public", "t")
		f.arm()
		for i := range f.fails {
			n, first := updates(), clUpdates()
			_, err := p.Publish(ctx, m)
			if err == nil {
				t.Fatalf("%s: attempt %d reported no error", f.name, i+1)
			}
			// A conflict is Glue's, passed on as not ErrCommitFailed, so
			// iceberg-go never replays it: after a lost answer it is no
			// proof the update was not applied.
			if !errors.As(err, new(*gluetypes.ConcurrentModificationException)) || errors.Is(err, table.ErrCommitFailed) {
				t.Errorf("%s: attempt %d: %v, want Glue's conflict, not table.ErrCommitFailed", f.name, i+1, err)
			}
			got := published(srv, "UpdateTable")[n:]
			switch {
			case f.mid == 0 && len(got) != 1:
				t.Errorf("%s: attempt %d made %d UpdateTable calls, want 1", f.name, i+1, len(got))
			case f.mid == 1 && (len(got) != 2 || got[0].Body["VersionId"] != version || got[1].Body["VersionId"] != version):
				t.Errorf("%s: %d UpdateTable calls, want the applied one and the AWS SDK's retry of it, both on VersionId %s", f.name, len(got), version)
			}
			if f.mid == 0 {
				refused[first] = refusedConflict
			} else {
				refused[first+1] = refusedRetry
			}
		}
		if n := len(snapshots(t, reader, gcl)); n != before+f.mid {
			t.Errorf("%s: the failed attempts left %d new snapshot(s), want %d", f.name, n-before, f.mid)
		}
		if _, err := p.Publish(ctx, m); err != nil {
			t.Fatalf("%s: retry: %v", f.name, err)
		}
		if n := len(snapshots(t, reader, gcl)); n != before+1 {
			t.Errorf("%s: the version took %d snapshot(s), want 1", f.name, n-before)
		}
		changes = append(changes, fmt.Sprintf("I:%d:v%d", id, id))
		equal(t, f.name+": changelog after the retry", scan(t, reader, gcl), changes...)
		if _, err := p.Publish(ctx, m); err != nil {
			t.Fatalf("%s: a publication of the same version again: %v", f.name, err)
		}
		if n := len(snapshots(t, reader, gcl)); n != before+1 {
			t.Errorf("%s: publishing the version again made %d snapshot(s) more", f.name, n-before-1)
		}
		if got := versions(gcl); got[len(got)-1] != m.Version {
			t.Errorf("%s: the newest snapshot records manifest version %d, want %d", f.name, got[len(got)-1], m.Version)
		}
	}
	// One snapshot per published version, each version once.
	vs := versions(gcl)
	if !slices.IsSorted(vs) || len(slices.Compact(slices.Clone(vs))) != len(vs) {
		t.Errorf("changelog snapshots' manifest versions %v: want each once, in order", vs)
	}
	if want := 5; len(vs) != want {
		t.Errorf("changelog: %d snapshots %v, want %d (snapshot, delta, compaction's none, three deltas)", len(vs), vs, want)
	}
	checkChain(t, srv, "pgcdc_changelog__public.t", refused)

	sts, err := p.Inspect(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range sts {
		if !ts.Drift.InSync() || !strings.HasPrefix(ts.Metadata, "file://"+s.dir+"/_pgcdc/iceberg/") {
			t.Errorf("inspect %s %s: drift %+v, metadata %q", ts.Kind, ts.Iceberg, ts.Drift, ts.Metadata)
		}
	}
	for _, c := range []struct {
		id  catalog.Ident
		gid table.Identifier
	}{{cl, table.Identifier{"pgcdc_changelog__public", "t"}}, {st, table.Identifier{"pgcdc__public", "t"}}} {
		id, gid := c.id, c.gid
		loc, err := ad.MetadataLocation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := reader.LoadTable(ctx, gid)
		if err != nil || tbl.MetadataLocation() != loc {
			t.Errorf("%s: metadata %s through pg-cdc's identifier, %v (%v) through Glue's", id, loc, tbl, err)
		}
	}
}

// TestGlueOpen: Open opens a Glue catalog at its first use, so a client
// it cannot build (or a Glue that is down) fails the publication, not
// start; the properties' secrets never show in its errors.
func TestGlueOpen(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	srv := gluetest.New(t)
	bad := glueProps(srv)
	bad[glue.MaxRetries] = "many"
	lazy, closeCat, err := adapter.Open(adapter.OpenOptions{Kind: adapter.KindGlue, Properties: bad, Warehouse: s.dir})
	if err != nil {
		t.Fatalf("Open with a property the client refuses: %v, want the error at first use", err)
	}
	defer closeCat()
	p := catalog.New(catalog.Options{Catalog: lazy, Retention: time.Hour, Positions: positions(s)})
	_, err = p.Publish(ctx, s.mc.Current())
	if err == nil || !strings.Contains(err.Error(), glue.MaxRetries) {
		t.Errorf("a publication through a client that cannot be built: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows a secret: %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d calls reached Glue", n)
	}

	lazy, closeCat, err = adapter.Open(adapter.OpenOptions{Kind: adapter.KindGlue, Properties: glueProps(srv), Warehouse: s.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer closeCat()
	p = catalog.New(catalog.Options{Catalog: lazy, Retention: time.Hour, Positions: positions(s)})
	if _, err := p.Publish(ctx, s.mc.Current()); err != nil {
		t.Fatal(err)
	}
	sts, err := p.Inspect(ctx, s.mc.Current())
	if err != nil || len(sts) != 2 || !sts[0].Drift.InSync() || !sts[1].Drift.InSync() {
		t.Errorf("inspect: %+v, %v", sts, err)
	}
	for _, r := range srv.Requests() {
		if r.AccessKey != publisherKey {
			t.Errorf("%s signed with %q, want the static key %s", r.Op, r.AccessKey, publisherKey)
		}
	}

	down := gluetest.New(t)
	props := glueProps(down)
	props[glue.MaxRetries] = "1"
	ad, closeDown, err := adapter.OpenGlue(ctx, s.warehouse(), props)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDown()
	down.Close()
	if _, _, err := ad.Load(ctx, catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")); err == nil {
		t.Error("Load from a Glue that is down: no error")
	}
}

// TestGlueNames: Glue has one namespace level and folds names to lower
// case, so a name that would be ambiguous in a Glue database name, or that
// Glue would fold, is refused before any call, not published as another
// table.
func TestGlueNames(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	srv, ad, _ := openGlue(t, s)
	mt := s.mc.Current().Tables["public.t"]
	sc, err := icebergschema.Of(1, mt.Schemas[0].Columns)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []catalog.Ident{
		catalog.StateIdent(catalog.DefaultPrefix, "a__b", "t"),
		catalog.StateIdent(catalog.DefaultPrefix, "_tmp", "t"),
		catalog.StateIdent(catalog.DefaultPrefix, "public", "Orders"),
		catalog.StateIdent("PGCDC", "public", "t"),
	} {
		if err := ad.Create(ctx, id, sc, nil); err == nil || !strings.Contains(err.Error(), "glue") {
			t.Errorf("create %s: %v, want a refusal", id, err)
		}
		if _, _, err := ad.Load(ctx, id); err == nil {
			t.Errorf("load %s: no error", id)
		}
	}
	// The one valid namespace among them (pgcdc, public) was made before
	// its table's name was refused.
	if got := srv.Requests("GetTable", "CreateTable", "UpdateTable"); len(got) != 0 {
		t.Errorf("%d table calls reached Glue for names it cannot hold: %v", len(got), got)
	}
	if got := srv.Databases(); !slices.Equal(got, []string{"pgcdc__public"}) {
		t.Errorf("databases %q", got)
	}
}
