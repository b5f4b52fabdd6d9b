package replicate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"go.uber.org/goleak"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The captured tables: public.items and public.other, both (id bigint
// primary key, v text).
const (
	itemsOID = 16384
	otherOID = 16390

	oidInt8 = 20
	oidInt4 = 23
	oidText = 25
)

// startLSN is the manifest's end LSN when every test starts.
const startLSN cdc.LSN = 0x1000000

var baseTime = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

// endOf is the end LSN of the commit record at commitLSN, as the tests'
// transactions have it.
func endOf(commitLSN cdc.LSN) cdc.LSN { return commitLSN + 0x30 }

// commitTime gives each commit LSN its own commit time.
func commitTime(commitLSN cdc.LSN) time.Time {
	return baseTime.Add(time.Duration(commitLSN-startLSN) * time.Microsecond)
}

func itemsRel(xid uint32, streamed bool) []byte {
	return pgRelation(xid, streamed, itemsOID, "public", "items",
		relCol{Key: true, Name: "id", TypeOID: oidInt8, TypeMod: -1},
		relCol{Name: "v", TypeOID: oidText, TypeMod: -1})
}

func otherRel(xid uint32, streamed bool) []byte {
	return pgRelation(xid, streamed, otherOID, "public", "other",
		relCol{Key: true, Name: "id", TypeOID: oidInt8, TypeMod: -1},
		relCol{Name: "v", TypeOID: oidText, TypeMod: -1})
}

// tx is a whole non-streamed transaction: BEGIN, body, COMMIT.
func tx(xid uint32, commitLSN cdc.LSN, body ...[]byte) []Message {
	out := data(pgBegin(commitLSN, commitTime(commitLSN), xid))
	out = append(out, data(body...)...)
	return append(out, data(pgCommit(commitLSN, endOf(commitLSN), commitTime(commitLSN)))...)
}

func manifestTable(name string, oid uint32) *manifest.Table {
	return &manifest.Table{
		Schema: "public", Name: name, OID: oid, Generation: "g0001",
		PrimaryKey: []string{"id"}, ReplicaIdentity: "default",
		SchemaVersion: 1,
		Schemas: []manifest.SchemaVersion{{Version: 1, FromEpoch: 0, Columns: []manifest.Column{
			{Name: "id", PGType: "bigint", ParquetType: "INT64", Nullable: false, FieldID: 1, TypeOID: oidInt8, TypeMod: -1},
			{Name: "v", PGType: "text", ParquetType: "STRING", Nullable: true, FieldID: 2, TypeOID: oidText, TypeMod: -1},
		}}},
		Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete, LSN: startLSN},
		Base:     &manifest.Base{Epoch: 0, MaxLSN: startLSN, Files: []manifest.File{}},
		Deltas:   []manifest.Delta{},
	}
}

// status is one SendStatus call, with what the sink held at that moment.
type status struct {
	pos         cdc.LSN
	reply       bool // a reply was requested (a ping)
	manifestEnd cdc.LSN
	epoch       uint64
	// problem is set when the manifest could not be read, or names a file
	// it references that the sink does not hold (files before manifest).
	problem string
}

// fakeSource is a scripted replication stream. Receive hands out pushed
// messages in order; with none left it waits for a push or for the
// deadline, and then returns context.DeadlineExceeded as the real stream
// does. SendStatus records every position together with the manifest's end
// LSN read from the sink at that moment.
type fakeSource struct {
	store *memory.Store

	mu       sync.Mutex
	queue    []Message
	failWith error // returned by Receive once the queue is empty
	waiting  bool  // blocked in Receive with nothing left to hand out
	timeouts int   // Receive calls that ended at their deadline
	statuses []status
	wake     chan struct{}
	// answerPings makes SendStatus with reply queue a keepalive, as a live
	// walsender does.
	answerPings bool
	// statusErr, when set, is what SendStatus returns (a broken
	// connection).
	statusErr error
}

// failStatus makes every later SendStatus fail with err.
func (s *fakeSource) failStatus(err error) {
	s.mu.Lock()
	s.statusErr = err
	s.mu.Unlock()
}

func newFakeSource(store *memory.Store) *fakeSource {
	return &fakeSource{store: store, wake: make(chan struct{}, 1)}
}

