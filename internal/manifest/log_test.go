package manifest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
)

func isNotReadable(err error) bool { return errors.Is(err, ErrNotReadable) }

func fsStore(t testing.TB) *fs.Store {
	t.Helper()
	s, err := fs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stores runs fn on each real store the history must work on.
func stores(t *testing.T, fn func(t *testing.T, store sink)) {
	t.Run("memory", func(t *testing.T) { fn(t, memory.New()) })
	t.Run("fs", func(t *testing.T) { fn(t, fsStore(t)) })
}

func TestLogKeys(t *testing.T) {
	if got, want := LogEntryKey(1234567), "_pgcdc/log/00000000000001234/00000000000001234567.json"; got != want {
		t.Errorf("LogEntryKey = %s, want %s", got, want)
	}
	if got, want := CheckpointKey(1200), "_pgcdc/log/00000000000000001/00000000000000001200.checkpoint.json"; got != want {
		t.Errorf("CheckpointKey = %s, want %s", got, want)
	}
	for _, v := range []uint64{1, 999, 1000, 1<<64 - 1} {
		for _, cp := range []bool{false, true} {
			got, gotCP, ok := ParseLogKey(keyFor(v, cp))
			if !ok || got != v || gotCP != cp {
				t.Errorf("ParseLogKey(%s) = %d %v %v", keyFor(v, cp), got, gotCP, ok)
			}
		}
	}
	for _, k := range []string{OldestKey, Key, "_pgcdc/log/00000000000000001/00000000000000000001.json", "_pgcdc/log/x/1.json", LogEntryKey(5) + ".tmp"} {
		if _, _, ok := ParseLogKey(k); ok {
			t.Errorf("ParseLogKey(%s) accepted", k)
		}
	}
}

// TestLogEveryVersionReadable: a long, realistic sequence (flushes of
// three tables with schema changes, history past 100, compactions, garbage
// collections, an added table, idle advances, resnapshot requests, an enum
// label changed in place), written by a streamer and a compaction
// committer that conflict: every version is rebuilt exactly, checkpoints
// are only the periodic ones (no spurious repair), and a flush's entry
// stays small however large the manifest grows.
func TestLogEveryVersionReadable(t *testing.T) {
	stores(t, func(t *testing.T, store sink) {
		s, streamer := newSim(t, store)
		compactor := s.open()
		steps := 210
		if raceEnabled {
			steps = 120 // still past version 100
		}
		for i := 1; i <= steps; i++ {
			switch {
			case i%20 == 0:
				s.commit(compactor, "compact", compactTable(simTables[i/20%3], 0, s.clock))
			case i%37 == 0:
				s.commit(compactor, "gc", collect(2))
			case i == 77:
				s.commit(streamer, "add table", addTable("public.late"))
			case i%23 == 0:
				s.commit(streamer, "idle", idle)
			case i%41 == 0:
				s.commit(streamer, "resnapshot", resnapshot("public.items", s.clock))
			case i%59 == 0:
				s.commit(streamer, "enum", enumLabel("public.orders"))
			case i%31 == 0:
				s.commit(streamer, "flush with a schema change", flush(append(simTables, "public.late"), int64(i%7+1), true, s.clock))
			default:
				s.commit(streamer, "flush", flush(append(simTables, "public.late"), int64(i%7+1), false, s.clock))
			}
		}
		s.checkAll()
		_, checkpoints := s.logObjects()
		if want := 1 + len(s.committed)/CheckpointEvery; checkpoints != want {
			t.Errorf("%d checkpoints for %d versions, want %d (the periodic ones and version 1's)", checkpoints, len(s.committed), want)
		}
		latest := s.committed[uint64(len(s.committed))]
		for v, kind := range s.kind {
			if kind == "flush" && v > 1 {
				if n := s.entrySize(v); n == 0 || n > 3000 {
					t.Errorf("flush version %d: entry of %d bytes (manifest %d bytes)", v, n, len(latest))
				}
			}
		}
		oldest, err := NewHistory(store).Oldest(s.ctx)
		if err != nil || oldest.Version != 1 {
			t.Errorf("Oldest = %+v, %v; want version 1", oldest, err)
		}
	})
}

// TestLogEntryExample shows one real entry: a flush of three tables.
func TestLogEntryExample(t *testing.T) {
	s, mc := newSim(t, memory.New())
	for i := 0; i < 120; i++ {
		s.commit(mc, "flush", flush(simTables, 3, false, s.clock))
	}
	m := s.commit(mc, "flush", flush(simTables, 3, false, s.clock))
	data, _, err := s.store.ReadVersion(s.ctx, LogEntryKey(m.Version))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("manifest %d bytes; entry %s (%d bytes):\n%s", len(s.committed[m.Version]), LogEntryKey(m.Version), len(data), data)
	for _, want := range []string{`"op":"splice","path":["history"],"drop":1`, `"path":["tables","public.orders","deltas"]`, `"op":"set","path":["epoch"]`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("entry lacks %s", want)
		}
	}
}

