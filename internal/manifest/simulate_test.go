package manifest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// sink is what the history tests run on: a real store (memory, fs, s3).
type sink interface {
	blob.Store
	blob.Conditional
}

// sim drives realistic manifest writes through real committers: a
// streamer's flushes (deltas with schema versions, history, added tables,
// idle advances, resnapshot requests) and compaction's folds and garbage
// collections, each with a clock of its own that moves a second per
// commit. It records every committed version's stored bytes.
type sim struct {
	t     tester
	ctx   context.Context
	store sink
	clock time.Time
	// committed maps each version to the bytes stored for it.
	committed map[uint64][]byte
	// kind maps each version to the mutation that wrote it.
	kind map[uint64]string
}

var simStart = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

var simTables = []string{"public.orders", "public.customers", "public.items"}

// tester is what sim needs of a *testing.T or a *rapid.T.
type tester interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

func newSim(t tester, store sink) (*sim, *Committer) {
	return newSimHistory(t, store, 0)
}

// newSimHistory is newSim with a manifest whose history already holds
// records more epochs (a sink that has streamed for a while).
func newSimHistory(t tester, store sink, records int) (*sim, *Committer) {
	t.Helper()
	s := &sim{t: t, ctx: context.Background(), store: store, clock: simStart, committed: map[uint64][]byte{}, kind: map[uint64]string{}}
	m := &Manifest{
		Source: Source{SystemIdentifier: "7440312345678901234", Timeline: 1, Database: "app", Slot: "s", Publication: "p"},
		EndLSN: 0x1000000,
		Tables: map[string]*Table{},
	}
	for _, key := range simTables {
		addSimTable(m, key)
	}
	for e := range records {
		at := s.clock.Add(time.Duration(e-records) * time.Second)
		m.AppendHistory(EpochRecord{Epoch: uint64(e), EndLSN: m.EndLSN - cdc.LSN(0x100*(records-e)), MaxCommitTime: at, FlushedAt: at})
	}
	m.Epoch = uint64(records)
	m.AppendHistory(EpochRecord{Epoch: m.Epoch, EndLSN: m.EndLSN, MaxCommitTime: s.clock, FlushedAt: s.clock})
	mc, err := Create(s.ctx, store, m, s.clock)
	if err != nil {
		t.Fatal(err)
	}
	s.own(mc)
	s.record(mc.Current(), "create")
	return s, mc
}

// own gives mc the sim's clock.
func (s *sim) own(mc *Committer) {
	mc.now = func() time.Time { return s.clock }
}

func (s *sim) open() *Committer {
	s.t.Helper()
	mc, err := Open(s.ctx, s.store, Breaker{Threshold: 1000, Window: time.Second})
	if err != nil {
		s.t.Fatal(err)
	}
	mc.SetRival(func(_, _ *Manifest) bool { return false })
	s.own(mc)
	return mc
}

func (s *sim) record(m *Manifest, kind string) {
	s.t.Helper()
	data, _, err := s.store.ReadVersion(s.ctx, Key)
	if err != nil {
		s.t.Fatal(err)
	}
	if want := fmt.Sprintf("\n  \"version\": %d,\n", m.Version); !strings.Contains(string(data[:min(len(data), 200)]), want) {
		s.t.Fatalf("the stored manifest is not version %d", m.Version)
	}
	s.committed[m.Version] = data
	s.kind[m.Version] = kind
}

// commit runs one mutation through mc and records the version.
func (s *sim) commit(mc *Committer, kind string, mutate func(*Manifest) error) *Manifest {
	s.t.Helper()
	s.clock = s.clock.Add(time.Second)
	m, err := mc.Commit(s.ctx, mutate)
	if err != nil {
		s.t.Fatalf("%s: %v", kind, err)
	}
	s.record(m, kind)
	return m
}

