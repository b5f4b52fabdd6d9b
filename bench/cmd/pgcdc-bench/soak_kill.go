package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Kill mode (--soak-kill, issue 29 "Must show"): the same soak, but
// pg-cdc start gets SIGKILL every --soak-kill and is started again at
// once with the same configuration.
//
// Every other kill (the first among them) is aimed at a compaction. The
// compaction loop works in a scratch directory per table,
// <state.path>/compact/<schema>.<table>[.minor].pid<pid>, made when the
// table's compaction starts and removed when it ends (internal/compact,
// scratchDir). An aimed kill waits for one of the running process's to
// appear (a pass starts every compaction.interval, 10 s by default) and
// kills while it is there. Whether a kill, aimed or not, landed inside a
// compaction is then read off pg-cdc's state directory, not assumed: a
// scratch directory the killed process left behind (internal/compact
// removes its own whether the compaction succeeds or fails) is a
// compaction that started and did not end. The daemon logs no line when a compaction
// starts, so that directory is the only witness; should internal/compact
// move it, the report says no kill was seen inside a compaction, and
// claims no more.
//
// All through the run (from pg-cdc init to the last stop) an outside
// sampler on a connection of its own reads the slot's confirmed_flush_lsn
// and then the sink's _pgcdc/manifest.json, every soakLSNEvery, and
// records a violation whenever the slot is confirmed past the manifest's
// end LSN (design.md §1.1 rule 1; internal/e2e's sampler). The slot is read
// first: the manifest's end LSN only grows, so reading it later can only
// make the check more lenient, never raise a false alarm.

const (
	// soakAimWait bounds an aimed kill's wait for a compaction: one
	// compaction.interval (10 s) after the process started, and slack.
	soakAimWait = 15 * time.Second
	// soakAimPoll is how often an aimed kill looks for a scratch
	// directory: a minor merge of a few small deltas may take only tens
	// of ms.
	soakAimPoll = 2 * time.Millisecond
	// soakAimDelay bounds the random delay between seeing a compaction
	// start and the kill, so that kills land at different points inside
	// compactions, not all at their first step.
	soakAimDelay = 100 * time.Millisecond
	// soakLSNEvery is the outside LSN sampler's interval.
	soakLSNEvery = 50 * time.Millisecond
	// soakMinKillEvery is the shortest --soak-kill: an aimed kill needs a
	// compaction pass of the process it kills.
	soakMinKillEvery = 10 * time.Second
)

// soakDaemon is pg-cdc start over its lives: one in the default soak, a
// new one after each kill in kill mode. mu guards all of it: the killer
// replaces the process while the sampling loop reads it, and holds mu from
// the kill to the restart, so the loop never sees a process killed on
// purpose as one that exited.
type soakDaemon struct {
	bin, config, dir string

	mu   sync.Mutex
	cur  *proc
	life int      // index of cur's life
	logs []string // each life's log, in r.dir
	// seen is the last scrape of each life: counters start again at zero
	// with each process, and the samples add up the lives before theirs.
	seen []daemonMetrics
	cpu  time.Duration // of the lives that ended
}

func newSoakDaemon(bin string, r pgcdcRun) *soakDaemon {
	return &soakDaemon{bin: bin, config: r.config, dir: r.dir}
}

// start starts the first life.
func (d *soakDaemon) start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.startLocked()
}

func (d *soakDaemon) startLocked() error {
	name := "start.log"
	if len(d.logs) > 0 {
		name = fmt.Sprintf("start-%d.log", len(d.logs)+1)
	}
	p, err := startProc(d.bin, []string{"-c", d.config, "start"}, nil, filepath.Join(d.dir, name))
	if err != nil {
		return fmt.Errorf("pg-cdc start (life %d): %w", len(d.logs)+1, err)
	}
	d.cur, d.life = p, len(d.logs)
	d.logs = append(d.logs, name)
	d.seen = append(d.seen, daemonMetrics{})
	return nil
}

// current is the running process, its life and its log's name.
func (d *soakDaemon) current() (*proc, int, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur, d.life, d.logs[d.life]
}

// exited reports whether the current process has exited (on its own: a
// kill replaces it before mu is released), with its log's name.
func (d *soakDaemon) exited() (bool, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cur.exited(), d.logs[d.life]
}

// cumulative records m, a scrape of life, and returns it with the
// counters of the lives before added, so that the series run on across
// restarts. A scrape of a life that has ended is returned as it is.
func (d *soakDaemon) cumulative(life int, m daemonMetrics) daemonMetrics {
	d.mu.Lock()
	defer d.mu.Unlock()
	if life != d.life {
		return m
	}
	d.seen[life] = m
	for _, prev := range d.seen[:life] {
		m.flushes += prev.flushes
		m.minor += prev.minor
		m.major += prev.major
	}
	return m
}