// countingStore counts the requests made on log keys.
type countingStore struct {
	sink
	mu                     sync.Mutex
	logReads, logPuts, lst int
}

func (c *countingStore) ReadVersion(ctx context.Context, key string) ([]byte, blob.Version, error) {
	if strings.HasPrefix(key, LogPrefix) {
		c.mu.Lock()
		c.logReads++
		c.mu.Unlock()
	}
	return c.sink.ReadVersion(ctx, key)
}

func (c *countingStore) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (blob.Version, error) {
	if strings.HasPrefix(key, LogPrefix) {
		c.mu.Lock()
		c.logPuts++
		c.mu.Unlock()
	}
	return c.sink.PutIf(ctx, key, data, expected)
}

func (c *countingStore) List(ctx context.Context, prefix string) ([]blob.ObjectInfo, error) {
	c.mu.Lock()
	c.lst++
	c.mu.Unlock()
	return c.sink.List(ctx, prefix)
}

// TestLogHotPath: consecutive commits of one committer read nothing and
// list nothing; each writes its entry (and the 100th a checkpoint).
func TestLogHotPath(t *testing.T) {
	cs := &countingStore{sink: memory.New()}
	s, mc := newSim(t, cs)
	cs.logReads, cs.logPuts, cs.lst = 0, 0, 0
	for range 150 {
		s.commit(mc, "flush", flush(simTables, 2, false, s.clock))
	}
	if cs.logReads != 0 || cs.lst != 0 {
		t.Errorf("150 commits made %d log reads and %d listings, want none", cs.logReads, cs.lst)
	}
	if cs.logPuts != 151 { // 150 entries, version 100's checkpoint
		t.Errorf("150 commits made %d log writes, want 151", cs.logPuts)
	}
	// A committer that read the version checks its entry once.
	other := s.open()
	cs.logReads = 0
	s.commit(other, "flush", flush(simTables, 2, false, s.clock))
	s.commit(other, "flush", flush(simTables, 2, false, s.clock))
	if cs.logReads != 1 {
		t.Errorf("a committer that opened the manifest made %d log reads over two commits, want 1", cs.logReads)
	}
	s.checkAll()
}

// failingStore fails the next n writes of log keys.
type failingStore struct {
	sink
	mu   sync.Mutex
	fail int
}

func (f *failingStore) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (blob.Version, error) {
	f.mu.Lock()
	failing := strings.HasPrefix(key, LogPrefix) && f.fail > 0
	if failing {
		f.fail--
	}
	f.mu.Unlock()
	if failing {
		return "", errors.Join(blob.ErrUnavailable, errors.New("injected log write failure"))
	}
	return f.sink.PutIf(ctx, key, data, expected)
}

func (f *failingStore) failNext(n int) {
	f.mu.Lock()
	f.fail = n
	f.mu.Unlock()
}

type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, rec.Level.String()+" "+rec.Message)
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// TestLogWriteFails: a log write that fails never fails the commit and is
// logged at warn.
//
//   - Once: the next commit writes the missing entry again and nothing is
//     lost.
//   - Twice in a row (the entry and its retry): exactly that version is
//     lost; the next commit wrote a checkpoint, so every later version is
//     readable.
//   - Four times (the entry, its retry, the next version's entry and its
//     checkpoint): still only the first version is lost, the third commit
//     writes the second's checkpoint again.
//   - Five times (that retry too): both are lost; the third commit's
//     checkpoint starts the chain again.
func TestLogWriteFails(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails int
		lost  int // versions lost, counted from the first that failed
	}{
		{"once", 1, 0},
		{"twice", 2, 1},
		{"four times", 4, 1},
		{"five times", 5, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fstore := &failingStore{sink: fsStore(t)}
			s, mc := newSim(t, fstore)
			rec := &logRecorder{}
			mc.SetLogger(slog.New(rec))
			for range 10 {
				s.commit(mc, "flush", flush(simTables, 2, false, s.clock))
			}
			fstore.failNext(tc.fails)
			first := s.commit(mc, "flush", flush(simTables, 2, false, s.clock)).Version
			for range 5 {
				s.commit(mc, "flush", flush(simTables, 2, false, s.clock))
			}
			var lost []uint64
			for i := range tc.lost {
				lost = append(lost, first+uint64(i))
			}
			s.checkAll(lost...)
			if len(rec.lines) != tc.fails || !strings.HasPrefix(rec.lines[0], "WARN ") {
				t.Errorf("logged %q, want %d warnings", rec.lines, tc.fails)
			}
		})
	}
}

