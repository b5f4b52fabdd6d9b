package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	adapter "github.com/pg-cdc/pg-cdc/internal/catalog/iceberg"
	"github.com/pg-cdc/pg-cdc/internal/catalog/iceberg/resttest"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/icebergschema"
)

// openREST starts a REST catalog server over the sink and opens the
// publisher's adapter on it, and a second client of the same server to
// read through.
func openREST(t *testing.T, s *sink, props map[string]string) (*resttest.Server, *adapter.Adapter, *rest.Catalog) {
	t.Helper()
	ctx := context.Background()
	srv := resttest.New(t, "file://"+s.dir)
	ad, closeCat, err := adapter.OpenREST(ctx, srv.URL, s.warehouse(), props)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeCat() })
	reader, err := rest.NewCatalog(ctx, "reader", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	return srv, ad, reader
}

// TestREST publishes the changelog and the state table through the REST
// catalog and reads them back through it (and through the SQL catalog
// behind it): the same rows as TestChangelog and TestState read via SQL.
// Then the faults a remote catalog has: a commit applied whose answer is a
// 503, a 409 conflict, an answer later than the client's timeout (the
// commit applied, or dropped), and a lost answer to a state table's
// replacement. Each fails the publication, and its retry converges: the
// rows exactly once, one snapshot per version.
func TestREST(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	srv, ad, reader := openREST(t, s, map[string]string{adapter.PropRequestTimeout: "1s"})
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, Positions: positions(s)})
	cl := catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")
	st := catalog.StateIdent(catalog.DefaultPrefix, "public", "t")

	// rows reads id through REST and checks the SQL catalog behind it
	// holds the same.
	rows := func(id catalog.Ident) []string {
		t.Helper()
		got := scan(t, reader, id)
		equal(t, id.String()+" via the SQL catalog behind REST", scan(t, srv.Catalog(), id), got...)
		return got
	}
	nsnap := func(id catalog.Ident) int {
		t.Helper()
		tbl, err := reader.LoadTable(ctx, append(table.Identifier{}, append(id.Namespace, id.Name)...))
		if err != nil {
			t.Fatal(err)
		}
		return len(tbl.Metadata().Snapshots())
	}

	m := s.mc.Current()
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	equal(t, "changelog after the snapshot", rows(cl), "I:1:a", "I:2:b", "I:3:c")
	equal(t, "state after the snapshot", rows(st), "I:1:a", "I:2:b", "I:3:c")
	tbl, err := reader.LoadTable(ctx, table.Identifier{"pgcdc_changelog", "public", "t"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"__op": icebergschema.FieldOp, "__lsn": icebergschema.FieldLSN, "__unchanged": icebergschema.FieldUnchanged, "id": 1, "v": 2} {
		if f, ok := tbl.Schema().FindFieldByName(name); !ok || f.ID != want {
			t.Errorf("field %s through REST: %+v, want id %d", name, f, want)
		}
	}
	if got := catalog.VersionOf(tbl.CurrentSnapshot().Summary.Properties); got != m.Version {
		t.Errorf("summary manifest version %d, want %d", got, m.Version)
	}
	sent := strings.Join(srv.Requests(), "\n")
	if !strings.Contains(sent, "/v1/namespaces/pgcdc_changelog%1Fpublic/tables/t") {
		t.Errorf("no request named the two-level namespace joined by %%1F:\n%s", sent)
	}

	m = s.delta([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}})
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	changes := []string{"I:1:a", "I:2:b", "I:3:c", "U:1:a2", "D:2:-", "I:4:d"}
	equal(t, "changelog after a delta", rows(cl), changes...)
	equal(t, "state after a delta (as of its base)", rows(st), "I:1:a", "I:2:b", "I:3:c")

	m = s.compact([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x100, 3, "c", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}}, 1)
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	equal(t, "state after a compaction (tombstone masked)", rows(st), "I:3:c", "U:1:a2", "I:4:d")
	equal(t, "changelog after a compaction (inside the retention)", rows(cl), changes...)

	// Each fault: a delta whose publication fails once, then is retried.
	// mid is how many snapshots the failed attempt leaves: one when the
	// server applied the commit, none when it did not.
	for _, f := range []struct {
		name  string
		arm   func()
		mid   int
		isErr error
	}{
		{"503 after the commit was applied", srv.LoseNextCommit, 1, rest.ErrCommitStateUnknown},
		{"409 conflict, not applied", srv.RefuseNextCommit, 0, table.ErrCommitFailed},
		{"answer after the client's timeout, applied", func() { srv.StallNextCommit(true) }, 1, nil},
		{"answer after the client's timeout, dropped", func() { srv.StallNextCommit(false) }, 0, nil},
	} {
		id := len(changes) + 1
		r := row{cdc.OpInsert, 0x300 + id, id, fmt.Sprintf("v%d", id), 0}
		m = s.delta([]row{r})
		before := nsnap(cl)
		f.arm()
		start := time.Now()
		_, err := p.Publish(ctx, m)
		if err == nil {
			t.Fatalf("%s: the publication reported no error", f.name)
		}
		if f.isErr != nil && !errors.Is(err, f.isErr) {
			t.Errorf("%s: %v, want %v", f.name, err, f.isErr)
		}
		if f.isErr == nil && time.Since(start) > 5*time.Second {
			t.Errorf("%s: the publication took %s: the request timeout did not hold", f.name, time.Since(start))
		}
		if n := nsnap(cl); n != before+f.mid {
			t.Errorf("%s: the failed attempt left %d new snapshot(s), want %d", f.name, n-before, f.mid)
		}
		if _, err := p.Publish(ctx, m); err != nil {
			t.Fatalf("%s: retry: %v", f.name, err)
		}
		if n := nsnap(cl); n != before+1 {
			t.Errorf("%s: the version took %d snapshot(s), want 1", f.name, n-before)
		}
		changes = append(changes, fmt.Sprintf("I:%d:v%d", id, id))
		equal(t, f.name+": changelog after the retry", rows(cl), changes...)
		if _, err := p.Publish(ctx, m); err != nil {
			t.Fatalf("%s: a publication of the same version again: %v", f.name, err)
		}
		if n := nsnap(cl); n != before+1 {
			t.Errorf("%s: publishing the version again made %d snapshot(s) more", f.name, n-before-1)
		}
	}

	// A state table's replacement whose answer is lost: the retry finds
	// the new base published and commits nothing.
	m = s.compact([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x100, 3, "c", 0}, {cdc.OpInsert, 0x200, 4, "d", 0},
		{cdc.OpInsert, 0x307, 7, "v7", 0}, {cdc.OpInsert, 0x308, 8, "v8", 0}, {cdc.OpInsert, 0x309, 9, "v9", 0}, {cdc.OpInsert, 0x30a, 10, "v10", 0}}, 1)
	before := nsnap(st)
	srv.LoseNextCommit()
	if _, err := p.Publish(ctx, m); !errors.Is(err, rest.ErrCommitStateUnknown) {
		t.Errorf("a lost answer to the state's replacement: %v, want %v", err, rest.ErrCommitStateUnknown)
	}
	mid := nsnap(st)
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	if n := nsnap(st); n != mid || mid == before {
		t.Errorf("state snapshots: %d before, %d after the lost answer, %d after the retry: want it applied once", before, mid, n)
	}
	equal(t, "state after a lost answer to its replacement", rows(st), "I:3:c", "U:1:a2", "I:4:d", "I:7:v7", "I:8:v8", "I:9:v9", "I:10:v10")
	equal(t, "changelog after the second compaction", rows(cl), changes...)

	sts, err := p.Inspect(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range sts {
		if !ts.Drift.InSync() || !strings.HasPrefix(ts.Metadata, "file://"+s.dir+"/_pgcdc/iceberg/") {
			t.Errorf("inspect %s %s: drift %+v, metadata %q", ts.Kind, ts.Iceberg, ts.Drift, ts.Metadata)
		}
	}
}