func (s *fakeSource) push(msgs ...Message) {
	s.mu.Lock()
	s.queue = append(s.queue, msgs...)
	s.waiting = false
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// fail makes Receive return err once the pushed messages are handed out,
// as a broken connection does.
func (s *fakeSource) fail(err error) {
	s.mu.Lock()
	s.failWith = err
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *fakeSource) Receive(ctx context.Context) (Message, error) {
	if _, ok := ctx.Deadline(); !ok {
		return Message{}, errors.New("fake source: Receive without a deadline")
	}
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			m := s.queue[0]
			s.queue = s.queue[1:]
			s.waiting = false
			s.mu.Unlock()
			return m, nil
		}
		if s.failWith != nil {
			err := s.failWith
			s.mu.Unlock()
			return Message{}, err
		}
		s.waiting = true
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			s.mu.Lock()
			s.waiting = false
			s.timeouts++
			s.mu.Unlock()
			return Message{}, ctx.Err()
		}
	}
}

func (s *fakeSource) SendStatus(_ context.Context, pos cdc.LSN, reply bool) error {
	st := status{pos: pos, reply: reply}
	s.mu.Lock()
	answer := reply && s.answerPings
	failed := s.statusErr
	s.mu.Unlock()
	if failed != nil {
		return failed
	}
	if answer {
		defer s.push(Message{Keepalive: true, ServerWALEnd: pos})
	}
	m, _, err := manifest.Load(context.Background(), s.store)
	if err != nil {
		st.problem = fmt.Sprintf("read manifest: %v", err)
	} else {
		st.manifestEnd, st.epoch = m.EndLSN, m.Epoch
		for _, t := range m.Tables {
			for _, d := range t.Deltas {
				for _, f := range d.Files {
					if _, _, err := s.store.ReadVersion(context.Background(), f.Path); err != nil {
						st.problem += fmt.Sprintf("manifest names %s: %v; ", f.Path, err)
					}
				}
			}
		}
	}
	s.mu.Lock()
	s.statuses = append(s.statuses, st)
	s.mu.Unlock()
	return nil
}

func (s *fakeSource) snapshot() (statuses []status, timeouts int, idle bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]status(nil), s.statuses...), s.timeouts, s.waiting && len(s.queue) == 0
}

// errSink is the failure flakySink injects.
var errSink = errors.New("injected sink failure")

// flakySink wraps the memory store; the service writes through it, and the
// test can make its delta uploads or manifest writes fail.
type flakySink struct {
	*memory.Store
	failPut   atomic.Bool
	failPutIf atomic.Bool
	// onPut, when set, runs at the start of every Put (e.g. to hold an
	// upload in flight).
	onPut atomic.Pointer[func(key string)]
}

func (s *flakySink) Put(ctx context.Context, key string, r io.Reader) error {
	if hook := s.onPut.Load(); hook != nil {
		(*hook)(key)
	}
	if s.failPut.Load() {
		return fmt.Errorf("put %s: %w", key, errSink)
	}
	return s.Store.Put(ctx, key, r)
}

func (s *flakySink) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (blob.Version, error) {
	if s.failPutIf.Load() {
		return "", fmt.Errorf("put %s if version %s: %w", key, expected, errSink)
	}
	return s.Store.PutIf(ctx, key, data, expected)
}

type options struct {
	limits  flush.Limits
	standby time.Duration
	drain   time.Duration
	budget  int64
	catchUp cdc.LSN // Config.CatchUp
	// receiveTimeout is Config.ReceiveTimeout; answerPings makes the source
	// answer reply requests.
	receiveTimeout time.Duration
	answerPings    bool
	catalog        ColumnDescriber // Config.Columns
	// chunks and chunkRows are Config.Chunks and Config.ChunkRows.
	chunks    ChunkSource
	chunkRows int
	// manifest, if set, edits the initial manifest.
	manifest func(*manifest.Manifest)
	// committed, if set, is told of every manifest version the service's
	// committer writes (manifest.Observer.Committed: the post-commit seam).
	committed func(*manifest.Manifest)
}

// harness runs one Service over a fakeSource and a memory sink.
type harness struct {
	t      *testing.T
	store  *memory.Store
	sink   *flakySink
	src    *fakeSource
	svc    *Service
	cancel context.CancelFunc
	done   chan error

	finished bool
	result   error
}

const waitLimit = 5 * time.Second

