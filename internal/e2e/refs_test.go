package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/refs"
	"github.com/pg-cdc/pg-cdc/internal/sinktest"
)

// refsTables are the tables TestRefsManualPromotion captures: the
// workload's three and ledger, whose changes the test makes itself, so
// that the diff's counts are known exactly.
var refsTables = []string{"public.customers", "public.items", "public.ledger", "public.orders"}

// TestRefsManualPromotion: with promotion.mode manual, main stays where the
// daemon first set it while staging follows every flush; query --as-of main
// reads that old state exactly, staging and a plain query the newest; diff
// main staging counts what the workload did between them; promote
// --dry-run judges and moves nothing, promote moves main; a dropped column
// makes the next promotion breaking, refused (exit 2) until --force, and
// audited; a lost refs file is written again by the next flush.
func TestRefsManualPromotion(t *testing.T) {
	waitBound(t) // mostly waiting for flushes and the follower
	// Compaction inside start is off: it commits versions of its own,
	// which staging follows, between the test's read of staging and
	// promote.
	e := newEnv(t, envOptions{extraYAML: "promotion:\n  mode: manual\ncompaction:\n  interval: 0s\n"})
	seed(t, e, 60, 80)
	e.exec(`CREATE TABLE ledger (id int PRIMARY KEY, v text NOT NULL);
	        INSERT INTO ledger SELECT g, 'v' || g FROM generate_series(1, 20) g`)
	e.mustRun("init")

	// S0: the source as init captured it; nothing writes until main is set.
	s0 := e.snapshotSource(refsTables)

	s := e.startSampler()
	d := e.start()
	e.waitFor("the daemon to write refs with main and staging", 90*time.Second, func() bool {
		r, err := e.readRefs()
		if err != nil {
			return false
		}
		_, okm := r.Branch(refs.Main)
		_, oks := r.Branch(refs.Staging)
		return okm && oks
	})
	first := e.refsCLI()
	main0 := first.Branches[refs.Main]
	if main0.By != "follow" {
		t.Errorf("main was first set by %q, want follow", main0.By)
	}
	if st := first.Branches[refs.Staging]; st.ManifestVersion < main0.ManifestVersion {
		t.Errorf("staging (version %d) is behind main (version %d)", st.ManifestVersion, main0.ManifestVersion)
	}
	t.Logf("main first set at version %d (epoch %d)", main0.ManifestVersion, main0.Epoch)

	// The workload: random changes to the three workload tables, and on
	// ledger 7 keys inserted, 3 deleted, 5 changed, and two changes that
	// cancel out (an update undone, a row inserted then deleted).
	w := runWorkloadFor(e.url, 3, 5*time.Second)
	e.exec(`INSERT INTO ledger SELECT g, 'new' || g FROM generate_series(100, 106) g`)
	e.exec(`UPDATE ledger SET v = v || '-changed' WHERE id BETWEEN 1 AND 5`)
	e.exec(`DELETE FROM ledger WHERE id BETWEEN 10 AND 12`)
	e.exec(`UPDATE ledger SET v = 'tmp' WHERE id = 6`)
	e.exec(`INSERT INTO ledger VALUES (200, 'gone soon')`)
	// main must stay while staging follows the flushes.
	seen := map[uint64]bool{}
	for {
		if r, err := e.readRefs(); err == nil {
			if b, _ := r.Branch(refs.Main); b.ManifestVersion != main0.ManifestVersion {
				t.Fatalf("main moved to version %d during the workload (manual mode); it was at %d", b.ManifestVersion, main0.ManifestVersion)
			}
			b, _ := r.Branch(refs.Staging)
			seen[b.ManifestVersion] = true
		}
		select {
		case <-w.done:
		case <-time.After(100 * time.Millisecond):
			continue
		}
		break
	}
	w.wait(t)
	e.exec(`UPDATE ledger SET v = 'v6' WHERE id = 6`)
	e.exec(`DELETE FROM ledger WHERE id = 200`)
	touchAll(e)
	e.waitCaughtUp(90 * time.Second)
	if len(seen) < 2 {
		t.Errorf("staging was seen at %d version(s) during the workload, want it to follow the flushes", len(seen))
	}
	s1 := e.snapshotSource(refsTables)
	stagingNow := e.waitStagingAtManifest()

	at := e.refsCLI()
	if b := at.Branches[refs.Main]; b.ManifestVersion != main0.ManifestVersion || b.By != "follow" {
		t.Errorf("after the workload main is at version %d (by %q), want %d where it was first set", b.ManifestVersion, b.By, main0.ManifestVersion)
	}
	if b := at.Branches[refs.Staging]; b.ManifestVersion < stagingNow.ManifestVersion {
		t.Errorf("refs shows staging at version %d, the refs file at %d", b.ManifestVersion, stagingNow.ManifestVersion)
	}

	// main reads S0 exactly; staging and a plain query (the newest
	// manifest version) read S1.
	e.assertStateAt("main", s0)
	e.assertStateAt("staging", s1)
	e.assertStateAt("", s1)

	// diff main staging: per table, what changed from S0 to S1.
	df := e.diffJSON(refs.Main, refs.Staging)
	if df.Verdict != refs.Safe {
		t.Errorf("diff main staging: verdict %s, want safe (rows only)", df.Verdict)
	}
	if df.From.Version != main0.ManifestVersion {
		t.Errorf("diff main staging: from version %d, want main's %d", df.From.Version, main0.ManifestVersion)
	}
	for _, table := range refsTables {
		want := s0[table].countsTo(s1[table])
		got := df.counts(table)
		if got.Counts != want {
			t.Errorf("diff main staging: %s %+v, want %+v (from the source's states)", table, got.Counts, want)
		}
		if len(got.Schema) > 0 {
			t.Errorf("diff main staging: %s reports schema changes %v; the workload made none", table, got.Schema)
		}
	}
	if got := df.counts("public.ledger").Counts; got != (refs.Counts{Inserted: 7, Deleted: 3, Changed: 5}) {
		t.Errorf("diff main staging: public.ledger %+v, want 7 inserted, 3 deleted, 5 changed", got)
	}
	text := e.mustRun("diff", "main", "staging")
	for _, want := range []string{"public.ledger", "verdict: safe"} {
		if !strings.Contains(text, want) {
			t.Errorf("diff main staging (text) lacks %q:\n%s", want, text)
		}
	}

	// promote --dry-run judges and moves nothing.
	out := e.mustRun("promote", "--dry-run")
	for _, want := range []string{"verdict: safe", "dry run: main not moved", "public.ledger"} {
		if !strings.Contains(out, want) {
			t.Errorf("promote --dry-run lacks %q:\n%s", want, out)
		}
	}
	if b := e.refsCLI().Branches[refs.Main]; b.ManifestVersion != main0.ManifestVersion {
		t.Fatalf("promote --dry-run moved main to version %d (it was at %d)", b.ManifestVersion, main0.ManifestVersion)
	}

	// promote moves main to staging.
	staging1 := e.refsCLI().Branches[refs.Staging]
	out = e.mustRun("promote")
	to := promotedTo(t, out)
	if !strings.Contains(out, "verdict: safe") || to < staging1.ManifestVersion {
		t.Errorf("promote output does not say main moved to staging's version (%d or later) with a safe verdict:\n%s", staging1.ManifestVersion, out)
	}
	staging1.ManifestVersion = to
	e.assertAudited(out, "promote", "ok", 0)
	promoted := e.refsCLI().Branches[refs.Main]
	if promoted.ManifestVersion != staging1.ManifestVersion || !strings.HasPrefix(promoted.By, "promote ") {
		t.Fatalf("after promote main is at version %d by %q, want staging's version %d by promote <user>", promoted.ManifestVersion, promoted.By, staging1.ManifestVersion)
	}
	e.assertStateAt("main", s1)
	if out := e.mustRun("promote", "--dry-run"); !strings.Contains(out, "verdict: no_change") {
		t.Errorf("promote --dry-run right after a promotion (no change since) does not say no_change:\n%s", out)
	}

	// A breaking change: a column dropped, then rows flushed.
	e.exec(`ALTER TABLE customers DROP COLUMN active`)
	e.exec(`INSERT INTO customers VALUES (900001, 'after the drop', 1, now())`)
	e.exec(`UPDATE ledger SET v = 'after the drop' WHERE id = 1`)
	e.waitCaughtUp(90 * time.Second)
	s2 := e.snapshotSource(refsTables)
	e.waitStagingAtManifest()
	if b := e.refsCLI().Branches[refs.Main]; b.ManifestVersion != promoted.ManifestVersion {
		t.Fatalf("main moved to version %d after the schema change; it was promoted to %d", b.ManifestVersion, promoted.ManifestVersion)
	}
	// main still reads the promoted state, with the dropped column.
	e.assertStateAt("main", s1)
	if out := e.mustRun("promote", "--dry-run"); !strings.Contains(out, "verdict: breaking") {
		t.Errorf("promote --dry-run after a dropped column does not say breaking:\n%s", out)
	}
	code, out := e.run("promote")
	if code != 2 {
		t.Errorf("promote of a breaking change exited %d, want 2:\n%s", code, out)
	}
	for _, want := range []string{"public.customers", `"active"`, "dropped", "--force"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refused promotion's message lacks %q:\n%s", want, out)
		}
	}
	e.assertAudited(out, "promote", "error", 2)
	if b := e.refsCLI().Branches[refs.Main]; b.ManifestVersion != promoted.ManifestVersion {
		t.Fatalf("a refused promotion moved main to version %d (it was at %d)", b.ManifestVersion, promoted.ManifestVersion)
	}
	staging2 := e.refsCLI().Branches[refs.Staging]
	out = e.mustRun("promote", "--force")
	// Staging follows the manifest, which an idle advance may move on
	// between the read above and the promotion: main takes staging's
	// version at the promotion, which the output names.
	to = promotedTo(t, out)
	if !strings.Contains(out, "verdict: breaking") || to < staging2.ManifestVersion {
		t.Errorf("promote --force does not say main moved to staging's version (%d or later) with a breaking verdict:\n%s", staging2.ManifestVersion, out)
	}
	staging2.ManifestVersion = to
	e.assertAudited(out, "promote", "ok", 0)
	if !strings.Contains(auditLine(out, "end"), "--force") {
		t.Errorf("the audit record of promote --force does not show --force in its args:\n%s", out)
	}
	forced := e.refsCLI().Branches[refs.Main]
	if forced.ManifestVersion != staging2.ManifestVersion {
		t.Fatalf("after promote --force main is at version %d, want staging's %d", forced.ManifestVersion, staging2.ManifestVersion)
	}
	e.assertStateAt("main", s2)

	// A lost refs write: the file corrupted, then deleted, while the daemon
	// runs; each time the next flush must write it again, staging at the
	// newest version and main where it was promoted (the refs file is the
	// only record of a manual main). A plain query reads the newest manifest
	// version and needs no refs file.
	refsPath := filepath.Join(e.sink, filepath.FromSlash(refs.Key))
	for i, damage := range []string{"corrupted", "deleted"} {
		var err error
		if damage == "corrupted" {
			err = os.WriteFile(refsPath, []byte(`{"format_version": 1, "branches": {"main": `), 0o644)
		} else if err = os.Remove(refsPath); os.IsNotExist(err) {
			err = nil
		}
		if err != nil {
			t.Fatal(err)
		}
		e.exec(`INSERT INTO ledger VALUES ($1, 'after the refs were lost')`, 300+i)
		e.waitCaughtUp(90 * time.Second)
		m := e.manifest()
		e.assertStateAt("", e.snapshotSource([]string{"public.ledger"}))
		repaired := false
		deadline := time.Now().Add(30 * time.Second)
		for !repaired && time.Now().Before(deadline) {
			if r, err := e.readRefs(); err == nil {
				b, ok := r.Branch(refs.Staging)
				repaired = ok && b.ManifestVersion >= m.Version
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !repaired {
			data, _ := os.ReadFile(refsPath)
			code, out := e.run("refs")
			t.Errorf("refs %s: not written again within 30s of a flush (manifest version %d); the file holds %q; pg-cdc refs exits %d:\n%s",
				damage, m.Version, data, code, out)
			continue
		}
		l := e.refsCLI()
		if b := l.Branches[refs.Staging]; b.ManifestVersion < m.Version {
			t.Errorf("refs %s: staging repaired at version %d, want the newest, %d", damage, b.ManifestVersion, m.Version)
		}
		if b := l.Branches[refs.Main]; b.ManifestVersion != forced.ManifestVersion {
			t.Errorf("refs %s: the repair put main at version %d (by %q); it was promoted to %d, and in manual mode only promote moves it",
				damage, b.ManifestVersion, b.By, forced.ManifestVersion)
		}
	}

	s3 := e.snapshotSource(refsTables)
	e.assertStateAt("staging", s3)
	d.stop()
	s.check()
	assertSinkEqualsSource(t, e, refsTables...)
}

// readRefs reads the sink's refs file as stored.
func (e *env) readRefs() (*refs.Refs, error) {
	data, err := os.ReadFile(filepath.Join(e.sink, filepath.FromSlash(refs.Key)))
	if err != nil {
		return nil, err
	}
	return refs.Decode(data)
}

// refsList is pg-cdc refs --format json.
type refsList struct {
	Branches map[string]refs.Branch `json:"branches"`
}

// refsCLI reads the branches through pg-cdc refs.
func (e *env) refsCLI() refsList {
	e.t.Helper()
	var l refsList
	e.runJSON(&l, "refs", "--format", "json", "--tags", "0")
	return l
}

// waitStagingAtManifest waits until the refs file's staging names the
// sink's current manifest version (or a newer one) and returns it.
func (e *env) waitStagingAtManifest() refs.Branch {
	e.t.Helper()
	want := e.manifest().Version
	var b refs.Branch
	e.waitFor(fmt.Sprintf("staging to follow the manifest to version %d", want), 60*time.Second, func() bool {
		r, err := e.readRefs()
		if err != nil {
			return false
		}
		b, _ = r.Branch(refs.Staging)
		return b.ManifestVersion >= want
	})
	return b
}

// tableState is one table of the source at a moment: its columns, rows
// (sinktest.SourceRows), and each key's row as PostgreSQL's JSON, for the
// diff's counts.
type tableState struct {
	table string
	mt    *manifest.Table
	cols  []string
	rows  [][]any
	byKey map[string]string
}

// snapshotSource records the tables' states in the source; the daemon
// must hold them (e.waitCaughtUp) for the manifest's columns to be theirs.
func (e *env) snapshotSource(tables []string) map[string]*tableState {
	e.t.Helper()
	m := e.manifest()
	out := map[string]*tableState{}
	for _, table := range tables {
		mt := m.Tables[table]
		if mt == nil {
			e.t.Fatalf("table %s is not in the manifest", table)
		}
		st := &tableState{table: table, mt: mt, cols: mergesql.Columns(mt), byKey: map[string]string{}}
		st.rows = sinktest.SourceRows(e.t, e.url, table, st.cols, mt.PrimaryKey)
		keys := make([]string, len(mt.PrimaryKey))
		for i, k := range mt.PrimaryKey {
			keys[i] = "t." + mergesql.Ident(k)
		}
		rows, err := e.conn.Query(context.Background(), fmt.Sprintf("SELECT json_build_array(%s)::text, row_to_json(t)::text FROM %s.%s t",
			strings.Join(keys, ", "), mergesql.Ident(mt.Schema), mergesql.Ident(mt.Name)))
		if err != nil {
			e.t.Fatal(err)
		}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				e.t.Fatal(err)
			}
			st.byKey[k] = v
		}
		if err := rows.Err(); err != nil {
			e.t.Fatal(err)
		}
		out[table] = st
	}
	return out
}