// TestLogKilledBetweenCASAndLog: a writer killed after its manifest write
// and before its log write leaves a version without an entry. The next
// committer (one that opens the manifest, or one that learns the version
// from a conflict) checks the version it builds on, finds no entry and
// writes that version's checkpoint from the bytes it read: no version is
// lost, not even the killed writer's.
func TestLogKilledBetweenCASAndLog(t *testing.T) {
	for _, learn := range []string{"open", "conflict"} {
		t.Run(learn, func(t *testing.T) {
			stores(t, func(t *testing.T, store sink) {
				s, mc := newSim(t, store)
				stale := s.open() // writes now, then learns the killed version from a conflict
				s.commit(stale, "resnapshot", resnapshot("public.items", s.clock))
				for range 5 {
					s.commit(mc, "flush", flush(simTables, 2, false, s.clock))
				}
				killed := s.killedCommit(mc)
				var next *Committer
				if learn == "open" {
					next = s.open()
				} else {
					next = stale
				}
				s.commit(next, "flush", flush(simTables, 2, false, s.clock))
				s.commit(next, "flush", flush(simTables, 2, false, s.clock))
				if _, _, err := store.ReadVersion(s.ctx, CheckpointKey(killed)); err != nil {
					t.Errorf("no repair checkpoint of version %d: %v", killed, err)
				}
				s.checkAll() // none lost
			})
		})
	}
}

// killedCommit writes the next version of the manifest the way Commit
// does, but stops before the log write, as a kill would.
func (s *sim) killedCommit(mc *Committer) uint64 {
	s.t.Helper()
	next := mc.Current().Clone()
	if err := flush(simTables, 2, false, s.clock)(next); err != nil {
		s.t.Fatal(err)
	}
	s.clock = s.clock.Add(time.Second)
	next.Version, next.CommittedAt = mc.Current().Version+1, s.clock
	next.Commit = &CommitStamp{Writer: "killed/1/0", Seq: 1}
	data, err := next.Encode()
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.store.PutIf(s.ctx, Key, data, mc.version); err != nil {
		s.t.Fatal(err)
	}
	s.record(next, "killed")
	return next.Version
}

// TestLogLegacyManifest: a manifest written before versions (0) or before
// the log (version n, no entries) gets a checkpoint at the first commit,
// which also records the oldest version.
func TestLogLegacyManifest(t *testing.T) {
	for _, start := range []uint64{0, 4321} {
		store := memory.New()
		m := sample()
		m.FormatVersion, m.Version, m.CommittedAt = FormatVersion, start, simStart
		data, _ := m.Encode()
		if _, err := store.PutIf(context.Background(), Key, data, ""); err != nil {
			t.Fatal(err)
		}
		s := &sim{t: t, ctx: context.Background(), store: store, clock: simStart, committed: map[uint64][]byte{}, kind: map[uint64]string{}}
		if start != 0 {
			s.committed[start] = data
		}
		mc := s.open()
		for range 3 {
			s.commit(mc, "flush", flush([]string{"public.orders"}, 2, false, s.clock))
		}
		s.checkAll()
		oldest, err := NewHistory(store).Oldest(s.ctx)
		want := max(start, 1)
		if err != nil || oldest.Version != want {
			t.Errorf("start %d: Oldest = %+v, %v; want version %d", start, oldest, err, want)
		}
	}
}

// TestLogCreateWriteFails: the first manifest's checkpoint that fails is
// written by the first commit.
func TestLogCreateWriteFails(t *testing.T) {
	fstore := &failingStore{sink: memory.New(), fail: 1}
	s, mc := newSim(t, fstore)
	s.commit(mc, "flush", flush(simTables, 2, false, s.clock))
	s.checkAll()
	if _, err := NewHistory(fstore).Oldest(s.ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAtNewestWithoutEntry: the newest version is readable from the
// manifest while its entry is not written (or lost).
func TestAtNewestWithoutEntry(t *testing.T) {
	s, mc := newSim(t, memory.New())
	s.commit(mc, "flush", flush(simTables, 2, false, s.clock))
	v := s.killedCommit(mc)
	s.checkAll()
	if _, err := NewHistory(s.store).Header(s.ctx, v); err != nil {
		t.Fatal(err)
	}
}
