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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/sinktest"
)

// historySQL reads both tables of the time-travel tests in one statement
// (the sink's DuckDB dialect); historySourceSQL is the same over the
// source, with every value as text.
const (
	historySQL = `SELECT 'acct' AS tbl, id, v, n FROM acct
UNION ALL SELECT 'notes', id, note, NULL FROM notes ORDER BY tbl, id`
	historySourceSQL = `SELECT tbl, id::text, v, n::text FROM (
  SELECT 'acct' AS tbl, id, v, n FROM acct
  UNION ALL SELECT 'notes', id, note, NULL FROM notes) s ORDER BY s.tbl, s.id`
)

// histPoint is one moment of the source's history, in every form a
// point can take, and the source's state then.
type histPoint struct {
	label string
	// whole says the point ends a flush: epoch, version and tag name it
	// too. An inside point (two transactions in one epoch, the point
	// between them) has only its lsn and time.
	whole   bool
	epoch   uint64
	version uint64
	tag     string
	lsn     cdc.LSN
	at      time.Time
	// before is the wall clock just before the transaction that the point
	// follows committed: while now - history.retention is before it, the
	// version current at the window's start is older than the point, so
	// the point must still be answered.
	before time.Time
	want   [][]string
	// files are the data files the manifest of the point's epoch named.
	files []string
}

func (p histPoint) forms() []string {
	f := []string{"lsn:" + p.lsn.String(), p.at.UTC().Format(time.RFC3339Nano)}
	if p.whole {
		f = append(f, fmt.Sprintf("epoch:%d", p.epoch), strconv.FormatUint(p.version, 10), p.tag)
	}
	return f
}