func start(t *testing.T, o options) *harness {
	t.Helper()
	if o.limits == (flush.Limits{}) {
		o.limits = flush.Limits{Interval: time.Hour, MaxRows: 1 << 30}
	}
	if o.standby == 0 {
		o.standby = 10 * time.Millisecond
	}
	if o.drain == 0 {
		o.drain = waitLimit
	}
	if o.budget == 0 {
		o.budget = 1 << 20
	}
	ctx := context.Background()
	store := memory.New()
	m := &manifest.Manifest{
		Source: manifest.Source{SystemIdentifier: "7440312345678901234", Timeline: 1, Database: "app",
			Slot: "pg_cdc_slot", Publication: "pg_cdc_pub"},
		Epoch:  0,
		EndLSN: startLSN,
		Tables: map[string]*manifest.Table{
			"public.items": manifestTable("items", itemsOID),
			"public.other": manifestTable("other", otherOID),
		},
		History: []manifest.EpochRecord{},
	}
	if o.manifest != nil {
		o.manifest(m)
	}
	sink := &flakySink{Store: store}
	mc, err := manifest.Create(ctx, sink, m, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	mc.SetObserver(manifest.Observer{Committed: o.committed})
	log := slog.New(slog.DiscardHandler)
	fc := &flush.Committer{Store: sink, Manifest: mc, Workers: 2, Now: time.Now}
	src := newFakeSource(store)
	src.answerPings = o.answerPings
	svc, err := New(Config{
		Limits:          o.limits,
		StandbyInterval: o.standby,
		DrainTimeout:    o.drain,
		StateDir:        t.TempDir(),
		MemoryBudget:    o.budget,
		XIDRef:          500,
		CatchUp:         o.catchUp,
		ReceiveTimeout:  o.receiveTimeout,
		Columns:         o.catalog,
		Chunks:          o.chunks,
		ChunkRows:       o.chunkRows,
	}, src, fc, log)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	h := &harness{t: t, store: store, sink: sink, src: src, svc: svc, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- svc.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if !h.finished {
			select {
			case h.result = <-h.done:
				h.finished = true
			case <-time.After(waitLimit):
				t.Errorf("Run did not return within %s of the stop request", waitLimit)
				return
			}
		}
		h.checkConfirms()
	})
	return h
}

// checkConfirms asserts design.md §1 invariants 1 and 2 over every status
// sent: the position never passed the manifest's end LSN stored at that
// moment, the manifest named only files already in the sink, and the
// confirmed position never went backwards.
func (h *harness) checkConfirms() {
	h.t.Helper()
	statuses, _, _ := h.src.snapshot()
	var prev cdc.LSN
	for i, st := range statuses {
		if st.problem != "" {
			h.t.Errorf("status %d (pos %s): %s", i, st.pos, st.problem)
		}
		if st.pos > st.manifestEnd {
			h.t.Errorf("status %d confirmed %s while the manifest's end LSN was %s (epoch %d): over-confirmed",
				i, st.pos, st.manifestEnd, st.epoch)
		}
		if st.pos < prev {
			h.t.Errorf("status %d confirmed %s after %s: the confirmed position went backwards", i, st.pos, prev)
		}
		prev = max(prev, st.pos)
	}
}

func (h *harness) push(msgs ...Message) { h.src.push(msgs...) }

// waitFor polls cond until it holds.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case err := <-h.done:
			h.finished, h.result = true, err
			h.t.Fatalf("Run returned %v while waiting for %s", err, what)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// waitIdle waits until every pushed message was handled, with whatever the
// loop does after it (flush, idle advance, status), and the service waits
// for more.
func (h *harness) waitIdle() {
	h.t.Helper()
	h.waitFor("the service to handle every pushed message", func() bool {
		_, _, idle := h.src.snapshot()
		return idle
	})
}

// waitTurns waits until n more receives ended at their deadline, so that the
// loop has run its timers (flush interval, idle advance, standby status) n
// more times.
func (h *harness) waitTurns(n int) {
	h.t.Helper()
	_, from, _ := h.src.snapshot()
	h.waitFor(fmt.Sprintf("%d receive timeouts", n), func() bool {
		_, now, _ := h.src.snapshot()
		return now >= from+n
	})
}

// wait returns Run's result once it has returned on its own.
func (h *harness) wait() error {
	h.t.Helper()
	if h.finished {
		return h.result
	}
	select {
	case h.result = <-h.done:
		h.finished = true
		return h.result
	case <-time.After(waitLimit):
		h.t.Fatalf("Run did not return within %s", waitLimit)
		return nil
	}
}

// stop requests a stop and returns Run's result.
func (h *harness) stop() error {
	h.t.Helper()
	h.cancel()
	return h.wait()
}

func (h *harness) running() bool {
	if h.finished {
		return false
	}
	select {
	case err := <-h.done:
		h.finished, h.result = true, err
		return false
	default:
		return true
	}
}

func (h *harness) manifest() *manifest.Manifest {
	h.t.Helper()
	m, _, err := manifest.Load(context.Background(), h.store)
	if err != nil {
		h.t.Fatal(err)
	}
	return m
}

func (h *harness) statuses() []status {
	st, _, _ := h.src.snapshot()
	return st
}

// confirmed is the highest position sent so far.
func (h *harness) confirmed() cdc.LSN {
	var c cdc.LSN
	for _, st := range h.statuses() {
		c = max(c, st.pos)
	}
	return c
}

func (h *harness) sentPosition(pos cdc.LSN) (status, bool) {
	for _, st := range h.statuses() {
		if st.pos == pos {
			return st, true
		}
	}
	return status{}, false
}

