package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/generation"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/pgtest"
	"github.com/pg-cdc/pg-cdc/internal/sinktest"
)

var workloadTables = []string{"public.customers", "public.orders", "public.items"}

// streamBriefly runs start with a short workload, waits until the manifest
// holds all of it, and stops cleanly.
func streamBriefly(t *testing.T, e *env, seedN int64) {
	t.Helper()
	d := e.start()
	e.waitSlotActive(60 * time.Second)
	w := runWorkloadFor(e.url, seedN, 2*time.Second)
	w.wait(t)
	touchAll(e)
	e.waitCaughtUp(60 * time.Second)
	d.stop()
}

// rebuildAndStream runs rebuild, checks the manifest it switched to, then
// streams a workload from the new slot under the LSN sampler and compares
// the merged state with the source.
func rebuildAndStream(t *testing.T, e *env, wantState string, args ...string) {
	t.Helper()
	before := e.manifest()
	out := e.mustRun(append([]string{"rebuild"}, args...)...)
	if !strings.Contains(out, "rebuilt: slot") || !strings.Contains(out, wantState) {
		t.Fatalf("rebuild output does not report the slot as %q:\n%s", wantState, out)
	}
	after := e.manifest()
	checkSwitched(t, e, before, after)
	var confirmed string
	if err := e.conn.QueryRow(context.Background(), "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&confirmed); err != nil {
		t.Fatalf("the rebuilt slot: %v", err)
	}
	if confirmed != after.EndLSN.String() {
		t.Errorf("the new slot is confirmed at %s, the manifest's end LSN is %s: start would refuse or skip", confirmed, after.EndLSN)
	}
	// The merged state of the new generation alone is the source (nothing
	// was written since the rebuild's snapshot).
	assertSinkEqualsSource(t, e, workloadTables...)

	s := e.startSampler()
	d := e.start()
	e.waitSlotActive(60 * time.Second)
	w := runWorkloadFor(e.url, 97, 3*time.Second)
	w.wait(t)
	touchKey(e, -2)
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	s.check()
	assertSinkEqualsSource(t, e, workloadTables...)
}

// rebuildUnderWrites is rebuildAndStream with the workload running from
// before the rebuild until after start caught up: the copy under the
// exported snapshot and the stream from the new slot's consistent point
// must meet with no gap and no overlap.
func rebuildUnderWrites(t *testing.T, e *env, wantState string) {
	t.Helper()
	before := e.manifest()
	w := runWorkloadFor(e.url, 61, 6*time.Second)
	out := e.mustRun("rebuild")
	if !strings.Contains(out, "rebuilt: slot") || !strings.Contains(out, wantState) {
		t.Fatalf("rebuild output does not report the slot as %q:\n%s", wantState, out)
	}
	checkSwitched(t, e, before, e.manifest())
	s := e.startSampler()
	d := e.start()
	e.waitSlotActive(60 * time.Second)
	if n := w.wait(t); n < 10 {
		t.Fatalf("the workload committed %d transactions; too few to prove anything", n)
	}
	touchKey(e, -2)
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	s.check()
	assertSinkEqualsSource(t, e, workloadTables...)
}

// checkSwitched: every table of after is at the generation after before's,
// with a base, no deltas, files that exist and carry the new generation;
// the old generation's files are garbage; the epoch moved on by one.
func checkSwitched(t *testing.T, e *env, before, after *manifest.Manifest) {
	t.Helper()
	e.mirror() // an object store's files, for the checks below
	if after.Epoch != before.Epoch+1 {
		t.Errorf("the rebuild wrote epoch %d after %d, want one more", after.Epoch, before.Epoch)
	}
	garbage := map[string]bool{}
	for _, g := range after.Garbage {
		garbage[g.Path] = true
	}
	for key, old := range before.Tables {
		nt := after.Tables[key]
		want, _ := manifest.NextGeneration(old.Generation)
		if nt == nil || nt.Generation != want {
			t.Errorf("table %s after the rebuild: %+v, want generation %s", key, nt, want)
			continue
		}
		if nt.Base == nil || len(nt.Deltas) != 0 || nt.Snapshot.LSN != after.EndLSN {
			t.Errorf("table %s: base %+v, %d deltas, snapshot at %s; want a base at the end LSN %s and no deltas", key, nt.Base, len(nt.Deltas), nt.Snapshot.LSN, after.EndLSN)
		}
		for _, f := range old.Files() {
			if !garbage[f.Path] {
				t.Errorf("table %s: file %s of the old generation is not in the garbage list", key, f.Path)
			}
		}
	}
	if bad := generationProblems(e, after); len(bad) > 0 {
		t.Errorf("the switched manifest: %s", strings.Join(bad, "; "))
	}
	// The generation's record (design.md §2) agrees with the manifest.
	for key, nt := range after.Tables {
		data, err := os.ReadFile(filepath.Join(e.sink, generation.RecordKey(nt.Generation)))
		if err != nil {
			t.Fatalf("generation record: %v", err)
		}
		var rec generation.Record
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("generation record: %v", err)
		}
		if rec.Epoch != after.Epoch || rec.ConsistentPoint != after.EndLSN || rec.Tables[key].Rows != nt.Base.RowCount ||
			rec.Previous[key] != before.Tables[key].Generation {
			t.Errorf("generation record %s for table %s: %+v; manifest epoch %d, end LSN %s, base rows %d", nt.Generation, key, rec, after.Epoch, after.EndLSN, nt.Base.RowCount)
		}
	}
}

