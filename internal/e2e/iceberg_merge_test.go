package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestIcebergChangelogAcrossMerges publishes a table's changelog while
// start's minor compaction merges its deltas (fanout 2, so merges reach
// several levels; majors kept out of reach): files the publisher already
// published are merged into one, and the changelog must swap them for it
// in one commit, never listing a change twice nor losing one. After a
// catalog sync, the changelog read by icebird holds exactly the rows of
// the manifest's change files read by DuckDB, value by value, and the
// slot is never confirmed past the manifest.
func TestIcebergChangelogAcrossMerges(t *testing.T) {
	waitBound(t)
	mods := ensureIcebird(t)
	e := newEnv(t, envOptions{extraYAML: `catalog:
  type: iceberg
  iceberg:
    commit_interval: 0s
compaction:
  interval: 1s
  minor_fanout: 2
  major_min_bytes: 1073741824
  max_delta_files: 100000
`})
	e.exec(`CREATE TABLE ice (id int PRIMARY KEY, big bigint, title text)`)
	e.exec(`INSERT INTO ice SELECT g, g * 10000000000, 'row ' || g FROM generate_series(1, 50) g`)
	runTimed(t, e, time.Minute, "init")
	s := e.startSampler()
	d := e.start()
	base := "http://" + metricsAddr(t, d)
	w := startIceWorkload(t, e, 1000, 150*time.Millisecond)
	maxLevel := 0
	e.waitFor("merges to reach level 3 while the publisher follows", 90*time.Second, func() bool {
		for _, dl := range e.manifest().Tables[faultTable].Deltas {
			maxLevel = max(maxLevel, dl.Level)
		}
		return maxLevel >= 3
	})
	w.stop()
	e.waitCaughtUp(30 * time.Second)
	waitPublished(t, e, base, 30*time.Second)
	d.stop()
	s.check()
	if !strings.Contains(d.out.String(), `msg="merged deltas"`) || maxLevel < 2 {
		t.Fatalf("no merges reached level 2 (max level seen %d): the test proves nothing", maxLevel)
	}

	runTimed(t, e, time.Minute, "catalog", "sync")
	status := catalogStatus(t, e)
	st := changelogStatus(t, status.Tables)
	if !st.Drift.InSync() || st.Err != "" {
		t.Fatalf("changelog after a sync: drift %+v, error %q", st.Drift, st.Err)
	}
	m := e.manifest()
	var paths []string
	for _, f := range changeFiles(m, faultTable) {
		paths = append(paths, f.Path)
	}
	if st.Files != len(paths) {
		t.Errorf("the changelog has %d files, the manifest %d change files (%v)", st.Files, len(paths), paths)
	}
	compareRows(t, st.Iceberg+" across merges", icebirdRows(readIcebird(t, mods, st.Metadata).Rows), duckChangeRows(t, e, paths, false))
	t.Logf("%d change files (merged up to level %d), %d changes written", len(paths), maxLevel, w.changes)
}