// TestRESTAuth: a catalog that wants a bearer token refuses a client
// without one, and takes the token given as a property, or the one a
// client credential is exchanged for.
func TestRESTAuth(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	srv := resttest.New(t, "file://"+s.dir)
	srv.RequireToken("tok-3f9a", "pgcdc:s3cret-77")
	if _, _, err := adapter.OpenREST(ctx, srv.URL, s.warehouse(), nil); !errors.Is(err, rest.ErrUnauthorized) {
		t.Errorf("no token: %v, want %v", err, rest.ErrUnauthorized)
	}
	_, _, err := adapter.OpenREST(ctx, srv.URL, s.warehouse(), map[string]string{"credential": "pgcdc:wrong"})
	if err == nil {
		t.Error("a wrong credential was accepted")
	} else if strings.Contains(err.Error(), "wrong") {
		t.Errorf("the error shows the credential: %v", err)
	}
	for _, props := range []map[string]string{{"token": "tok-3f9a"}, {"credential": "pgcdc:s3cret-77"}} {
		ad, closeCat, err := adapter.OpenREST(ctx, srv.URL, s.warehouse(), props)
		if err != nil {
			t.Fatalf("%v: %v", props, err)
		}
		p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, Positions: positions(s)})
		if _, err := p.Publish(ctx, s.mc.Current()); err != nil {
			t.Errorf("%v: %v", props, err)
		}
		closeCat()
	}
	if _, _, err := adapter.OpenREST(ctx, srv.URL, s.warehouse(), map[string]string{adapter.PropRequestTimeout: "soon"}); err == nil {
		t.Error("a request timeout that is no duration was accepted")
	}
}