// TestTimeTravel reads the sink as of points of its history — a version,
// epoch:N, lsn:X/Y, a time and a tag at each flush's end, and lsn:/time
// points between two transactions of one flush — and checks each answer
// against the source's state recorded at that moment: before compaction,
// after a compaction (the history survives it), and after the early
// points have left history.retention (they exit 2 naming the window, the
// files only they used are deleted, the later points still answer).
func TestTimeTravel(t *testing.T) {
	if testing.Short() {
		t.Skip("waits past history.retention")
	}
	waitBound(t)
	// Long enough that the checks of a phase (a pg-cdc query per point
	// and form) end inside the window on a loaded machine too.
	const retention = 30 * time.Second
	e := newEnv(t, envOptions{extraYAML: fmt.Sprintf("gc:\n  grace_period: 1s\nhistory:\n  retention: %s\n", retention)})
	e.exec(`CREATE TABLE acct (id int PRIMARY KEY, v text, n bigint)`)
	e.exec(`CREATE TABLE notes (id int PRIMARY KEY, note text)`)
	e.exec(`INSERT INTO acct SELECT g, 'a' || g, g * 10 FROM generate_series(1, 40) g`)
	e.exec(`INSERT INTO notes SELECT g, 'n' || g FROM generate_series(1, 10) g`)
	e.mustRun("init")
	s := e.startSampler()
	d := e.start()
	e.waitCaughtUp(60 * time.Second)

	step := 0
	// change commits one transaction touching both tables (inserts,
	// updates, deletes), each different from the last.
	change := func() {
		step++
		k := step
		e.exec(fmt.Sprintf(`INSERT INTO acct VALUES (%[1]d + 100, 'new%[1]d', %[1]d * 1000);
UPDATE acct SET n = n + %[1]d, v = v || '.%[1]d' WHERE id %% 4 = %[1]d %% 4;
DELETE FROM acct WHERE id = %[1]d;
INSERT INTO notes VALUES (%[1]d + 5, 'note%[1]d') ON CONFLICT (id) DO UPDATE SET note = excluded.note || '!';
DELETE FROM notes WHERE id = %[1]d`, k))
	}
	// mark reads the source right after a commit: the position and time
	// (both at or past the commit's) and the state.
	mark := func(label string, before time.Time) histPoint {
		t.Helper()
		p := histPoint{label: label, before: before}
		var lsn string
		if err := e.conn.QueryRow(context.Background(), "SELECT pg_current_wal_lsn()::text, clock_timestamp()").Scan(&lsn, &p.at); err != nil {
			t.Fatal(err)
		}
		var err error
		if p.lsn, err = cdc.ParseLSN(lsn); err != nil {
			t.Fatal(err)
		}
		p.want = historySource(t, e)
		return p
	}
	// flushed completes p once the daemon has flushed it, checking that the
	// transactions since from landed in exactly one new epoch.
	flushed := func(p *histPoint, from uint64) bool {
		t.Helper()
		e.waitCaughtUp(60 * time.Second)
		m := e.manifest()
		if m.Epoch != from+1 {
			t.Logf("%s: the epoch went from %d to %d, want one flush", p.label, from, m.Epoch)
			return false
		}
		p.whole, p.epoch, p.version, p.files = true, m.Epoch, m.Version, manifestFiles(m)
		return true
	}
	// boundary commits one change and returns the point at its flush's end.
	boundary := func(label string) histPoint {
		t.Helper()
		from := e.manifest().Epoch
		before := time.Now()
		change()
		p := mark(label, before)
		if !flushed(&p, from) {
			t.Fatalf("%s: the change did not land in one epoch", label)
		}
		return p
	}
	// inside commits two changes meant for one flush and returns the point
	// between them and the point after both (the flush's end).
	inside := func(label string) (histPoint, histPoint) {
		t.Helper()
		for attempt := 0; attempt < 4; attempt++ {
			from := e.manifest().Epoch
			before := time.Now()
			change()
			mid := mark(label+" (inside)", before)
			change()
			end := mark(label, before)
			if flushed(&end, from) {
				if slicesEqualRows(mid.want, end.want) {
					t.Fatal("the two changes of one epoch left the same state; the inside point proves nothing")
				}
				return mid, end
			}
			// A flush fell between the two: try again.
		}
		t.Fatalf("%s: two quick transactions never landed in one epoch", label)
		return histPoint{}, histPoint{}
	}
	tagsOf := func(points ...*histPoint) {
		t.Helper()
		tags := e.refTags()
		for _, p := range points {
			if !p.whole {
				continue
			}
			p.tag = tags[p.epoch]
			if p.tag == "" {
				t.Fatalf("%s: pg-cdc refs lists no tag for epoch %d: %v", p.label, p.epoch, tags)
			}
		}
	}

	// Phase 1: three flushes, the third holding two transactions.
	p1 := boundary("p1")
	p2 := boundary("p2")
	i1, p3 := inside("p3")
	early := []*histPoint{&p1, &p2, &i1, &p3}
	tagsOf(early...)
	checkPoints(t, e, retention, early, false)

	// A compaction folds every delta of phase 1 into a new base and
	// retires their files; a second one, past gc.grace_period, collects
	// none of them (history.retention keeps them): each point still reads
	// its own state.
	e.mustRun("compact")
	compacted := time.Now()
	m := e.manifest()
	for _, name := range []string{"public.acct", "public.notes"} {
		if mt := m.Tables[name]; mt == nil || len(mt.Deltas) != 0 || mt.Base == nil || mt.Base.CompactedAt == nil {
			t.Fatalf("%s was not compacted: %+v", name, mt)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	e.mustRun("compact")
	checkPoints(t, e, retention, early, true)

	// Phase 2, a while after the compaction, so that these points are
	// still inside the window once the compaction's files are old enough
	// to collect.
	time.Sleep(time.Until(compacted.Add(retention * 6 / 10)))
	i2, p4 := inside("p4")
	p5 := boundary("p5")
	late := []*histPoint{&i2, &p4, &p5}
	tagsOf(late...)

	// Past the retention of every phase-1 version and of the compaction's
	// retired files: more flushes, then compact collects.
	time.Sleep(time.Until(compacted.Add(retention + time.Second)))
	boundary("p6")
	gcAt := time.Now()
	out := e.mustRun("compact")
	t.Logf("compact %.1fs after the first one:\n%s", gcAt.Sub(compacted).Seconds(), lines(out, 10))
	if !gcAt.Add(-retention).After(p3.before) || !gcAt.Add(-retention).After(compacted) {
		t.Fatalf("the collection ran too early to prove anything (%s after the first compaction)", gcAt.Sub(compacted))
	}

	// The later points still answer exactly (asked first: they leave the
	// window in turn); the earliest is gone, in every form, with exit 2
	// naming the window.
	checkPoints(t, e, retention, append(late, &p2, &i1, &p3), true)
	for _, form := range p1.forms() {
		code, stdout, stderr := e.queryAsOf(form, historySQL)
		if code != 2 || !strings.Contains(stderr, "history.retention") || !strings.Contains(stderr, "before the oldest version") {
			t.Errorf("query --as-of %s (%s, older than every version history.retention keeps) exited %d, want 2 naming the window (exit-codes.md: asked again, a point outside the window exits 2):\n%s%s", form, p1.label, code, stdout, stderr)
		}
	}

	// GC actually deleted the files that only the expired versions named.
	cur := map[string]bool{}
	for _, f := range manifestFiles(e.manifest()) {
		cur[f] = true
	}
	gone := 0
	for _, f := range p1.files {
		_, err := os.Stat(filepath.Join(e.sink, filepath.FromSlash(f)))
		switch {
		case cur[f]:
			t.Logf("%s is still in the current manifest", f)
		case err == nil:
			t.Errorf("%s, named only by versions outside history.retention, was not collected", f)
		case errors.Is(err, os.ErrNotExist):
			gone++
		default:
			t.Fatal(err)
		}
	}
	if gone == 0 {
		t.Errorf("none of the %d files of %s was collected", len(p1.files), p1.label)
	}
	t.Logf("%d of %s's %d files collected", gone, p1.label, len(p1.files))
	d.stop()
	s.check()
}

// checkPoints asks pg-cdc query for the state as of each form of each
// point and compares it with the source's state then. A point must be
// answered while it is surely inside history.retention; once it may have
// left the window, it may instead exit 2 naming the window, but never
// answer otherwise (expired allows it; before any collection, nothing has
// left).
func checkPoints(t *testing.T, e *env, retention time.Duration, points []*histPoint, expired bool) {
	t.Helper()
	strict, n, began := 0, 0, time.Now()
	for _, p := range points {
		for _, form := range p.forms() {
			mustAnswer := !expired || time.Now().Add(-retention).Before(p.before)
			code, stdout, stderr := e.queryAsOf(form, historySQL)
			switch {
			case code == 0:
				_, rows, err := sinktest.QueryJSON([]byte(stdout))
				if err != nil {
					t.Fatalf("query --as-of %s: %v", form, err)
				}
				got := textRows(rows)
				if !slicesEqualRows(got, p.want) {
					t.Errorf("query --as-of %s (%s) answered\n%s\nwant the source's state then\n%s", form, p.label, renderRows(got), renderRows(p.want))
				}
				n++
				if mustAnswer {
					strict++
				}
			case code == 2 && !mustAnswer && strings.Contains(stderr, "history.retention"):
				t.Logf("query --as-of %s (%s): out of retention now", form, p.label)
			default:
				t.Errorf("query --as-of %s (%s) exited %d:\n%s%s", form, p.label, code, stdout, stderr)
			}
		}
	}
	if strict == 0 {
		t.Error("no point was surely inside history.retention when asked; the check proves nothing")
	}
	t.Logf("%d answers checked, %d of them surely inside history.retention, in %.1fs", n, strict, time.Since(began).Seconds())
}

// TestPinnedReaderDuringGC reads an old version over and over while
// compactions run and the version leaves history.retention: each answer
// is the version's exact state, or exit 3 saying the version's files were
// collected, or (once it has left) exit 2 naming the window — never fewer
// rows or another error.
func TestPinnedReaderDuringGC(t *testing.T) {
	if testing.Short() {
		t.Skip("waits past history.retention")
	}
	waitBound(t)
	const retention = 4 * time.Second
	e := newEnv(t, envOptions{extraYAML: "gc:\n  grace_period: 1s\nhistory:\n  retention: 4s\n"})
	e.exec(`CREATE TABLE pin (id int PRIMARY KEY, n bigint)`)
	e.exec(`INSERT INTO pin SELECT g, g FROM generate_series(1, 2000) g`)
	e.mustRun("init")
	d := e.start()
	k := 0
	change := func() {
		k++
		e.exec(fmt.Sprintf(`INSERT INTO pin SELECT g, g * %[1]d FROM generate_series(%[1]d * 10000, %[1]d * 10000 + 499) g;
UPDATE pin SET n = n + %[1]d WHERE id %% 7 = %[1]d %% 7;
DELETE FROM pin WHERE id %% 11 = %[1]d %% 11 AND id < 2000`, k))
	}
	const sql = "SELECT count(*), sum(n), min(id), max(id) FROM pin"
	answer := func() string {
		var c, s, lo, hi int64
		if err := e.conn.QueryRow(context.Background(), sql).Scan(&c, &s, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d %d %d %d", c, s, lo, hi)
	}
	for range 2 {
		change()
		e.waitCaughtUp(60 * time.Second)
	}
	m := e.manifest()
	old, want := m.Version, answer()
	oldFiles := manifestFiles(m)
	for range 2 {
		change()
		e.waitCaughtUp(60 * time.Second)
	}
	if answer() == want {
		t.Fatal("the later changes left the answer as it was")
	}

	var (
		mu                             sync.Mutex
		exact, collected, outside, bad int
		first                          = make(chan struct{})
		firstOnce                      sync.Once
		stop                           = make(chan struct{})
		wg                             sync.WaitGroup
	)
	point := strconv.FormatUint(old, 10)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, stdout, stderr := e.queryAsOf(point, sql)
				mu.Lock()
				switch {
				case code == 0:
					_, rows, err := sinktest.QueryJSON([]byte(stdout))
					got := ""
					if err == nil && len(rows) == 1 {
						got = strings.Join(textRows(rows)[0], " ")
					}
					if got == want {
						exact++
					} else if bad++; bad <= 3 {
						t.Errorf("query --as-of %s answered %q (%v), want %q:\n%s", point, got, err, want, stdout)
					}
				case code == 3 && strings.Contains(stderr, "collected"):
					collected++
				case code == 2 && strings.Contains(stderr, "history.retention") && strings.Contains(stderr, "before the oldest version"):
					outside++
				default:
					if bad++; bad <= 3 {
						t.Errorf("query --as-of %s exited %d:\n%s%s", point, code, stdout, stderr)
					}
				}
				firstOnce.Do(func() { close(first) })
				done := outside > 0
				mu.Unlock()
				if done {
					return // the point has left the window for good
				}
			}
		}()
	}
	select {
	case <-first:
	case <-time.After(2 * time.Minute):
		close(stop)
		wg.Wait()
		t.Fatal("no reader answered before the compactions began")
	}
	// Compactions, beside a stream of flushes, while the old version
	// leaves the window: on until its files are collected and a few
	// rounds more (bounded).
	oldGone := func() bool {
		cur := map[string]bool{}
		for _, f := range manifestFiles(e.manifest()) {
			cur[f] = true
		}
		for _, f := range oldFiles {
			if _, err := os.Stat(filepath.Join(e.sink, filepath.FromSlash(f))); err == nil && !cur[f] {
				return false
			}
		}
		return true
	}
	began := time.Now()
	deadline := began.Add(retention + 40*time.Second)
	compactions, after := 0, 0
	for time.Now().Before(deadline) && after < 4 {
		change()
		e.mustRun("compact")
		compactions++
		if time.Since(began) > retention && oldGone() {
			after++
		}
	}
	close(stop)
	wg.Wait()
	d.stop()
	t.Logf("version %d: %d exact answers, %d exit 3 (collected), %d exit 2 (outside the window), %d wrong; %d compactions in %.1fs",
		old, exact, collected, outside, bad, compactions, time.Since(began).Seconds())
	if exact == 0 {
		t.Error("no reader answered exactly")
	}
	// The version's files that no later manifest names are gone.
	cur := map[string]bool{}
	for _, f := range manifestFiles(e.manifest()) {
		cur[f] = true
	}
	gone := 0
	for _, f := range oldFiles {
		if _, err := os.Stat(filepath.Join(e.sink, filepath.FromSlash(f))); errors.Is(err, os.ErrNotExist) {
			gone++
		} else if !cur[f] {
			t.Errorf("%s, of version %d only, is still in the sink", f, old)
		}
	}
	if gone == 0 {
		t.Errorf("none of version %d's %d files was collected", old, len(oldFiles))
	}
}

