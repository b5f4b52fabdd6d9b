// TestIcebergExpiryVsGC found that garbage collection kept a retired file
// for history.retention + snapshot_max_age only, while the publisher
// expires a table's snapshots only when it commits to it and
// snapshot_min_keep keeps the newest ones whatever their age: an idle
// table kept a snapshot naming deleted files. Garbage collection now keeps
// every file a retained snapshot names (catalog.Publisher.Referenced).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/catalog"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestIcebergExpiryVsGC runs compactions and garbage collections beside a
// daemon that publishes to the embedded SQL catalog, with every window
// short (history.retention 2s, catalog.iceberg.snapshot_max_age 2s and
// snapshot_min_keep 2, gc.grace_period 1s, so garbage collection keeps a
// retired file 4 s), while a workload writes; then it reads every Iceberg
// snapshot the changelog's and the state table's metadata still hold with
// icebird, each by its id: every file it names exists, and its rows are
// those files' rows read by DuckDB, value by value (a state snapshot's
// without the base's tombstones, which its position deletes mask), no row
// newer than its pgcdc.lsn. The newest changelog snapshot holds the
// manifest's change files. Expiry must have happened (fewer snapshots
// retained than committed) and garbage collection must have deleted
// retired files some snapshot named, so a collection that deleted a file a
// retained snapshot names would fail the test.
func TestIcebergExpiryVsGC(t *testing.T) {
	waitBound(t)
	mods := ensureIcebird(t)
	e := newEnv(t, envOptions{extraYAML: `catalog:
  type: iceberg
  iceberg:
    commit_interval: 0s
    snapshot_max_age: 2s
    snapshot_min_keep: 2
history:
  retention: 2s
gc:
  grace_period: 1s
`})
	e.exec(`CREATE TABLE ice (id int PRIMARY KEY, big bigint, title text)`)
	e.exec(`INSERT INTO ice SELECT g, g * 10000000000, 'row ' || g FROM generate_series(1, 50) g`)
	runTimed(t, e, time.Minute, "init")
	s := e.startSampler()
	d := e.start()
	base := "http://" + metricsAddr(t, d)
	w := startIceWorkload(t, e, 1000, 60*time.Millisecond)

	// Every file a manifest listed, to tell which ones GC deleted.
	seen := map[string]bool{}
	note := func() {
		m := e.manifest()
		for _, f := range manifestFiles(m) {
			seen[f] = true
		}
	}
	deletedRE := regexp.MustCompile(`garbage: (\d+) retired`)
	gcDeleted := 0
	compact := func() {
		out := runTimed(t, e, time.Minute, "compact")
		if m := deletedRE.FindStringSubmatch(out); m != nil {
			n, _ := strconv.Atoi(m[1])
			gcDeleted += n
		}
	}
	for round := range 4 {
		time.Sleep(2 * time.Second)
		note()
		compact()
		note()
		t.Logf("round %d: compacted at manifest version %d, %d retired files deleted so far", round, e.manifest().Version, gcDeleted)
	}
	// The stream goes idle after a last compaction; past the retention one
	// change makes the publisher drop the folded deltas from the changelog
	// (and expire), then the table is idle again, its snapshot before the
	// drop kept by snapshot_min_keep; past KeepRetired a last collection
	// deletes those deltas. Every retained snapshot must still be readable.
	w.stop()
	e.waitCaughtUp(30 * time.Second)
	waitPublished(t, e, base, 30*time.Second)
	note()
	compact()
	time.Sleep(2500 * time.Millisecond)
	e.exec(`UPDATE ice SET title = 'after the last compaction' WHERE id = 7`)
	e.waitCaughtUp(30 * time.Second)
	waitPublished(t, e, base, 30*time.Second)
	note()
	time.Sleep(4500 * time.Millisecond)
	compact()
	note()
	s.check()
	// The last compaction's base makes the daemon replace the state table
	// and expire what that leaves: read the snapshots once it has, or a
	// status read before it names snapshots the expiry removes.
	waitCatalogSettled(t, e, 30*time.Second)
	checkRetained(t, e, mods, "idle after the last collection")

	// Changes again, the folded ones past the retention: the newest
	// changelog snapshot holds the manifest's change files exactly.
	e.exec(`UPDATE ice SET title = 'later' WHERE id = 8`)
	e.waitCaughtUp(30 * time.Second)
	time.Sleep(2500 * time.Millisecond)
	e.exec(`DELETE FROM ice WHERE id = 9`)
	e.waitCaughtUp(30 * time.Second)
	waitPublished(t, e, base, 30*time.Second)
	d.stop()
	runTimed(t, e, time.Minute, "catalog", "sync")
	status := checkRetained(t, e, mods, "at the end")
	m := e.manifest()
	var paths []string
	for _, f := range changeFiles(m, faultTable) {
		paths = append(paths, f.Path)
	}
	st := changelogStatus(t, status.Tables)
	compareRows(t, st.Iceberg+" now", icebirdRows(readIcebird(t, mods, st.Metadata).Rows), duckChangeRows(t, e, paths, false))

	var gone []string
	for f := range seen {
		if _, err := os.Stat(filepath.Join(e.sink, f)); errors.Is(err, os.ErrNotExist) {
			gone = append(gone, f)
		}
	}
	t.Logf("garbage collection deleted %d retired files (%d of the %d files manifests listed are gone)", gcDeleted, len(gone), len(seen))
	if gcDeleted == 0 || len(gone) == 0 {
		t.Errorf("garbage collection deleted no retired file (%d reported, %d gone): the test proves nothing about what it keeps", gcDeleted, len(gone))
	}
	s.check()
}