// generationProblems lists what a reader of m would trip over: a table
// whose files are not all of its own generation, or a file that does not
// exist.
func generationProblems(e *env, m *manifest.Manifest) []string {
	var bad []string
	for key, mt := range m.Tables {
		prefix := fmt.Sprintf("%s/%s/%s/", manifest.EscapeKeyElement(mt.Schema), manifest.EscapeKeyElement(mt.Name), mt.Generation)
		for _, f := range mt.Files() {
			if !strings.HasPrefix(f.Path, prefix) {
				bad = append(bad, fmt.Sprintf("table %s (generation %s) names %s", key, mt.Generation, f.Path))
			}
			if _, err := os.Stat(filepath.Join(e.sink, f.Path)); err != nil {
				bad = append(bad, fmt.Sprintf("table %s names %s: %v", key, f.Path, err))
			}
		}
	}
	return bad
}

// TestSlotInvalidatedByMaxSlotWALKeepSize: WAL the slot needs is removed
// while pg-cdc is stopped (max_slot_wal_keep_size); start exits 10 naming
// the slot and rebuild; rebuild recovers.
func TestSlotInvalidatedByMaxSlotWALKeepSize(t *testing.T) {
	// Its own server: the setting would invalidate other tests' slots.
	cluster := pgtest.New(t)
	e := newEnv(t, envOptions{cluster: cluster})
	seed(t, e, 50, 100)
	e.mustRun("init")
	streamBriefly(t, e, 21)

	e.exec("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'")
	e.exec("SELECT pg_reload_conf()")
	// Each switch starts a new 16 MB segment; a few of them put the slot's
	// restart point more than 1 MB behind, and a checkpoint removes it.
	// Rounds until it does: the checkpointer reads the reloaded setting in
	// its own time.
	round := 0
	e.waitFor("the slot to be invalidated", 60*time.Second, func() bool {
		round++
		e.exec("INSERT INTO customers VALUES ($1, 'wal filler', 0, now(), true)", 900000+round)
		e.exec("SELECT pg_switch_wal()")
		e.exec("CHECKPOINT")
		var status string
		if err := e.conn.QueryRow(context.Background(), "SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&status); err != nil {
			t.Fatal(err)
		}
		return status == "lost"
	})
	e.exec("ALTER SYSTEM RESET max_slot_wal_keep_size")
	e.exec("SELECT pg_reload_conf()")

	code, out := e.run("start")
	if code != 10 || !strings.Contains(out, e.slot) || !strings.Contains(out, "pg-cdc rebuild") || !strings.Contains(out, "wal_status lost") {
		t.Fatalf("start on an invalidated slot exited %d, want 10 naming the slot, its state and pg-cdc rebuild:\n%s", code, lines(withoutDebug(out), 10))
	}
	rebuildUnderWrites(t, e, "invalidated")
}

