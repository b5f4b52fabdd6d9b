package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/catalog/iceberg/resttest"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// faultCols are the columns compared in the fault tests' change rows: the
// metadata columns, then the table's (faultTable).
var faultCols = append(slices.Clone(iceMeta), iceCol{"id", "int"}, iceCol{"big", "int"}, iceCol{"title", "str"})

const faultTable = "public.ice"

// TestIcebergCatalogOutage is S38's outage: the REST catalog the daemon
// publishes to is down for minutes while the stream runs, time compressed —
// 25 s of outage at flush.interval 1 s and a write every 40 ms is about
// 25 manifest versions the catalog misses, and the publisher's backoff
// (1 s doubling) gets through its first five retries, as a 10-minute
// outage gets through its first nine. The catalog is resttest served from
// the test process behind a front the test stops: while it is down its
// port refuses connections (the listener is closed, the open connections
// too), as a catalog that is down does. The outside LSN sampler runs from
// before the outage to the end.
//
// It asserts (a) the durability path is unaffected: the manifest keeps
// advancing during the outage, every change committed is in the manifest
// within a few seconds (flush lag bounded), the slot keeps being
// confirmed, never past the manifest; (b) the daemon's /metrics shows the
// catalog falling behind: pgcdc_catalog_lag_versions and
// pgcdc_catalog_lag_seconds rise, pgcdc_catalog_failures_total counts the
// failed attempts; (c) once the catalog is back the publisher catches up
// (lag 0, published version the manifest's, catalog status in sync), the
// changelog's rows read by icebird are the change files' rows read by
// DuckDB, value by value, and its snapshots are what coalescing promises
// (docs/catalogs.md, Publisher.Follow): each carries pgcdc.manifest-version,
// strictly increasing, the last the published version; none was committed
// for a version made during the outage, and the whole backlog landed as
// one snapshot, of a version at least the newest when the catalog came
// back.
func TestIcebergCatalogOutage(t *testing.T) {
	waitBound(t)
	mods := ensureIcebird(t)
	const outage = 25 * time.Second

	front := newCatalogFront(t)
	e := newEnv(t, envOptions{extraYAML: fmt.Sprintf(`catalog:
  type: iceberg
  iceberg:
    commit_interval: 0s
    type: rest
    uri: %s
    properties:
      pgcdc.request-timeout: 2s
`, front.URL())})
	front.target(resttest.New(t, "file://"+e.sink).URL)
	e.exec(`CREATE TABLE ice (id int PRIMARY KEY, big bigint, title text)`)
	e.exec(`INSERT INTO ice SELECT g, g * 10000000000, 'row ' || g FROM generate_series(1, 20) g`)
	runTimed(t, e, time.Minute, "init")
	s := e.startSampler()
	d := e.start()
	base := "http://" + metricsAddr(t, d)
	w := startIceWorkload(t, e, 1000, 40*time.Millisecond)

	// Streaming and publishing, before the outage.
	waitPublished(t, e, base, 30*time.Second)
	// More versions committed and published while streaming, awaited
	// rather than slept for.
	v0 := e.manifest().Version
	e.waitFor("three more manifest versions before the outage", 30*time.Second, func() bool { return e.manifest().Version >= v0+3 })
	waitPublished(t, e, base, 30*time.Second)

	// The outage.
	failsBefore := counter(scrape(t, base), "pgcdc_catalog_failures_total", map[string]string{"table": faultTable})
	front.down()
	vDown := e.manifest().Version // a version committed after this was never published before the front was down
	confirmedDown := confirmedLSN(t, e)
	start := time.Now()
	var lagVersions, lagSeconds []float64
	var maxFlushLag time.Duration
	for time.Since(start) < outage {
		fams := scrape(t, base)
		lagVersions = append(lagVersions, gauge(fams, "pgcdc_catalog_lag_versions", nil))
		lagSeconds = append(lagSeconds, gauge(fams, "pgcdc_catalog_lag_seconds", nil))
		t0 := time.Now()
		e.waitCaughtUp(10 * time.Second)
		maxFlushLag = max(maxFlushLag, time.Since(t0))
		time.Sleep(500 * time.Millisecond)
	}
	vUp := e.manifest().Version // no publication can land before the front is up
	confirmedUp := confirmedLSN(t, e)
	fams := scrape(t, base)
	failsDuring := counter(fams, "pgcdc_catalog_failures_total", map[string]string{"table": faultTable}) - failsBefore
	front.up()
	t.Logf("outage %s: manifest versions %d → %d, flush lag at most %s, confirmed %s → %s, lag versions %v, lag seconds %v, %v failures",
		outage, vDown, vUp, maxFlushLag.Round(time.Millisecond), confirmedDown, confirmedUp, lagVersions, lagSeconds, failsDuring)

	// (a) The durability path.
	if vUp-vDown < 15 {
		t.Errorf("the manifest advanced %d versions in %s of catalog outage (%d → %d), want at least 15: the stream stalled", vUp-vDown, outage, vDown, vUp)
	}
	if maxFlushLag > 5*time.Second {
		t.Errorf("a change took %s to reach the manifest during the outage, want at most 5s at flush.interval 1s", maxFlushLag)
	}
	if confirmedUp <= confirmedDown {
		t.Errorf("the slot was confirmed at %s when the catalog went down and at %s after %s: confirmation stalled", confirmedDown, confirmedUp, outage)
	}
	s.check()

	// (b) The catalog falls behind, in the metrics.
	if n := len(lagVersions); n < 2 || lagVersions[n-1] < 10 || lagVersions[n-1] <= lagVersions[0] {
		t.Errorf("pgcdc_catalog_lag_versions during the outage %v: want it rising to at least 10", lagVersions)
	}
	if n := len(lagSeconds); n < 2 || lagSeconds[n-1] < 10 || lagSeconds[n-1] <= lagSeconds[0] {
		t.Errorf("pgcdc_catalog_lag_seconds during the outage %v: want it rising to at least 10", lagSeconds)
	}
	if failsDuring < 3 {
		t.Errorf("pgcdc_catalog_failures_total counted %v failures during the outage, want at least 3 (the retries of 1 s doubling)", failsDuring)
	}

	// (c) The publisher catches up, the stream still running; then with
	// the workload stopped.
	caughtUp := time.Now()
	waitPublished(t, e, base, 45*time.Second)
	t.Logf("the publisher caught up %s after the catalog came back", time.Since(caughtUp).Round(time.Millisecond))
	w.stop()
	e.waitCaughtUp(30 * time.Second)
	waitPublished(t, e, base, 30*time.Second)
	s.check()

	status := catalogStatus(t, e)
	m := e.manifest()
	for _, ts := range status.Tables {
		if !ts.Drift.InSync() || ts.Err != "" {
			t.Errorf("catalog status of %s (%s) after the outage: drift %+v, error %q", ts.Iceberg, ts.Kind, ts.Drift, ts.Err)
		}
	}
	st := changelogStatus(t, status.Tables)
	meta := readIcebergMetadata(t, st.Metadata)
	versions := meta.versions(t)
	t.Logf("changelog snapshots' manifest versions: %v (manifest at %d)", versions, m.Version)
	for i := 1; i < len(versions); i++ {
		if versions[i] <= versions[i-1] {
			t.Errorf("snapshot %d's manifest version %d follows %d: not strictly increasing (%v)", i, versions[i], versions[i-1], versions)
		}
	}
	if len(versions) == 0 || versions[len(versions)-1] != st.Version {
		t.Errorf("the last snapshot's manifest version of %v is not the published version %d", versions, st.Version)
	}
	var during []uint64
	backlog := -1
	for i, v := range versions {
		if v > vDown && v < vUp {
			during = append(during, v)
		}
		if v >= vUp && i > 0 && versions[i-1] <= vDown {
			backlog = i
		}
	}
	if len(during) > 0 {
		t.Errorf("snapshots of versions %v, made while the catalog was down (%d < v < %d)", during, vDown, vUp)
	}
	if backlog < 0 {
		t.Errorf("no one snapshot carried the backlog: none of version ≥ %d right after one ≤ %d (%v)", vUp, vDown, versions)
	}
	if len(versions) >= int(m.Version) {
		t.Errorf("%d snapshots for %d manifest versions: nothing coalesced", len(versions), m.Version)
	}

	files := changeFiles(m, faultTable)
	if st.Files != len(files) {
		t.Errorf("the changelog has %d files, the manifest %d change files", st.Files, len(files))
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	want := duckChangeRows(t, e, paths, false)
	ib := readIcebird(t, mods, st.Metadata)
	compareRows(t, "the changelog after the outage", icebirdRows(ib.Rows), want)
	if n := w.stop(); len(want) < n {
		t.Errorf("the changelog holds %d change rows, the workload made %d changes besides the snapshot", len(want), n)
	}
	d.stop()
	s.check()
}

// catalogFront stands in front of a REST catalog server on a port of its
// own, which it can take down (the listener and every open connection
// closed: the port refuses) and bring back on the same port.
type catalogFront struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	to   *url.URL
	srv  *http.Server
}