// countsTo counts the keys inserted, deleted and changed from st to later.
func (st *tableState) countsTo(later *tableState) refs.Counts {
	var c refs.Counts
	for k, v := range later.byKey {
		old, ok := st.byKey[k]
		switch {
		case !ok:
			c.Inserted++
		case old != v:
			c.Changed++
		}
	}
	for k := range st.byKey {
		if _, ok := later.byKey[k]; !ok {
			c.Deleted++
		}
	}
	return c
}

// assertStateAt checks that pg-cdc query --as-of point (none: a plain
// query) returns exactly the recorded state of each table.
func (e *env) assertStateAt(point string, state map[string]*tableState) {
	e.t.Helper()
	for _, table := range slices.Sorted(maps.Keys(state)) {
		st := state[table]
		quoted := make([]string, len(st.cols))
		for i, c := range st.cols {
			quoted[i] = mergesql.Ident(c)
		}
		sql := fmt.Sprintf("SELECT %s FROM %s.%s", strings.Join(quoted, ", "), mergesql.Ident(st.mt.Schema), mergesql.Ident(st.mt.Name))
		args := []string{"--format", "json", sql}
		if point != "" {
			args = append([]string{"--as-of", point}, args...)
		}
		qcols, rows, err := sinktest.QueryJSON(e.queryOut(args...))
		if err != nil {
			e.t.Fatalf("pg-cdc query %v: %v", args, err)
		}
		name := point
		if name == "" {
			name = "(no --as-of)"
		}
		if !slices.Equal(qcols, st.cols) {
			e.t.Fatalf("query --as-of %s: %s has the columns %v, want %v", name, table, qcols, st.cols)
		}
		if len(st.rows) == 0 {
			e.t.Errorf("query --as-of %s: %s was empty in the source; the comparison proves nothing", name, table)
		}
		if !sinktest.AssertSameRows(e.t, st.rows, rows, st.cols) {
			e.t.Errorf("query --as-of %s: %s differs from the source's state recorded for it (above)", name, table)
		}
	}
}