// TestSlotAdvancedPastManifest: an operator advances the slot by hand while
// pg-cdc is stopped; the changes in between are gone, so start exits 11,
// and rebuild recovers.
func TestSlotAdvancedPastManifest(t *testing.T) {
	e := newEnv(t, envOptions{})
	seed(t, e, 50, 100)
	e.mustRun("init")
	streamBriefly(t, e, 31)
	e.exec("UPDATE customers SET name = 'skipped by the advance' WHERE id <= 20")
	waitSlotReleased(e)
	e.exec("SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", e.slot)

	code, out := e.run("start")
	if code != 11 || !strings.Contains(out, e.slot) || !strings.Contains(out, "pg-cdc rebuild") {
		t.Fatalf("start on an advanced slot exited %d, want 11 naming the slot and pg-cdc rebuild:\n%s", code, lines(withoutDebug(out), 10))
	}

	if out := e.mustRun("status"); !strings.Contains(out, "confirmed past the manifest's end LSN") || !strings.Contains(out, "'pg-cdc rebuild' recovers") {
		t.Errorf("status does not point at rebuild for a slot ahead of the manifest:\n%s", out)
	}

	// A rebuild killed after its copy, before its switch: readers and the
	// manifest are untouched, the new slot is ahead of the manifest (start
	// exits 11 again), and the next rebuild starts over.
	before, err := e.manifestBytes()
	if err != nil {
		t.Fatal(err)
	}
	if code, out := e.runEnv(e.config, []string{"PGCDC_FAILPOINTS=rebuild/before-switch=kill"}, "rebuild"); code != 137 {
		t.Fatalf("rebuild with a kill before its switch exited %d, want 137:\n%s", code, lines(withoutDebug(out), 10))
	}
	if after, _ := e.manifestBytes(); string(after) != string(before) {
		t.Fatal("a rebuild killed before its switch changed the manifest")
	}
	if code, out := e.run("start"); code != 11 {
		t.Fatalf("start after a killed rebuild exited %d, want 11:\n%s", code, lines(withoutDebug(out), 10))
	}
	waitSlotReleased(e)
	rebuildAndStream(t, e, "past the manifest's end LSN")
}

// TestRebuildReadersSeeOneGeneration pauses rebuild between its copy and
// its switch, and reads the sink throughout: every manifest version names,
// per table, files of one generation that all exist, and its merged state is
// either the old state (before the switch) or the new one (after). Meanwhile
// start is refused; rebuild is refused while start runs; gc removes the old
// generation after the grace period.
func TestRebuildReadersSeeOneGeneration(t *testing.T) {
	e := newEnv(t, envOptions{extraYAML: "gc:\n  grace_period: 1s\nhistory:\n  retention: 1s\n"})
	seed(t, e, 50, 100)
	e.mustRun("init")
	streamBriefly(t, e, 41)
	assertSinkEqualsSource(t, e, workloadTables...)
	oldCols, oldRows := map[string][]string{}, map[string][][]any{}
	for _, table := range workloadTables {
		oldCols[table], oldRows[table] = sinktest.MergedRows(t, e.sink, table)
	}
	oldManifest := e.manifest()

	dropSlot(e)
	// Changes the old generation never sees: only the new one holds them.
	e.exec(`UPDATE customers SET name = 'after the slot was lost' WHERE id <= 10;
	        DELETE FROM orders WHERE id <= 5;
	        INSERT INTO items VALUES (777, 1, gen_random_uuid(), 7, 7.5)`)

	watch := watchManifest(e)
	r := e.startCommand([]string{"PGCDC_FAILPOINTS=rebuild/before-switch=stop"}, "rebuild")
	e.waitFor("rebuild to pause before its switch", 90*time.Second, func() bool { return processStopped(r) })

	// Loaded and validated, not switched: the new generation's files exist,
	// readers see the old generation, whole.
	for _, table := range workloadTables {
		mt := oldManifest.Tables[table]
		next, _ := manifest.NextGeneration(mt.Generation)
		dir := filepath.Join(e.sink, mt.Schema, mt.Name, next, "base")
		if entries, err := os.ReadDir(filepath.Join(dir, "00000000")); err != nil || len(entries) == 0 {
			t.Errorf("table %s: no new generation's base files in %s while rebuild pauses: %v", table, dir, err)
		}
		cols, rows := sinktest.MergedRows(t, e.sink, table)
		if strings.Join(cols, ",") != strings.Join(oldCols[table], ",") {
			t.Fatalf("table %s: columns %v while rebuild pauses, %v before", table, cols, oldCols[table])
		}
		sinktest.AssertSameRows(t, oldRows[table], rows, cols)
	}
	if code, out := e.run("start"); code != 15 {
		t.Errorf("start while rebuild runs exited %d, want 15 (sink locked):\n%s", code, lines(withoutDebug(out), 10))
	}

	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(120 * time.Second); code != 0 {
		t.Fatalf("rebuild exited %d:\n%s", code, lines(withoutDebug(r.out.String()), 20))
	}
	versions := watch.stop(t)
	if len(versions) != 2 {
		t.Errorf("saw %d manifest versions during the rebuild, want 2 (the old one, the switched one)", len(versions))
	}
	checkSwitched(t, e, oldManifest, e.manifest())
	// The new state: the source as the rebuild's snapshot saw it, which is
	// the source now (nothing was written since).
	assertSinkEqualsSource(t, e, workloadTables...)

	d := e.start()
	e.waitSlotActive(60 * time.Second)
	if code, out := e.run("rebuild"); code != 15 {
		t.Errorf("rebuild while start runs exited %d, want 15:\n%s", code, lines(withoutDebug(out), 10))
	}
	w := runWorkloadFor(e.url, 43, 2*time.Second)
	w.wait(t)
	touchKey(e, -3)
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	assertSinkEqualsSource(t, e, workloadTables...)

	// The workload took longer than gc.grace_period (1 s): compact's gc
	// deletes the old generation.
	e.mustRun("compact")
	for _, table := range workloadTables {
		mt := oldManifest.Tables[table]
		for _, f := range mt.Files() {
			if _, err := os.Stat(filepath.Join(e.sink, f.Path)); err == nil {
				t.Errorf("table %s: %s of the old generation is still there after gc", table, f.Path)
			}
		}
	}
}