// killAndRestart sends SIGKILL to the current process, waits for it,
// calls inspect with its pid (while nothing runs on the sink), and starts
// the next life at once.
func (d *soakDaemon) killAndRestart(inspect func(pid int)) (pid int, uptime time.Duration, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.cur
	if p.exited() {
		return 0, 0, fmt.Errorf("pg-cdc start exited on its own before the kill: %s", logTail(d.dir, d.logs[d.life]))
	}
	pid = p.cmd.Process.Pid
	p.kill()
	uptime = p.exitTime.Sub(p.started)
	d.cpu += p.usage().CPU
	inspect(pid)
	return pid, uptime, d.startLocked()
}

// logNames are the lives' logs, in r.dir, first to last.
func (d *soakDaemon) logNames() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.logs...)
}

// kill ends the current process at once (cleanup after a failure).
func (d *soakDaemon) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil {
		d.cur.kill()
	}
}

// soakKill is one kill.
type soakKill struct {
	at     time.Duration // since the workload started
	pid    int
	uptime time.Duration // how long the killed process had run
	aimed  bool          // waited for a compaction to start
	// aimedAt is the scratch directory the aimed kill saw ("" when none
	// appeared within soakAimWait: it killed anyway).
	aimedAt string
	// inFlight are the compactions the killed process left unfinished:
	// their scratch directories, as "schema.table (minor|major)".
	inFlight []string
}

// soakKillResult is what kill mode adds to the soak.
type soakKillResult struct {
	every    time.Duration
	kills    []soakKill
	restarts int
	lsn      soakLSNResult
	// minor and major are the compactions committed over all lives: the
	// daemon's "merged deltas" and "compacted table" log lines (its
	// pgcdc_compactions_total starts again at zero with each process).
	minor, major int
	cpu          time.Duration // of all lives
	logs         []string
}

// aimed counts the kills that waited for a compaction.
func (k *soakKillResult) aimed() int {
	n := 0
	for _, x := range k.kills {
		if x.aimed {
			n++
		}
	}
	return n
}

// landed counts the kills that left a compaction unfinished.
func (k *soakKillResult) landed() int {
	n := 0
	for _, x := range k.kills {
		if len(x.inFlight) > 0 {
			n++
		}
	}
	return n
}

// pass is kill mode's own part of the verdict: at least one kill, each
// followed by a restart, and an outside sampler that took samples and saw
// no violation.
func (k *soakKillResult) pass() bool {
	return len(k.kills) > 0 && k.restarts == len(k.kills) && k.lsn.samples > 0 && k.lsn.violations == 0
}

// soakKiller kills and restarts d every k.every until ctx ends. The
// workload's start is began; compactDir is <state.path>/compact.
//
// It alone writes k until it returns: the caller reads k after waiting
// for it.
func (h *harness) soakKiller(ctx context.Context, d *soakDaemon, compactDir string, began time.Time, k *soakKillResult) error {
	rng := rand.New(rand.NewPCG(uint64(began.UnixNano()), 29))
	timer := time.NewTimer(k.every)
	defer timer.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		x := soakKill{aimed: n%2 == 0}
		if x.aimed {
			p, _, _ := d.current()
			seen, err := awaitCompaction(ctx, compactDir, p.cmd.Process.Pid, rng)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			x.aimedAt = seen
		}
		pid, uptime, err := d.killAndRestart(func(pid int) {
			names, _ := readDirNames(compactDir)
			x.inFlight = compactionsInFlight(names, pid)
		})
		x.at, x.pid, x.uptime = time.Since(began), pid, uptime
		if pid != 0 {
			k.kills = append(k.kills, x)
		}
		if err == nil {
			k.restarts++
		}
		if err != nil {
			return err
		}
		what := "aimed at a compaction, none started within " + soakAimWait.String()
		switch {
		case !x.aimed:
			what = "not aimed"
		case x.aimedAt != "":
			what = "aimed at " + x.aimedAt
		}
		h.logf("soak: kill %d at %s (%s): pid %d after %s; compactions left unfinished: %s; restarted", len(k.kills), clock(x.at), what, pid, uptime.Round(time.Second), listOr(x.inFlight, "none"))
		timer.Reset(k.every)
	}
}

// awaitCompaction waits, up to soakAimWait, for a compaction scratch
// directory of process pid, then a random delay up to soakAimDelay while
// one still exists (a first delay that outlives every compaction it sees
// is not repeated: the next one is killed as soon as seen). It returns the
// directory seen, "" when none appeared in time.
func awaitCompaction(ctx context.Context, dir string, pid int, rng *rand.Rand) (string, error) {
	deadline := time.Now().Add(soakAimWait)
	delay := time.Duration(rng.Int64N(int64(soakAimDelay)))
	tick := time.NewTicker(soakAimPoll)
	defer tick.Stop()
	var (
		seen  string
		since time.Time
	)
	for time.Now().Before(deadline) {
		names, err := readDirNames(dir)
		if err != nil {
			return "", err
		}
		cur := ""
		if in := compactionsInFlight(names, pid); len(in) > 0 {
			cur = in[0]
		}
		switch {
		case cur != "" && seen == "":
			seen, since = cur, time.Now()
		case cur == "" && seen != "":
			// It ended before the delay did: kill at the next one.
			seen, delay = "", 0
		}
		if seen != "" && time.Since(since) >= delay {
			return seen, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick.C:
		}
	}
	return "", nil
}