func addSimTable(m *Manifest, key string) {
	schema, name, _ := cutDot(key)
	cols := []Column{
		{Name: "id", PGType: "bigint", ParquetType: "INT64", FieldID: 1, TypeOID: 20, TypeMod: -1, AttNum: 1},
		{Name: "note", PGType: "text", ParquetType: "BYTE_ARRAY", Nullable: true, FieldID: 2, TypeOID: 25, TypeMod: -1, AttNum: 2},
	}
	id := cdc.TableID{Schema: schema, Name: name}
	m.Tables[key] = &Table{
		Schema: schema, Name: name, OID: uint32(16384 + len(m.Tables)), Generation: "g0001",
		PrimaryKey: []string{"id"}, ReplicaIdentity: "default", SchemaVersion: 1,
		Schemas:  []SchemaVersion{{Version: 1, FromEpoch: 0, Columns: cols}},
		Snapshot: Snapshot{State: SnapshotComplete, LSN: m.EndLSN},
		Base: &Base{Epoch: 0, MaxLSN: m.EndLSN, RowCount: 1000, Files: []File{
			{Path: FileKey(id, "g0001", KindBase, 0, 0), Rows: 1000, Bytes: 65536},
		}},
		Deltas: []Delta{},
	}
}

func cutDot(key string) (string, string, bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == '.' {
			return key[:i], key[i+1:], true
		}
	}
	return "", key, false
}