func newCatalogFront(t *testing.T) *catalogFront {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &catalogFront{t: t, addr: ln.Addr().String()}
	f.serve(ln)
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.srv != nil {
			f.srv.Close()
		}
	})
	return f
}

// URL is the catalog's base URI, as the daemon's configuration names it.
func (f *catalogFront) URL() string { return "http://" + f.addr }

// target sets the server the front passes requests to.
func (f *catalogFront) target(to string) {
	u, err := url.Parse(to)
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.to = u
}

func (f *catalogFront) serve(ln net.Listener) {
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		f.mu.Lock()
		to := f.to
		f.mu.Unlock()
		r.SetURL(to)
	}}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go srv.Serve(ln)
}

// down closes the listener and every connection.
func (f *catalogFront) down() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.srv.Close()
	f.srv = nil
}

// up listens again on the same port.
func (f *catalogFront) up() {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		f.t.Fatalf("the catalog front cannot listen on %s again: %v", f.addr, err)
	}
	f.serve(ln)
}

// confirmedLSN is the slot's confirmed_flush_lsn.
func confirmedLSN(t *testing.T, e *env) cdc.LSN {
	t.Helper()
	var s string
	if err := e.conn.QueryRow(context.Background(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&s); err != nil {
		t.Fatal(err)
	}
	lsn, err := cdc.ParseLSN(s)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// waitPublished waits until the daemon's metrics say the catalog holds the
// manifest's version as it was at the call, or a later one, with no lag.
func waitPublished(t *testing.T, e *env, base string, timeout time.Duration) {
	t.Helper()
	want := e.manifest().Version
	var published, lag float64
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		fams := scrape(t, base)
		published = gauge(fams, "pgcdc_catalog_published_version", map[string]string{"table": faultTable})
		lag = gauge(fams, "pgcdc_catalog_lag_versions", nil)
		if published >= float64(want) && lag == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the catalog did not catch up within %s: published version %v, lag %v versions, want version %d and lag 0", timeout, published, lag, want)
}

// iceWorkload writes to the fault tests' table from its own connection
// until stopped: an insert every tick, an update of a recent row every
// third and a delete every fifth, each its own transaction.
type iceWorkload struct {
	t       *testing.T
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
	changes int
	err     error
}

func startIceWorkload(t *testing.T, e *env, from int, every time.Duration) *iceWorkload {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &iceWorkload{t: t, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := from; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			stmts := []string{fmt.Sprintf(`INSERT INTO ice VALUES (%d, %d, 'row %d')`, i, int64(i)*10000000000, i)}
			if i%3 == 0 {
				stmts = append(stmts, fmt.Sprintf(`UPDATE ice SET title = 'updated %d', big = NULL WHERE id = %d`, i, i-2))
			}
			if i%5 == 0 {
				stmts = append(stmts, fmt.Sprintf(`DELETE FROM ice WHERE id = %d`, i-4))
			}
			for _, q := range stmts {
				if _, err := conn.Exec(ctx, q); err != nil {
					if ctx.Err() == nil {
						w.err = fmt.Errorf("workload %q: %w", q, err)
					}
					return
				}
				w.changes++
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the workload (once; later calls wait for nothing) and returns
// how many changes it committed.
func (w *iceWorkload) stop() int {
	w.once.Do(func() {
		w.cancel()
		<-w.done
		if w.err != nil {
			w.t.Error(w.err)
		}
	})
	return w.changes
}

// icebergMetadata is what the tests read of an Iceberg table's metadata
// JSON.
type icebergMetadata struct {
	LastSequenceNumber int64             `json:"last-sequence-number"`
	CurrentSnapshotID  int64             `json:"current-snapshot-id"`
	Snapshots          []icebergSnapshot `json:"snapshots"`
}

// icebergSnapshot is a snapshot in an Iceberg table's metadata.
type icebergSnapshot struct {
	SnapshotID     int64             `json:"snapshot-id"`
	SequenceNumber int64             `json:"sequence-number"`
	TimestampMs    int64             `json:"timestamp-ms"`
	Summary        map[string]string `json:"summary"`
}

// readIcebergMetadata reads the metadata file at a file:// location.
func readIcebergMetadata(t *testing.T, location string) icebergMetadata {
	t.Helper()
	data, err := os.ReadFile(strings.TrimPrefix(location, "file://"))
	if err != nil {
		t.Fatalf("read Iceberg metadata %s: %v", location, err)
	}
	var m icebergMetadata
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("Iceberg metadata %s: %v", location, err)
	}
	return m
}

// sorted are the snapshots in commit order.
func (m icebergMetadata) sorted() []icebergSnapshot {
	s := slices.Clone(m.Snapshots)
	slices.SortFunc(s, func(a, b icebergSnapshot) int {
		return cmpInt(a.SequenceNumber, b.SequenceNumber)
	})
	return s
}

// versions are the snapshots' pgcdc.manifest-version, in commit order.
func (m icebergMetadata) versions(t *testing.T) []uint64 {
	t.Helper()
	var out []uint64
	for _, s := range m.sorted() {
		v := catalog.VersionOf(s.Summary)
		if v == 0 {
			t.Errorf("snapshot %d has no %s: %v", s.SnapshotID, catalog.SummaryManifestVersion, s.Summary)
		}
		out = append(out, v)
	}
	return out
}

// icebirdRows are rows icebird read, in canonical form, sorted.
func icebirdRows(rows []map[string]any) []string {
	var out []string
	for _, r := range rows {
		out = append(out, canonRow(faultCols, func(c iceCol) any { return r[c.name] }))
	}
	slices.Sort(out)
	return out
}

// duckChangeRows reads the sink's files with DuckDB: their rows in
// canonical form, sorted; live drops the rows whose __op is D (a state
// table's masked tombstones).
func duckChangeRows(t *testing.T, e *env, paths []string, live bool) []string {
	t.Helper()
	if len(paths) == 0 {
		return nil
	}
	quoted := make([]string, len(paths))
	for i, p := range paths {
		quoted[i] = sqlString(filepath.Join(e.sink, p))
	}
	names := make([]string, len(faultCols))
	for i, c := range faultCols {
		names[i] = c.name
	}
	q := "SELECT " + strings.Join(names, ", ") + " FROM read_parquet([" + strings.Join(quoted, ", ") + "], union_by_name = true)"
	if live {
		q += " WHERE __op <> 'D'"
	}
	db := openDuck(t)
	defer db.Close()
	res, err := db.Query(q)
	if err != nil {
		t.Fatalf("duckdb read of %d files: %v", len(paths), err)
	}
	defer res.Close()
	var out []string
	for res.Next() {
		vals := make([]any, len(faultCols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := res.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, canonRow(faultCols, func(c iceCol) any { return vals[slices.Index(names, c.name)] }))
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// compareRows fails the test when got (icebird's) and want (the sink's)
// differ, naming the first difference.
func compareRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	for _, r := range append(slices.Clone(want), got...) {
		if strings.Contains(r, "=?") {
			t.Fatalf("%s: a value of unexpected type (marked ?kind:type:value): %s", what, r)
		}
	}
	if slices.Equal(got, want) {
		return
	}
	for i := 0; i < max(len(got), len(want)); i++ {
		g, w := "(none)", "(none)"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("%s: icebird read %d rows, the files hold %d; first difference at row %d (sorted):\n icebird %s\n    sink %s", what, len(got), len(want), i, g, w)
			return
		}
	}
}