// diffOut is pg-cdc diff --format json.
type diffOut struct {
	From struct {
		Version uint64 `json:"manifest_version"`
	} `json:"from"`
	To struct {
		Version uint64 `json:"manifest_version"`
	} `json:"to"`
	Verdict refs.Verdict       `json:"verdict"`
	Tables  []refs.TableChange `json:"tables"`
}

func (d diffOut) counts(table string) refs.TableChange {
	for _, c := range d.Tables {
		if c.Table == table {
			return c
		}
	}
	return refs.TableChange{Table: table}
}

func (e *env) diffJSON(from, to string) diffOut {
	e.t.Helper()
	var d diffOut
	e.runJSON(&d, "diff", from, to, "--format", "json")
	return d
}

// auditLine is the audit record of the phase (begin, end) in a command's
// output, or "".
func auditLine(out, phase string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "audit=true") && strings.Contains(l, "phase="+phase) {
			return l
		}
	}
	return ""
}

// assertAudited checks that a command's output holds its audit records:
// a begin, and an end with the result and exit code.
func (e *env) assertAudited(out, action, result string, code int) {
	e.t.Helper()
	begin, end := auditLine(out, "begin"), auditLine(out, "end")
	if !strings.Contains(begin, "action="+action) {
		e.t.Errorf("no audit record action=%s phase=begin in:\n%s", action, out)
	}
	for _, want := range []string{"action=" + action, "result=" + result, fmt.Sprintf("exit_code=%d", code), "user="} {
		if !strings.Contains(end, want) {
			e.t.Errorf("the audit end record lacks %q: %q\n%s", want, end, out)
		}
	}
}

// runJSON runs a pg-cdc command that writes JSON on its standard output
// and decodes it into v; a non-zero exit fails the test with both streams.
func (e *env) runJSON(v any, args ...string) {
	e.t.Helper()
	cmd := exec.Command(binary, append([]string{"-c", e.config}, args...)...)
	cmd.Env = append(append(os.Environ(), quietMetrics), e.procEnv...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		e.t.Fatalf("pg-cdc %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	if err := json.Unmarshal([]byte(stdout.String()), v); err != nil {
		e.t.Fatalf("pg-cdc %v: %v\n%s", args, err, stdout.String())
	}
}

// promotedTo is the version promote says it moved main to.
func promotedTo(t *testing.T, out string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`main → version (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("promote does not say which version main moved to:\n%s", out)
	}
	v, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
