package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// compactionYAML compacts every table with deltas every two seconds (the
// clock trigger; the size and count ones would wait for far more deltas).
const compactionYAML = `compaction:
  interval: 2s
  major_interval: 1s
gc:
  grace_period: 1s
history:
  retention: 1s
`

// TestCompactionBesideStreamer compacts every two seconds inside start while
// the workload updates and deletes the very keys being folded: the merged
// state (read by DuckDB) equals the source, the slot is never confirmed past
// the manifest, retired files are collected, and dump prints what
// PostgreSQL's own COPY prints. On the filesystem and on S3 (versitygw),
// where the compaction's manifest writes race the streamer's through
// If-Match.
func TestCompactionBesideStreamer(t *testing.T) {
	for _, sink := range []string{"filesystem", "s3"} {
		t.Run(sink, func(t *testing.T) { compactionBesideStreamer(t, sink) })
	}
}

func compactionBesideStreamer(t *testing.T, sink string) {
	opts := envOptions{extraYAML: compactionYAML}
	if sink != "filesystem" {
		opts.sink = sink
	}
	e := newEnv(t, opts)
	seed(t, e, 50, 100)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	w := runWorkloadFor(e.url, 3, 12*time.Second)
	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(60 * time.Second)
	// One more compaction after the last change, so the end state is read
	// from a base as well as from deltas.
	start := time.Now()
	e.waitFor("a compaction after the workload", 30*time.Second, func() bool {
		b := e.manifest().Tables["public.orders"].Base
		return b != nil && b.CompactedAt != nil && b.CompactedAt.After(start)
	})
	d.stop()
	s.check()

	out := d.out.String()
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `msg="compacted table"`) && strings.Contains(l, "table=public.orders ") {
			n++
		}
	}
	if n < 3 {
		t.Errorf("orders was compacted %d times while the workload ran; want several", n)
	}
	if !strings.Contains(out, `msg="collected garbage"`) {
		t.Error("no garbage was collected")
	}
	if strings.Contains(out, "compaction failed") || strings.Contains(out, "compaction pass failed") {
		t.Errorf("a compaction failed:\n%s", lines(withoutDebug(out), 40))
	}
	m := e.manifest()
	for _, table := range []string{"public.customers", "public.orders", "public.items"} {
		if b := m.Tables[table].Base; b == nil || b.CompactedAt == nil || len(b.SortedBy) == 0 {
			t.Errorf("%s: no compacted base: %+v", table, b)
		}
	}
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
	assertNoUnreferencedFiles(t, e, m)
	assertDumpEqualsCopy(t, e, "public.customers", "SELECT * FROM customers ORDER BY id")
}

// TestKillAtEachCompactionStep kills `pg-cdc compact` at each step (after
// the new base is uploaded, after the manifest commit, in the middle of
// deleting retired files) while the streamer and the workload go on; the
// next compaction converges and nothing is lost or resurrected.
func TestKillAtEachCompactionStep(t *testing.T) {
	for _, fp := range []string{
		"compact/after-base",     // base files written, manifest not
		"compact/after-manifest", // manifest committed, old files still listed
		"gc/delete",              // some retired files deleted, the list not yet trimmed
	} {
		t.Run(fp, func(t *testing.T) {
			e := newEnv(t, envOptions{extraYAML: "gc:\n  grace_period: 1s\nhistory:\n  retention: 1s\n"})
			seed(t, e, 50, 100)
			e.mustRun("init")
			s := e.startSampler()
			d := e.start()
			w := runWorkloadFor(e.url, 5, 8*time.Second)
			e.waitProgress(e.manifest().EndLSN, 30*time.Second)
			kill := fp + "=kill@1"
			if fp == "gc/delete" {
				// Retire files first, let them age past the grace period,
				// then die after the first deletion of the next pass.
				e.mustRun("compact")
				e.waitProgress(e.manifest().EndLSN, 30*time.Second)
				time.Sleep(1100 * time.Millisecond)
				kill = fp + "=kill@2"
			}
			code, out := e.runEnv(e.config, []string{"PGCDC_FAILPOINTS=" + kill}, "compact")
			if code != 137 {
				t.Fatalf("expected the failpoint to kill compact (exit 137), got %d:\n%s", code, out)
			}
			// The sink is consistent right after the kill, while the
			// streamer keeps writing.
			e.waitCaughtUp(60 * time.Second)
			assertManifestFilesExist(t, e)

			time.Sleep(1100 * time.Millisecond) // past the grace period
			out = e.mustRun("compact")
			if !strings.Contains(out, "public.orders: base of epoch") {
				t.Errorf("the rerun did not compact orders:\n%s", out)
			}
			w.wait(t)
			touchAll(e)
			e.waitCaughtUp(60 * time.Second)
			e.mustRun("compact")
			d.stop()
			s.check()
			m := e.manifest()
			if n := len(m.Tables["public.orders"].Deltas); n != 0 {
				t.Errorf("orders has %d deltas after a final compaction with the streamer stopped", n)
			}
			assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
			time.Sleep(1100 * time.Millisecond)
			e.mustRun("compact") // nothing to fold; collects what the last one retired
			assertNoUnreferencedFiles(t, e, e.manifest())
		})
	}
}