// checkRetained reads every snapshot the changelog's and the state table's
// metadata hold with icebird (TestIcebergExpiryVsGC) and returns the
// catalog status it read the metadata locations from.
func checkRetained(t *testing.T, e *env, mods, when string) (status struct {
	ManifestVersion uint64                `json:"manifest_version"`
	Tables          []catalog.TableStatus `json:"tables"`
}) {
	t.Helper()
	status = catalogStatus(t, e)
	kinds := map[catalog.Kind]bool{}
	for _, ts := range status.Tables {
		if ts.Err != "" {
			t.Errorf("catalog status of %s (%s) %s: error %q", ts.Iceberg, ts.Kind, when, ts.Err)
			continue
		}
		kinds[ts.Kind] = true
		meta := readIcebergMetadata(t, ts.Metadata)
		committed := meta.LastSequenceNumber
		t.Logf("%s %s: %d snapshots retained of %d committed (manifest versions %v)", ts.Iceberg, when, len(meta.Snapshots), committed, meta.versions(t))
		if int64(len(meta.Snapshots)) >= committed {
			t.Errorf("%s retains %d snapshots of %d committed %s: none expired", ts.Iceberg, len(meta.Snapshots), committed, when)
		}
		for _, snap := range meta.sorted() {
			what := fmt.Sprintf("%s snapshot %d %s (manifest version %s, sequence %d)", ts.Iceberg, snap.SnapshotID, when, snap.Summary[catalog.SummaryManifestVersion], snap.SequenceNumber)
			ib := readIcebirdSnapshot(t, mods, ts.Metadata, snap.SnapshotID)
			var data, deletes, missing []string
			for _, f := range ib.Files {
				p := strings.TrimPrefix(f.Path, "file://")
				if _, err := os.Stat(p); err != nil {
					missing = append(missing, p)
				}
				if f.Content == 0 {
					data = append(data, strings.TrimPrefix(p, e.sink+"/"))
				} else {
					deletes = append(deletes, p)
				}
			}
			if len(missing) > 0 {
				t.Errorf("%s names %d missing files (garbage collection deleted them while the snapshot is retained): %v", what, len(missing), missing)
				continue
			}
			if ib.ReadError != "" && len(ib.Files) == 0 && strings.Contains(ib.ReadError, "No data manifest files") {
				// An empty snapshot (every change file left the
				// changelog with the retention): icebird 0.3.1 refuses
				// to read one; there is nothing in it to compare.
				continue
			}
			if ib.ReadError != "" {
				t.Errorf("icebird cannot read %s: %s", what, ib.ReadError)
				continue
			}
			// A state snapshot with a delete file masks its base's
			// tombstones. One without holds every row of its files: a
			// replacement of the state table commits two snapshots, the
			// base's files, then the delete file masking its tombstones
			// (only the second is ever current).
			masked := ts.Kind == catalog.KindState && len(deletes) > 0
			got := icebirdRows(ib.Rows)
			compareRows(t, what, got, duckChangeRows(t, e, data, masked))
			if ts.Kind == catalog.KindChangelog && len(deletes) > 0 {
				t.Errorf("%s has delete files %v: a changelog has none", what, deletes)
			}
			if ts.Kind == catalog.KindState && snap.SnapshotID == meta.CurrentSnapshotID {
				for _, r := range ib.Rows {
					if r["__op"] == "D" {
						t.Errorf("the current %s holds a tombstone, unmasked: %v", what, r)
						break
					}
				}
			}
			lsn, err := cdc.ParseLSN(snap.Summary[catalog.SummaryLSN])
			if err != nil {
				t.Errorf("%s: summary %s %q: %v", what, catalog.SummaryLSN, snap.Summary[catalog.SummaryLSN], err)
				continue
			}
			for _, r := range ib.Rows {
				if n, err := strconv.ParseUint(canon("int", r["__lsn"]), 10, 64); err != nil || cdc.LSN(n) > lsn {
					t.Errorf("%s holds a row of LSN %v past its %s %s", what, r["__lsn"], catalog.SummaryLSN, lsn)
					break
				}
			}
		}
	}
	if !kinds[catalog.KindChangelog] || !kinds[catalog.KindState] {
		t.Errorf("catalog status %s lists %v, want a changelog and a state table", when, kinds)
	}
	return status
}