func sortedTables(m *Manifest) []string {
	keys := make([]string, 0, len(m.Tables))
	for k := range m.Tables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// flush is the streamer's epoch: a delta for each of tables (those the
// manifest has), the end LSN and a history record; newSchema gives the
// first table a new schema version in the same epoch.
func flush(tables []string, rows int64, newSchema bool, now time.Time) func(*Manifest) error {
	return func(m *Manifest) error {
		epoch := m.Epoch + 1
		lsn := m.EndLSN + cdc.LSN(0x100*rows+0x28)
		for i, key := range tables {
			t := m.Tables[key]
			if t == nil {
				continue
			}
			if newSchema && i == 0 {
				cur := t.CurrentSchema()
				cols := append([]Column(nil), cur.Columns...)
				id := t.MaxFieldID() + 1
				cols = append(cols, Column{Name: fmt.Sprintf("c%d", id), PGType: "integer", ParquetType: "INT32", Nullable: true, FieldID: id, TypeOID: 23, TypeMod: -1, AttNum: id})
				t.Schemas = append(t.Schemas, SchemaVersion{Version: t.SchemaVersion + 1, FromEpoch: epoch, Columns: cols})
				t.SchemaVersion++
			}
			id := t.ID()
			t.Deltas = append(t.Deltas, Delta{
				Epoch: epoch, MinLSN: m.EndLSN + 0x28, MaxLSN: lsn, Rows: rows, SchemaVersion: t.SchemaVersion,
				Files: []File{{Path: FileKey(id, t.Generation, KindDelta, epoch, 0), Rows: rows, Bytes: 2048 + 60*rows}},
			})
		}
		m.Epoch, m.EndLSN = epoch, lsn
		m.AppendHistory(EpochRecord{Epoch: epoch, EndLSN: lsn, MaxCommitTime: now.Add(-300 * time.Millisecond), FlushedAt: now})
		return nil
	}
}

// idle is an idle advance: the end LSN alone.
func idle(m *Manifest) error {
	m.EndLSN += 0x38
	return nil
}

// compactTable folds the first n deltas of table (all when n ≤ 0) into a
// new base and retires the files it replaced, as compact.Table does.
func compactTable(key string, n int, now time.Time) func(*Manifest) error {
	return func(m *Manifest) error {
		t := m.Tables[key]
		if t == nil || len(t.Deltas) == 0 {
			return nil
		}
		if n <= 0 || n > len(t.Deltas) {
			n = len(t.Deltas)
		}
		folded := t.Deltas[:n]
		last := folded[n-1]
		var rows int64
		for _, d := range folded {
			rows += d.Rows
			for _, f := range d.Files {
				m.Garbage = append(m.Garbage, RetiredFile{Path: f.Path, RetiredAt: now})
			}
		}
		if t.Base != nil {
			rows += t.Base.RowCount
			for _, f := range t.Base.Files {
				m.Garbage = append(m.Garbage, RetiredFile{Path: f.Path, RetiredAt: now})
			}
		}
		at := now
		t.Base = &Base{Epoch: last.Epoch, MaxLSN: last.MaxLSN, RowCount: rows, SortedBy: []string{"id", "__lsn", "__seq"},
			SchemaVersion: last.SchemaVersion, CompactedAt: &at,
			Files: []File{{Path: FileKey(t.ID(), t.Generation, KindBase, last.Epoch, 0), Rows: rows, Bytes: 40 * rows}}}
		t.Deltas = append([]Delta{}, t.Deltas[n:]...)
		return nil
	}
}

// collect drops the first n entries of the garbage list, as Collect does
// with the files retired longest ago.
func collect(n int) func(*Manifest) error {
	return func(m *Manifest) error {
		n := min(n, len(m.Garbage))
		m.Garbage = append([]RetiredFile{}, m.Garbage[n:]...)
		return nil
	}
}

func addTable(key string) func(*Manifest) error {
	return func(m *Manifest) error {
		if m.Tables[key] == nil {
			addSimTable(m, key)
			m.Tables[key].Snapshot = Snapshot{State: SnapshotBackfilling, LSN: m.EndLSN, RowsEstimate: 5000}
		}
		return nil
	}
}

// resnapshot requests (or, when one is pending, drops) a resnapshot.
func resnapshot(key string, now time.Time) func(*Manifest) error {
	return func(m *Manifest) error {
		t := m.Tables[key]
		if t == nil {
			return nil
		}
		if t.Resnapshot != nil {
			t.Resnapshot = nil
			return nil
		}
		t.Resnapshot = &Resnapshot{Generation: "g0002", RequestedAt: now, Snapshot: Snapshot{State: SnapshotPending}}
		return nil
	}
}

// enumLabel adds an enum label to a column in place (the stream records
// a label added to a type): a change inside an array element.
func enumLabel(key string) func(*Manifest) error {
	return func(m *Manifest) error {
		t := m.Tables[key]
		if t == nil {
			return nil
		}
		cur := t.CurrentSchema()
		cur.Columns[1].EnumLabels = append(cur.Columns[1].EnumLabels, fmt.Sprintf("label%d", len(cur.Columns[1].EnumLabels)))
		return nil
	}
}

// checkAll asserts that History.At returns every committed version
// exactly, except those in lost (which must fail with ErrNotReadable).
func (s *sim) checkAll(lost ...uint64) {
	s.t.Helper()
	h := NewHistory(s.store)
	isLost := map[uint64]bool{}
	for _, v := range lost {
		isLost[v] = true
	}
	versions := make([]uint64, 0, len(s.committed))
	for v := range s.committed {
		versions = append(versions, v)
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	for _, v := range versions {
		m, err := h.At(s.ctx, v)
		if isLost[v] {
			if err == nil {
				s.t.Errorf("version %d: readable, want lost", v)
			} else if !isNotReadable(err) {
				s.t.Errorf("version %d: %v, want ErrNotReadable", v, err)
			}
			continue
		}
		if err != nil {
			s.t.Fatalf("version %d (%s): %v", v, s.kind[v], err)
		}
		got, err := m.Encode()
		if err != nil {
			s.t.Fatal(err)
		}
		if string(got) != string(s.committed[v]) {
			s.t.Fatalf("version %d (%s) rebuilt differently:\n%s\n--- committed ---\n%s", v, s.kind[v], got, s.committed[v])
		}
	}
}

// entrySize returns the size of version v's log entry (0: none).
func (s *sim) entrySize(v uint64) int {
	data, _, err := s.store.ReadVersion(s.ctx, LogEntryKey(v))
	if err != nil {
		return 0
	}
	return len(data)
}

// logObjects counts the entries and checkpoints in the store.
func (s *sim) logObjects() (entries, checkpoints int) {
	s.t.Helper()
	objs, err := s.store.List(s.ctx, LogPrefix)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, o := range objs {
		if _, cp, ok := ParseLogKey(o.Key); ok {
			if cp {
				checkpoints++
			} else {
				entries++
			}
		}
	}
	return entries, checkpoints
}