// TestLazyOpen: a REST catalog that is down at the first publication
// fails that publication (retried by the publisher), not the process; once
// it is up, the next one opens it and publishes.
func TestLazyOpen(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	srv := resttest.New(t, "file://"+s.dir)
	up := false
	lazy := adapter.NewLazy(func(ctx context.Context) (*adapter.Adapter, func() error, error) {
		if !up {
			return nil, nil, errors.New("connection refused")
		}
		return adapter.OpenREST(ctx, srv.URL, s.warehouse(), nil)
	})
	t.Cleanup(func() { lazy.Close() })
	p := catalog.New(catalog.Options{Catalog: lazy, Retention: time.Hour, Positions: positions(s)})
	if _, err := p.Publish(ctx, s.mc.Current()); err == nil {
		t.Fatal("a publication with the catalog down reported no error")
	}
	up = true
	if _, err := p.Publish(ctx, s.mc.Current()); err != nil {
		t.Fatal(err)
	}
	st, err := p.Inspect(ctx, s.mc.Current())
	if err != nil || len(st) != 2 || !st[0].Drift.InSync() || !st[1].Drift.InSync() {
		t.Errorf("inspect after the catalog came up: %+v, %v", st, err)
	}
}

// TestRESTTransaction: over a REST catalog that advertises POST
// /v1/{prefix}/transactions/commit, a manifest version that changes both
// of a table's Iceberg tables commits them in one transaction: both
// advance to it at once. A fault inside the transaction (the server fails
// after applying the first table's change) leaves neither advanced, and
// the publisher's retry commits both, whole; so does a retry after a
// transaction whose answer was lost, which finds both published. A
// catalog that does not advertise the endpoint gets one table at a time.
func TestRESTTransaction(t *testing.T) {
	ctx := context.Background()
	s := newSink(t)
	srv, ad, _ := openREST(t, s, map[string]string{adapter.PropRequestTimeout: "5s"})
	p := catalog.New(catalog.Options{Catalog: ad, Retention: time.Hour, Positions: positions(s)})
	cl := catalog.ChangelogIdent(catalog.DefaultPrefix, "public", "t")
	st := catalog.StateIdent(catalog.DefaultPrefix, "public", "t")
	// at is the manifest version each table's current snapshot records
	// and how many snapshots it has, read from the SQL catalog behind the
	// server.
	at := func() [4]uint64 {
		t.Helper()
		var out [4]uint64
		for i, id := range []catalog.Ident{cl, st} {
			snaps := snapshots(t, srv.Catalog(), id)
			out[2*i] = catalog.VersionOf(snaps[len(snaps)-1].Summary.Properties)
			out[2*i+1] = uint64(len(snaps))
		}
		return out
	}

	m := s.mc.Current()
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	if n := srv.Transactions(); n != 1 {
		t.Errorf("the snapshot's version took %d transactions, want 1 for both tables", n)
	}
	if got, want := at(), [4]uint64{m.Version, 1, m.Version, 1}; got != want {
		t.Errorf("after the snapshot: (version, snapshots) of changelog and state %v, want %v", got, want)
	}
	before := at()

	// A version that changes both tables: a compaction (a new base, a
	// tombstone) and a delta after it.
	s.delta([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}})
	s.compact([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x100, 3, "c", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}}, 1)
	m = s.delta([]row{{cdc.OpInsert, 0x300, 5, "e", 0}})
	srv.FailNextTransaction()
	if _, err := p.Publish(ctx, m); err == nil {
		t.Fatal("a transaction that failed inside: no error")
	}
	if got := at(); got != before {
		t.Errorf("after a transaction failed inside: %v, want neither table advanced %v", got, before)
	}
	equal(t, "changelog after the failed transaction", scan(t, srv.Catalog(), cl), "I:1:a", "I:2:b", "I:3:c")
	equal(t, "state after the failed transaction", scan(t, srv.Catalog(), st), "I:1:a", "I:2:b", "I:3:c")
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n := srv.Transactions(); n != 2 {
		t.Errorf("%d transactions, want 2", n)
	}
	// The state table's replacement is two snapshots (the files, then
	// their position deletes) in its one commit (ReplaceState).
	if got, want := at(), [4]uint64{m.Version, before[1] + 1, m.Version, before[3] + 2}; got != want {
		t.Errorf("after the retry: %v, want both advanced, in one commit %v", got, want)
	}
	changes := []string{"I:1:a", "I:2:b", "I:3:c", "U:1:a2", "D:2:-", "I:4:d", "I:5:e"}
	equal(t, "changelog after the retry", scan(t, srv.Catalog(), cl), changes...)
	equal(t, "state after the retry (tombstone masked)", scan(t, srv.Catalog(), st), "I:3:c", "U:1:a2", "I:4:d")

	// The transaction applied, its answer lost: the retry finds both
	// tables at the version and commits nothing.
	before = at()
	s.compact([]row{{cdc.OpUpdate, 0x200, 1, "a2", 0}, {cdc.OpDelete, 0x200, 2, "", 0}, {cdc.OpInsert, 0x100, 3, "c", 0}, {cdc.OpInsert, 0x200, 4, "d", 0}, {cdc.OpInsert, 0x300, 5, "e", 0}}, 1)
	m = s.delta([]row{{cdc.OpInsert, 0x400, 6, "f", 0}})
	srv.LoseNextCommit()
	if _, err := p.Publish(ctx, m); err == nil {
		t.Fatal("a transaction whose answer was lost: no error")
	}
	if got, want := at(), [4]uint64{m.Version, before[1] + 1, m.Version, before[3] + 2}; got != want {
		t.Errorf("after a lost answer: %v, want both applied %v", got, want)
	}
	if _, err := p.Publish(ctx, m); err != nil {
		t.Fatalf("retry after a lost answer: %v", err)
	}
	if n := srv.Transactions(); n != 3 {
		t.Errorf("%d transactions, want 3 (the lost answer's applied, its retry none)", n)
	}
	if got, want := at(), [4]uint64{m.Version, before[1] + 1, m.Version, before[3] + 2}; got != want {
		t.Errorf("after the retry of a lost answer: %v, want nothing committed twice %v", got, want)
	}
	equal(t, "changelog after a lost answer", scan(t, srv.Catalog(), cl), append(changes, "I:6:f")...)
	equal(t, "state after a lost answer", scan(t, srv.Catalog(), st), "I:3:c", "U:1:a2", "I:4:d", "I:5:e")

	// A catalog without the endpoint: one table at a time, no transaction
	// sent.
	s2 := newSink(t)
	srv2 := resttest.New(t, "file://"+s2.dir)
	srv2.NoTransactions()
	ad2, closeCat, err := adapter.OpenREST(ctx, srv2.URL, s2.warehouse(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeCat() })
	p2 := catalog.New(catalog.Options{Catalog: ad2, Retention: time.Hour, Positions: positions(s2)})
	for range 2 { // the second: the adapter knows by then
		m2 := s2.delta([]row{{cdc.OpInsert, 0x200 + s2.n, 10 + s2.n, "x", 0}})
		s2.compact([]row{{cdc.OpInsert, 0x100, 1, "a", 0}}, 0)
		m2 = s2.delta([]row{{cdc.OpInsert, 0x300 + s2.n, 20 + s2.n, "y", 0}})
		if _, err := p2.Publish(ctx, m2); err != nil {
			t.Fatal(err)
		}
		if v := catalog.VersionOf(snapshots(t, srv2.Catalog(), st)[len(snapshots(t, srv2.Catalog(), st))-1].Summary.Properties); v != m2.Version {
			t.Errorf("without transactions: state at version %d, want %d", v, m2.Version)
		}
	}
	for _, r := range srv2.Requests() {
		if strings.Contains(r, "transactions") {
			t.Errorf("a catalog that does not advertise transactions was sent %s", r)
		}
	}
	if n := srv2.Transactions(); n != 0 {
		t.Errorf("%d transactions on a catalog without them", n)
	}
}