// deltaEpochs lists a table's delta epochs and row counts, as "epoch:rows".
func deltaEpochs(m *manifest.Manifest, table string) []string {
	out := []string{}
	for _, d := range m.Tables[table].Deltas {
		out = append(out, fmt.Sprintf("%d:%d", d.Epoch, d.Rows))
	}
	return out
}

// rows reads back the delta rows of one table and epoch, checking that the
// manifest's row counts and LSN bounds match the file.
func (h *harness) rows(m *manifest.Manifest, table string, epoch uint64) []string {
	h.t.Helper()
	mt := m.Tables[table]
	for _, d := range mt.Deltas {
		if d.Epoch != epoch {
			continue
		}
		var out []string
		minLSN, maxLSN := cdc.LSN(1<<64-1), cdc.LSN(0)
		for _, f := range d.Files {
			if want := manifest.FileKey(mt.ID(), "g0001", manifest.KindDelta, epoch, 0); f.Path != want {
				h.t.Errorf("%s epoch %d: file %s, want %s", table, epoch, f.Path, want)
			}
			rs := h.readFile(f.Path)
			if int64(len(rs)) != f.Rows {
				h.t.Errorf("%s: manifest says %d rows, the file has %d", f.Path, f.Rows, len(rs))
			}
			for _, r := range rs {
				out = append(out, r.String())
				minLSN, maxLSN = min(minLSN, r.lsn), max(maxLSN, r.lsn)
			}
		}
		if int64(len(out)) != d.Rows {
			h.t.Errorf("%s epoch %d: manifest says %d rows, files hold %d", table, epoch, d.Rows, len(out))
		}
		if len(out) > 0 && (d.MinLSN != minLSN || d.MaxLSN != maxLSN) {
			h.t.Errorf("%s epoch %d: manifest LSN range %s..%s, rows %s..%s", table, epoch, d.MinLSN, d.MaxLSN, minLSN, maxLSN)
		}
		return out
	}
	h.t.Fatalf("%s has no delta for epoch %d (deltas %v)", table, epoch, deltaEpochs(m, table))
	return nil
}

// deltaRow is one change row read back from a delta file.
type deltaRow struct {
	op  string
	lsn cdc.LSN
	seq int64
	xid cdc.XID
	id  string // "null" when NULL
	v   string // "null" when NULL
}

func (r deltaRow) String() string {
	return fmt.Sprintf("%s id=%s v=%s lsn=%s seq=%d xid=%d", r.op, r.id, r.v, r.lsn, r.seq, r.xid)
}

// row formats an expected row like deltaRow.String.
func row(op string, id, v string, lsn cdc.LSN, seq int64, xid cdc.XID) string {
	return deltaRow{op: op, id: id, v: v, lsn: lsn, seq: seq, xid: xid}.String()
}

func (h *harness) readFile(key string) []deltaRow {
	h.t.Helper()
	rc, err := h.store.Get(context.Background(), key)
	if err != nil {
		h.t.Fatal(err)
	}
	content, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		h.t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(content), int64(len(content)))
	if err != nil {
		h.t.Fatalf("open %s: %v", key, err)
	}
	leaf := map[string]int{}
	for i, p := range f.Schema().Columns() {
		leaf[strings.Join(p, ".")] = i
	}
	for _, name := range []string{"__op", "__lsn", "__seq", "__xid", "id", "v"} {
		if _, ok := leaf[name]; !ok {
			h.t.Fatalf("%s: no column %s (columns %v)", key, name, f.Schema().Columns())
		}
	}
	var out []deltaRow
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		buf := make([]parquet.Row, 16)
		for {
			n, err := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				d := deltaRow{id: "null", v: "null"}
				for _, v := range r {
					switch v.Column() {
					case leaf["__op"]:
						d.op = string(v.ByteArray())
					case leaf["__lsn"]:
						d.lsn = cdc.LSN(v.Int64())
					case leaf["__seq"]:
						d.seq = v.Int64()
					case leaf["__xid"]:
						d.xid = cdc.XID(v.Int64())
					case leaf["id"]:
						if !v.IsNull() {
							d.id = fmt.Sprint(v.Int64())
						}
					case leaf["v"]:
						if !v.IsNull() {
							d.v = string(v.ByteArray())
						}
					}
				}
				out = append(out, d)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				h.t.Fatalf("read %s: %v", key, err)
			}
		}
		rows.Close()
	}
	return out
}

// deltaKeys lists the delta files in the sink, referenced or not.
func (h *harness) deltaKeys() []string {
	h.t.Helper()
	objs, err := h.store.List(context.Background(), "public/")
	if err != nil {
		h.t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}