// assertManifestFilesExist checks that every file the manifest names is in
// the sink: no step of compaction or collection deleted a live file.
func assertManifestFilesExist(t *testing.T, e *env) {
	t.Helper()
	m := e.manifest()
	var stored map[string]bool // the object store's keys, when the sink is one
	if e.store != nil {
		objs, err := e.store.List(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		stored = map[string]bool{}
		for _, o := range objs {
			stored[o.Key] = true
		}
	}
	for name, mt := range m.Tables {
		var files []manifest.File
		if mt.Base != nil {
			files = append(files, mt.Base.Files...)
		}
		for _, d := range mt.Deltas {
			files = append(files, d.Files...)
		}
		for _, f := range files {
			if stored != nil {
				if !stored[f.Path] {
					t.Fatalf("%s: the manifest names %s, which is not in the store", name, f.Path)
				}
				continue
			}
			if _, err := os.Stat(filepath.Join(e.sink, filepath.FromSlash(f.Path))); err != nil {
				t.Fatalf("%s: the manifest names %s, which is gone: %v", name, f.Path, err)
			}
		}
	}
}

// assertNoUnreferencedFiles checks that every data file in the sink is one
// the manifest references or still lists as retired (in garbage, or held
// by a fold).
func assertNoUnreferencedFiles(t *testing.T, e *env, m *manifest.Manifest) {
	t.Helper()
	known := map[string]bool{}
	for _, g := range m.Garbage {
		known[g.Path] = true
	}
	for _, mt := range m.Tables {
		if mt.Base != nil {
			for _, f := range mt.Base.Files {
				known[f.Path] = true
			}
		}
		for _, d := range mt.Deltas {
			for _, f := range d.Files {
				known[f.Path] = true
			}
		}
	}
	err := filepath.WalkDir(e.sink, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		rel, _ := filepath.Rel(e.sink, p)
		if _, folded := m.FoldedAt(filepath.ToSlash(rel)); !known[filepath.ToSlash(rel)] && !folded {
			t.Errorf("%s is neither referenced nor retired", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// assertDumpEqualsCopy compares `pg-cdc dump --format csv` with PostgreSQL's
// own CSV output of query (same column order, ordered by key).
func assertDumpEqualsCopy(t *testing.T, e *env, table, query string) {
	t.Helper()
	got := e.mustRun("dump", "--table", table, "--format", "csv")
	ctx := context.Background()
	if _, err := e.conn.Exec(ctx, "SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET extra_float_digits = 1"); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if _, err := e.conn.PgConn().CopyTo(ctx, &want, "COPY ("+query+") TO STDOUT WITH (FORMAT csv, HEADER)"); err != nil {
		t.Fatal(err)
	}
	if got != want.String() {
		t.Fatalf("dump of %s differs from PostgreSQL's COPY:\n got %d bytes: %s\nwant %d bytes: %s", table, len(got), lines(got, 5), want.Len(), lines(want.String(), 5))
	}
	if strings.Count(got, "\n") < 10 {
		t.Fatalf("dump of %s has too few rows to prove anything:\n%s", table, got)
	}
}

// TestCompactionAtDefaults runs start with compaction as it is by default
// (minor merges at fanout 8, majors by share and count), the interval
// shortened to 2 s so both kinds happen within the test, while the
// workload updates and deletes the keys being merged and folded: merged
// deltas appear (level ≥ 1), majors write bases, no table ever holds more
// delta files than max_delta_files plus a pass's flushes, no file a
// sampled version named is deleted inside the retention (the merges'
// inputs are listed nowhere), the metrics count both kinds, the slot is
// never confirmed past the manifest, and the sink equals the source, read
// by DuckDB.
func TestCompactionAtDefaults(t *testing.T) {
	// gc.grace_period 1s: a merge's inputs, listed nowhere, would be taken
	// for orphans and deleted at the first collection if the merged
	// deltas did not retire them for history.retention (7 days).
	e := newEnv(t, envOptions{extraYAML: "compaction:\n  interval: 2s\ngc:\n  grace_period: 1s\n"})
	seed(t, e, 50, 100)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	w := runWorkloadFor(e.url, 3, 40*time.Second)
	var maxFiles, maxLevel int
	seen := map[string]bool{} // every file a sampled version named
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		m := e.manifest()
		for _, f := range manifestFiles(m) {
			seen[f] = true
		}
		for _, mt := range m.Tables {
			files := 0
			for _, dl := range mt.Deltas {
				files += len(dl.Files)
				maxLevel = max(maxLevel, dl.Level)
			}
			maxFiles = max(maxFiles, files)
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(60 * time.Second)
	fams := scrape(t, "http://"+metricsAddr(t, d))
	minor := counter(fams, "pgcdc_compactions_total", map[string]string{"kind": "minor"})
	major := counter(fams, "pgcdc_compactions_total", map[string]string{"kind": "major"})
	d.stop()
	s.check()

	out := d.out.String()
	if !strings.Contains(out, `msg="merged deltas"`) || !strings.Contains(out, `msg="compacted table"`) {
		t.Errorf("want both minor merges and major compactions in the log:\n%s", lines(withoutDebug(out), 40))
	}
	if strings.Contains(out, "compaction failed") || strings.Contains(out, "compaction pass failed") {
		t.Errorf("a compaction failed:\n%s", lines(withoutDebug(out), 40))
	}
	if minor == 0 || major == 0 {
		t.Errorf("pgcdc_compactions_total: minor %v, major %v; want both > 0", minor, major)
	}
	if maxLevel < 1 {
		t.Errorf("no merged delta was ever seen in the manifest")
	}
	// 48 files start a major; a pass's 2 s add two flushes at most.
	if maxFiles > 48+4 {
		t.Errorf("a table held %d delta files; compaction should keep it at max_delta_files", maxFiles)
	}
	// The merged deltas' inputs are listed nowhere, yet nothing is
	// collected inside history.retention (7 days by default): every
	// version stays readable.
	m := e.manifest()
	if gone := missingFiles(t, e, seen); len(gone) > 0 {
		t.Errorf("%d files a manifest version named were deleted inside the retention: %v", len(gone), gone)
	}
	// Every major compaction of a table within the fold window extends
	// one fold: the manifest lists none of the files they retired.
	if len(m.Garbage) != 0 || len(m.Folds) == 0 || len(m.Folds) > len(m.Tables) {
		t.Errorf("after %v major compactions: %d garbage entries and %d folds for %d tables; want no entry and a fold a table at most", major, len(m.Garbage), len(m.Folds), len(m.Tables))
	}
	t.Logf("max delta files per table %d, max level %d, %v minor and %v major compactions, %d files named by some version, %d garbage entries, %d folds", maxFiles, maxLevel, minor, major, len(seen), len(m.Garbage), len(m.Folds))
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
	assertDumpEqualsCopy(t, e, "public.orders", "SELECT * FROM orders ORDER BY id")
}

// missingFiles lists the files of seen no longer in the sink.
func missingFiles(t *testing.T, e *env, seen map[string]bool) []string {
	t.Helper()
	var gone []string
	for f := range seen {
		if _, err := os.Stat(filepath.Join(e.sink, f)); errors.Is(err, os.ErrNotExist) {
			gone = append(gone, f)
		}
	}
	slices.Sort(gone)
	return gone
}

// TestKillDuringCompactionInsideStart kills start while its compaction
// runs: once between a minor merge's upload and its commit, once between
// a major compaction's new base and its commit, then with kill -9 at
// arbitrary moments, while the workload updates and deletes the keys being
// merged; each restart goes on from the manifest. The slot is never
// confirmed past the manifest, every file a manifest names exists, and
// the sink equals the source, read by DuckDB.
func TestKillDuringCompactionInsideStart(t *testing.T) {
	e := newEnv(t, envOptions{extraYAML: "compaction:\n  interval: 1s\n  minor_fanout: 2\n  major_min_bytes: 131072\n"})
	seed(t, e, 50, 100)
	e.mustRun("init")
	s := e.startSampler()
	w := runWorkloadFor(e.url, 3, 40*time.Second)
	for _, fp := range []string{"compact/minor-after-upload=kill@2", "compact/after-base=kill@1"} {
		d := e.start("PGCDC_FAILPOINTS=" + fp)
		if code := d.wait(90 * time.Second); code != 137 {
			t.Fatalf("%s: want the failpoint to kill start (exit 137), got %d:\n%s", fp, code, lines(d.out.String(), 30))
		}
		assertManifestFilesExist(t, e)
	}
	for range 3 {
		// Killed once it has committed a flush of its own, so each run
		// streams (and its compaction looks) before it dies.
		from := e.manifest().EndLSN
		d := e.start()
		e.waitProgress(from, 60*time.Second)
		d.kill()
		assertManifestFilesExist(t, e)
	}
	d := e.start()
	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(90 * time.Second)
	d.stop()
	s.check()
	assertSinkEqualsSource(t, e, "public.customers", "public.orders", "public.items")
	assertDumpEqualsCopy(t, e, "public.orders", "SELECT * FROM orders ORDER BY id")
}