// readDirNames lists dir; a directory not made yet is empty.
func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// compactionsInFlight picks, among the names in the compaction scratch
// directory, those of process pid (internal/compact's scratchDir:
// "<schema>.<table>.pid<pid>" for a major compaction,
// "<schema>.<table>.minor.pid<pid>" for a minor merge), as
// "schema.table (major|minor)", sorted.
func compactionsInFlight(names []string, pid int) []string {
	suffix := ".pid" + strconv.Itoa(pid)
	var out []string
	for _, n := range names {
		table, ok := strings.CutSuffix(n, suffix)
		if !ok || table == "" {
			continue
		}
		kind := "major"
		if t, minor := strings.CutSuffix(table, ".minor"); minor {
			table, kind = t, "minor"
		}
		out = append(out, table+" ("+kind+")")
	}
	sort.Strings(out)
	return out
}

// countCompactionLogs counts the compactions a pg-cdc start log records
// as committed: a "merged deltas" line per minor merge, a "compacted
// table" line per major compaction (internal/compact), in slog's text or
// JSON form.
func countCompactionLogs(log string) (minor, major int) {
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.Contains(line, `msg="merged deltas"`) || strings.Contains(line, `"msg":"merged deltas"`):
			minor++
		case strings.Contains(line, `msg="compacted table"`) || strings.Contains(line, `"msg":"compacted table"`):
			major++
		}
	}
	return minor, major
}

func listOr(xs []string, none string) string {
	if len(xs) == 0 {
		return none
	}
	return strings.Join(xs, ", ")
}

// soakLSNResult is what the outside LSN sampler saw.
type soakLSNResult struct {
	samples    int      // a confirmed position and a manifest read, compared
	violations int      // the slot confirmed past the manifest's end LSN, or an unreadable manifest
	first      []string // the first violations
	errors     int      // samples that could not be taken (a failed query, an unparsable position)
	lastErr    string
}

// soakLSNSampler is the outside sampler; run owns its goroutine's loop,
// result is safe to read at any time.
type soakLSNSampler struct {
	slot, manifestPath string
	mu                 sync.Mutex
	res                soakLSNResult
}

// run samples every soakLSNEvery on conn until ctx ends.
func (s *soakLSNSampler) run(ctx context.Context, conn *pgx.Conn) {
	tick := time.NewTicker(soakLSNEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.sample(ctx, conn)
	}
}

func (s *soakLSNSampler) sample(ctx context.Context, conn *pgx.Conn) {
	var confirmed *string
	err := conn.QueryRow(ctx, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", s.slot).Scan(&confirmed)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		s.record(lsnError, fmt.Sprintf("read the slot %s: %v", s.slot, err))
		return
	}
	data, rerr := os.ReadFile(s.manifestPath)
	s.record(judgeLSNSample(confirmed, data, rerr))
}

func (s *soakLSNSampler) record(o lsnOutcome, detail string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch o {
	case lsnOK:
		s.res.samples++
	case lsnViolation:
		s.res.samples++
		s.res.violations++
		if len(s.res.first) < 5 {
			s.res.first = append(s.res.first, time.Now().Format("15:04:05.000")+" "+detail)
		}
	case lsnError:
		s.res.errors++
		s.res.lastErr = detail
	}
}

func (s *soakLSNSampler) result() soakLSNResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.res
	r.first = append([]string(nil), s.res.first...)
	return r
}

type lsnOutcome int

const (
	lsnSkip      lsnOutcome = iota // nothing to compare yet: the slot has confirmed nothing
	lsnOK                          // confirmed ≤ the manifest's end LSN
	lsnViolation                   // confirmed past it, or the manifest unreadable
	lsnError                       // not a sample: the harness could not read one side
)

// judgeLSNSample compares one sample: confirmed is the slot's
// confirmed_flush_lsn as text (nil: NULL), manifest the bytes of
// _pgcdc/manifest.json read after it (readErr: why not). An unreadable
// manifest is a violation, as in internal/e2e: the filesystem sink
// replaces it whole (a rename), so a reader never sees half of one. A
// missing one is the harness's error, not the daemon's: the sampler starts
// after pg-cdc init wrote it, and nothing deletes it.
func judgeLSNSample(confirmed *string, manifestBytes []byte, readErr error) (lsnOutcome, string) {
	if confirmed == nil {
		return lsnSkip, ""
	}
	confirmedLSN, err := cdc.ParseLSN(*confirmed)
	if err != nil {
		return lsnError, fmt.Sprintf("the slot's confirmed_flush_lsn: %v", err)
	}
	if readErr != nil {
		return lsnError, fmt.Sprintf("read the manifest: %v", readErr)
	}
	m, err := manifest.Decode(manifestBytes)
	if err != nil {
		return lsnViolation, fmt.Sprintf("unreadable manifest (slot confirmed at %s): %v", confirmedLSN, err)
	}
	if confirmedLSN > m.EndLSN {
		return lsnViolation, fmt.Sprintf("slot confirmed at %s, past the manifest's end LSN %s (version %d)", confirmedLSN, m.EndLSN, m.Version)
	}
	return lsnOK, ""
}