// icebirdSnapshot is what scripts/icebird-read.mjs prints for a snapshot.
type icebirdSnapshot struct {
	Rows  []map[string]any `json:"rows"`
	Files []struct {
		Path    string `json:"path"`
		Content int    `json:"content"`
	} `json:"files"`
	ReadError string `json:"read_error"`
}

// readIcebirdSnapshot reads one snapshot of the table at a metadata
// location with icebird: the files it names and its rows.
func readIcebirdSnapshot(t *testing.T, mods, metadata string, id int64) icebirdSnapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(repoRoot(t), "scripts", "icebird-read.mjs"), mods, metadata, strconv.FormatInt(id, 10))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("icebird read of snapshot %d of %s: %v\n%s", id, metadata, err, stderr.String())
	}
	var out icebirdSnapshot
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("icebird read of snapshot %d of %s: %v\n%s", id, metadata, err, stderr.String())
	}
	return out
}

// waitCatalogSettled waits until every Iceberg table is in sync with the
// manifest and its metadata location stays the same across two reads of
// catalog status a second apart: the daemon has published the newest
// version and expired what it retires. Iceberg metadata read before an
// expiry may name snapshots whose manifests it deletes, as for any
// Iceberg reader.
func waitCatalogSettled(t *testing.T, e *env, timeout time.Duration) {
	t.Helper()
	var last []catalog.TableStatus
	locations := func() (string, bool) {
		var b strings.Builder
		last = catalogStatus(t, e).Tables
		for _, ts := range last {
			if ts.Err != "" || ts.Drift == nil {
				return "", false
			}
			if d := *ts.Drift; !d.InSync() {
				if ts.Kind == catalog.KindChangelog && !d.Missing && d.Add == 0 && !d.Schema {
					// A changelog drops a folded file once it is past
					// the retention, at its next publication: on an
					// idle table that waits for the next change (or a
					// sync), so publish it now, as an operator would.
					runTimed(t, e, time.Minute, "catalog", "sync")
				}
				return "", false
			}
			b.WriteString(ts.Metadata + "\n")
		}
		return b.String(), true
	}
	deadline := time.Now().Add(timeout)
	prev := ""
	for time.Now().Before(deadline) {
		cur, ok := locations()
		if ok && cur == prev {
			return
		}
		if !ok {
			cur = ""
		}
		prev = cur
		time.Sleep(time.Second)
	}
	var why []string
	for _, ts := range last {
		why = append(why, fmt.Sprintf("%s (%s): version %d, drift %+v, error %q", ts.Iceberg, ts.Kind, ts.Version, ts.Drift, ts.Err))
	}
	t.Fatalf("the catalog did not settle within %s; last status:\n%s", timeout, strings.Join(why, "\n"))
}