// queryAsOf runs pg-cdc query --as-of point --format json sql and returns
// its exit code and both streams.
func (e *env) queryAsOf(point, sql string) (int, string, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "-c", e.config, "query", "--as-of", point, "--format", "json", sql)
	cmd.Env = append(append(os.Environ(), quietMetrics), e.procEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	} else if err != nil {
		e.t.Errorf("run pg-cdc query: %v", err)
		return -1, stdout.String(), stderr.String()
	}
	return code, stdout.String(), stderr.String()
}

// refTags returns the tag pg-cdc refs --format json lists for each epoch.
func (e *env) refTags() map[uint64]string {
	e.t.Helper()
	out := e.mustRunStdout("refs", "--format", "json", "--tags", "1000")
	var l struct {
		Tags []struct {
			Name  string `json:"name"`
			Epoch uint64 `json:"epoch"`
		} `json:"tags"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		e.t.Fatalf("pg-cdc refs --format json: %v\n%s", err, out)
	}
	tags := map[uint64]string{}
	for _, tg := range l.Tags {
		if prev, ok := tags[tg.Epoch]; ok && prev != tg.Name {
			e.t.Fatalf("pg-cdc refs lists two tags for epoch %d: %s and %s", tg.Epoch, prev, tg.Name)
		}
		tags[tg.Epoch] = tg.Name
	}
	return tags
}

// mustRunStdout runs a pg-cdc command and returns its standard output
// alone (e.run mixes in the log on stderr).
func (e *env) mustRunStdout(args ...string) string {
	e.t.Helper()
	cmd := exec.Command(binary, append([]string{"-c", e.config}, args...)...)
	cmd.Env = append(append(os.Environ(), quietMetrics), e.procEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		e.t.Fatalf("pg-cdc %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// historySource reads historySourceSQL from the source.
func historySource(t *testing.T, e *env) [][]string {
	t.Helper()
	rows, err := e.conn.Query(context.Background(), historySourceSQL)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		var tbl, id string
		var v, n *string
		if err := rows.Scan(&tbl, &id, &v, &n); err != nil {
			t.Fatal(err)
		}
		null := func(s *string) string {
			if s == nil {
				return "NULL"
			}
			return *s
		}
		out = append(out, []string{tbl, id, null(v), null(n)})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// textRows renders query values as text, NULL as "NULL".
func textRows(rows [][]any) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = make([]string, len(r))
		for j, v := range r {
			if v == nil {
				out[i][j] = "NULL"
			} else {
				out[i][j] = fmt.Sprint(v)
			}
		}
	}
	return out
}

func slicesEqualRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "\x00") != strings.Join(b[i], "\x00") {
			return false
		}
	}
	return true
}

func renderRows(rows [][]string) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString("  " + strings.Join(r, " | ") + "\n")
	}
	return b.String()
}

// manifestFiles lists the data files a manifest names (bases and deltas).
func manifestFiles(m *manifest.Manifest) []string {
	var out []string
	for _, mt := range m.Tables {
		if mt.Base != nil {
			for _, f := range mt.Base.Files {
				out = append(out, f.Path)
			}
		}
		for _, d := range mt.Deltas {
			for _, f := range d.Files {
				out = append(out, f.Path)
			}
		}
	}
	return out
}