// TestRebuildNewUpstream: the configured address now reaches another
// server. start exits 12; rebuild refuses too (12) unless told
// --accept-new-upstream, and then recovers onto the new upstream.
func TestRebuildNewUpstream(t *testing.T) {
	e := newEnv(t, envOptions{})
	seed(t, e, 30, 60)
	e.mustRun("init")
	streamBriefly(t, e, 51)
	old := e.manifest().Source

	// Another server with the same tables behind the URL the config names.
	other := pgtest.New(t)
	url := other.CreateDatabase(t)
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, []byte(strings.Replace(string(cfg), e.url, url, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	e.conn.Close(context.Background())
	e.url, e.conn = url, conn
	seed(t, e, 40, 80)

	if code, out := e.run("start"); code != 12 {
		t.Fatalf("start against another server exited %d, want 12:\n%s", code, lines(withoutDebug(out), 10))
	}
	code, out := e.run("rebuild")
	if code != 12 || !strings.Contains(out, "--accept-new-upstream") {
		t.Fatalf("rebuild against another server without --accept-new-upstream exited %d, want 12 naming the flag:\n%s", code, lines(withoutDebug(out), 10))
	}
	if src := e.manifest().Source; src != old {
		t.Fatalf("a refused rebuild changed the manifest's source: %+v, was %+v", src, old)
	}
	rebuildAndStream(t, e, "missing", "--accept-new-upstream")
	if src := e.manifest().Source; src.SystemIdentifier == old.SystemIdentifier {
		t.Errorf("the manifest still names system %s after rebuilding onto another server", src.SystemIdentifier)
	}
}

// waitSlotReleased waits until the walsender of the pg-cdc that just
// stopped has let go of the slot: PostgreSQL marks it inactive only when
// that backend exits, a moment after pg-cdc does, and refuses to drop or
// advance an active slot.
func waitSlotReleased(e *env) {
	e.t.Helper()
	e.waitFor("the slot to be released", 30*time.Second, func() bool {
		var active bool
		err := e.conn.QueryRow(context.Background(), "SELECT active FROM pg_replication_slots WHERE slot_name = $1", e.slot).Scan(&active)
		return err == nil && !active
	})
}

// dropSlot drops the test's slot once it is released.
func dropSlot(e *env) {
	e.t.Helper()
	waitSlotReleased(e)
	e.exec("SELECT pg_drop_replication_slot($1)", e.slot)
}

// TestRebuildOnS3: on an object store there is no writer lock; a start
// streaming from the slot makes rebuild refuse (exit 15, naming the PID),
// and a rebuild after the slot was dropped recovers as on a filesystem.
func TestRebuildOnS3(t *testing.T) {
	e := newEnv(t, envOptions{sink: "s3"})
	seed(t, e, 30, 60)
	e.mustRun("init")
	d := e.start()
	e.waitSlotActive(60 * time.Second)
	if code, out := e.run("rebuild"); code != 15 || !strings.Contains(out, "in use by PID") {
		t.Fatalf("rebuild while start streams exited %d, want 15 naming the PID:\n%s", code, lines(withoutDebug(out), 10))
	}
	e.exec("INSERT INTO customers VALUES (5000, 'late', 1, now(), true)")
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	dropSlot(e)
	rebuildAndStream(t, e, "missing")
}

// TestRebuildTableTruncatedAfterCopy: TRUNCATE is not MVCC-safe, so once
// a table copied by rebuild is truncated, the exported snapshot reads it
// empty and cannot confirm the copy. Rebuild still counts the files, says
// the table was not compared, and switches; start applies the TRUNCATE
// from the stream, and the merged state equals the source.
func TestRebuildTableTruncatedAfterCopy(t *testing.T) {
	e := newEnv(t, envOptions{})
	seed(t, e, 30, 60)
	e.mustRun("init")
	streamBriefly(t, e, 71)
	dropSlot(e)

	r := e.startCommand([]string{"PGCDC_FAILPOINTS=rebuild/after-copy=stop"}, "rebuild")
	e.waitFor("rebuild to pause after its copy", 60*time.Second, func() bool { return processStopped(r) })
	e.exec("TRUNCATE items")
	e.exec("INSERT INTO items VALUES (888, 1, gen_random_uuid(), 1, 1.5)")
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(60 * time.Second); code != 0 {
		t.Fatalf("rebuild exited %d:\n%s", code, lines(withoutDebug(r.out.String()), 20))
	}
	if out := r.out.String(); !strings.Contains(out, "not compared with the source") || !strings.Contains(out, "public.items") {
		t.Fatalf("rebuild does not say items was not compared:\n%s", lines(withoutDebug(out), 20))
	}
	s := e.startSampler()
	d := e.start()
	e.waitCaughtUp(60 * time.Second)
	d.stop()
	s.check()
	assertSinkEqualsSource(t, e, workloadTables...)
}

// touchKey is touchAll with another key, for a second workload in one
// test: every workload table holds a row afterwards.
func touchKey(e *env, id int) {
	e.t.Helper()
	e.exec(`INSERT INTO customers VALUES ($1, 'last', 0, now(), true)`, id)
	e.exec(`INSERT INTO orders VALUES ($1, -1, 0, 'last', '{}', now(), 'last')`, id)
	e.exec(`INSERT INTO items VALUES ($1, -1, gen_random_uuid(), 0, 0)`, id)
}

// processStopped reports whether the process is stopped (SIGSTOP, a
// failpoint's stop action).
func processStopped(d *daemon) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(f) > 0 && f[0] == "T"
}

// manifestWatch reads the manifest every few milliseconds and checks each
// version it has not seen yet as a reader would use it.
type manifestWatch struct {
	e        *env
	stopc    chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	versions map[[32]byte]bool
	bad      []string
}

func watchManifest(e *env) *manifestWatch {
	w := &manifestWatch{e: e, stopc: make(chan struct{}), done: make(chan struct{}), versions: map[[32]byte]bool{}}
	go func() {
		defer close(w.done)
		for {
			w.look()
			select {
			case <-w.stopc:
				w.look()
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	e.t.Cleanup(func() {
		select {
		case <-w.stopc:
		default:
			close(w.stopc)
		}
		<-w.done
	})
	return w
}

func (w *manifestWatch) look() {
	data, err := w.e.manifestBytes()
	if err != nil {
		w.record("read manifest: " + err.Error())
		return
	}
	sum := sha256.Sum256(data)
	w.mu.Lock()
	seen := w.versions[sum]
	w.versions[sum] = true
	w.mu.Unlock()
	if seen {
		return
	}
	m, err := manifest.Decode(data)
	if err != nil {
		w.record("decode manifest: " + err.Error())
		return
	}
	for _, p := range generationProblems(w.e, m) {
		w.record(fmt.Sprintf("epoch %d: %s", m.Epoch, p))
	}
}

func (w *manifestWatch) record(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.bad) < 10 {
		w.bad = append(w.bad, s)
	}
}

// stop ends the watch, fails the test on any problem seen, and returns the
// distinct versions.
func (w *manifestWatch) stop(t *testing.T) map[[32]byte]bool {
	t.Helper()
	close(w.stopc)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.bad {
		t.Errorf("a reader of the sink during the rebuild: %s", b)
	}
	return w.versions
}
