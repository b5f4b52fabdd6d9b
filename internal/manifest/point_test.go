package manifest

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func TestParsePoint(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 30, 0, 500_000_000, time.UTC)
	for _, tc := range []struct {
		in   string
		want Point
		err  bool
	}{
		{in: "1234", want: Point{Kind: PointVersion, Version: 1234}},
		{in: "0", want: Point{Kind: PointVersion}},
		{in: "epoch:42", want: Point{Kind: PointEpoch, Epoch: 42}},
		{in: "lsn:16/B374D848", want: Point{Kind: PointLSN, LSN: 0x16B374D848}},
		{in: "2026-12-01T09:30:00.5Z", want: Point{Kind: PointTime, Time: at}},
		{in: "2026-12-01T10:30:00.5+01:00", want: Point{Kind: PointTime, Time: at}},
		{in: "main", want: Point{Kind: PointRef, Ref: "main"}},
		{in: "raw@2026-12-01T09:30:00Z", want: Point{Kind: PointRef, Ref: "raw@2026-12-01T09:30:00Z"}},
		{in: "2026-12-01", want: Point{Kind: PointRef, Ref: "2026-12-01"}},
		{in: "", err: true},
		{in: "epoch:", err: true},
		{in: "epoch:-1", err: true},
		{in: "lsn:16", err: true},
		{in: "lsn:G/0", err: true},
		{in: "99999999999999999999999", err: true},
	} {
		got, err := ParsePoint(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("ParsePoint(%q) = %+v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got.Kind != tc.want.Kind || got.Version != tc.want.Version || got.Epoch != tc.want.Epoch ||
			got.LSN != tc.want.LSN || !got.Time.Equal(tc.want.Time) || got.Ref != tc.want.Ref {
			t.Errorf("ParsePoint(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParsePoint(f *testing.F) {
	for _, s := range []string{"12", "epoch:3", "lsn:0/1", "2026-12-01T09:30:00Z", "main", "epoch:x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePoint(s)
		if err != nil {
			return
		}
		again, err := ParsePoint(p.String())
		if err != nil || again.Kind != p.Kind || again.Version != p.Version || again.Epoch != p.Epoch || again.LSN != p.LSN || !again.Time.Equal(p.Time) {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, p, p.String(), again, err)
		}
	})
}

// getCounter counts Gets.
type getCounter struct {
	sink
	mu   sync.Mutex
	gets int
}

func (g *getCounter) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	g.mu.Lock()
	g.gets++
	g.mu.Unlock()
	return g.sink.Get(ctx, key)
}

func (g *getCounter) reset() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.gets
	g.gets = 0
	return n
}

// step is one version of a scripted history: its epoch, end LSN and the
// max commit time of its newest history record (a new record when the
// epoch moves).
type step struct {
	epoch uint64
	lsn   cdc.LSN
	mct   time.Time
}

// scripted commits steps as versions 2, 3, … after a manifest with no
// tables (version 1: epoch 0, LSN 0/1000, commit time t0).
func scripted(t *testing.T, store sink, steps []step) *sim {
	t.Helper()
	s := &sim{t: t, ctx: context.Background(), store: store, clock: simStart, committed: map[uint64][]byte{}, kind: map[uint64]string{}}
	m := &Manifest{Source: Source{SystemIdentifier: "1"}, EndLSN: 0x1000, Tables: map[string]*Table{}}
	m.AppendHistory(EpochRecord{Epoch: 0, EndLSN: 0x1000, MaxCommitTime: simStart, FlushedAt: simStart})
	mc, err := Create(s.ctx, store, m, simStart)
	if err != nil {
		t.Fatal(err)
	}
	s.own(mc)
	s.record(mc.Current(), "create")
	for _, st := range steps {
		s.commit(mc, "step", func(m *Manifest) error {
			if st.epoch != m.Epoch {
				m.AppendHistory(EpochRecord{Epoch: st.epoch, EndLSN: st.lsn, MaxCommitTime: st.mct, FlushedAt: s.clock})
			}
			m.Epoch, m.EndLSN = st.epoch, st.lsn
			return nil
		})
	}
	return s
}

func (s *sim) headers() []Header {
	out := make([]Header, len(s.committed)+1)
	for v, data := range s.committed {
		m, err := Decode(data)
		if err != nil {
			s.t.Fatal(err)
		}
		out[v] = HeaderOf(m)
	}
	return out
}

// TestResolve: each point form on a monotonic history of 1,500 versions
// (three groups of the log) where every third version is a compaction
// (same epoch, LSN and time): the version found is the first that reaches
// the point, in at most about 2·log2(n) small reads.
func TestResolve(t *testing.T) {
	store := &getCounter{sink: memory.New()}
	var steps []step
	epoch, lsn, mct := uint64(0), cdc.LSN(0x1000), simStart
	for i := 2; i <= 1500; i++ {
		if i%3 != 0 {
			epoch, lsn, mct = epoch+1, lsn+0x100, mct.Add(time.Second)
		}
		steps = append(steps, step{epoch, lsn, mct})
	}
	s := scripted(t, store, steps)
	hs := s.headers()
	h := NewHistory(store)
	ctx := context.Background()
	firstWhere := func(pred func(Header) bool) uint64 {
		for v := 1; v < len(hs); v++ {
			if pred(hs[v]) {
				return uint64(v)
			}
		}
		return uint64(len(hs) - 1)
	}
	check := func(point string, want uint64) {
		t.Helper()
		p, err := ParsePoint(point)
		if err != nil {
			t.Fatal(err)
		}
		store.reset()
		r, err := h.Resolve(ctx, p)
		gets := store.reset()
		if err != nil {
			t.Fatalf("Resolve(%s): %v", point, err)
		}
		if r.Version != want || r.Header != hs[want] {
			t.Errorf("Resolve(%s) = version %d, want %d", point, r.Version, want)
		}
		if gets > 28 {
			t.Errorf("Resolve(%s) made %d reads", point, gets)
		}
	}
	// lastOfEpoch is where a point that holds all of version v goes: the
	// compaction after a flush keeps its epoch and adds no transaction.
	lastOfEpoch := func(v uint64) uint64 {
		for v+1 < uint64(len(hs)) && hs[v+1].Epoch == hs[v].Epoch {
			v++
		}
		return v
	}
	for _, e := range []uint64{0, 1, 2, 500, 998, 999} {
		check("epoch:"+itoa(e), lastOfEpoch(firstWhere(func(x Header) bool { return x.Epoch >= e })))
	}
	for _, x := range []cdc.LSN{0x1000, 0x1001, 0x1100, 0x1234, 0x1000 + 0x100*700, 0x1000 + 0x100*999} {
		v := firstWhere(func(h Header) bool { return h.EndLSN >= x })
		if x >= hs[v].EndLSN {
			v = lastOfEpoch(v) // the point holds the whole version
		}
		check("lsn:"+x.String(), v)
	}
	for _, d := range []time.Duration{0, time.Millisecond, time.Second, 333500 * time.Millisecond, 999 * time.Second} {
		at := simStart.Add(d)
		v := firstWhere(func(h Header) bool { return !h.MaxCommitTime.Before(at) })
		if !at.Before(hs[v].MaxCommitTime) {
			v = lastOfEpoch(v)
		}
		check(at.Format(time.RFC3339Nano), v)
	}
	check("1", 1)
	check("1000", 1000)
	check("1500", 1500)

	r, err := h.Resolve(ctx, Point{Kind: PointLSN, LSN: 0x1234})
	if err != nil || r.UpToLSN != 0x1234 {
		t.Errorf("lsn point: UpToLSN = %s, %v", r.UpToLSN, err)
	}
	later := simStart.Add(2000 * time.Second)
	r, err = h.Resolve(ctx, Point{Kind: PointTime, Time: later})
	if err != nil || r.Version != 1500 || !r.AfterNewest || !r.UpToTime.Equal(later) {
		t.Errorf("a time after the newest commit: %+v, %v; want the newest version, AfterNewest", r, err)
	}
	// The same points again come from the cache.
	store.reset()
	check("epoch:500", lastOfEpoch(firstWhere(func(x Header) bool { return x.Epoch >= 500 })))
}

func itoa(v uint64) string { return Point{Kind: PointVersion, Version: v}.String() }

// TestResolveNonMonotonic: end LSNs that restart (a rebuild onto another
// upstream) and commit times that go back (concurrent commits, a clock
// step). Resolve returns a crossing for every point: a version that reaches
// it while the one before does not; where the key is monotonic up to the
// point, that is the first.
func TestResolveNonMonotonic(t *testing.T) {
	store := memory.New()
	var steps []step
	epoch, mct := uint64(0), simStart
	lsns := []cdc.LSN{0x2000, 0x3000, 0x4000, 0x5000, 0x1800, 0x2800, 0x3800, 0x6000, 0x7000}
	for i, l := range lsns {
		epoch++
		mct = mct.Add(10 * time.Second)
		if i == 3 || i == 6 {
			mct = mct.Add(-25 * time.Second) // earlier than the version before
		}
		steps = append(steps, step{epoch, l, mct})
	}
	s := scripted(t, store, steps)
	hs := s.headers()
	h := NewHistory(store)
	ctx := context.Background()
	crossing := func(name string, v uint64, reaches func(Header) bool) {
		t.Helper()
		if !reaches(hs[v]) || v > 1 && reaches(hs[v-1]) {
			t.Errorf("%s: version %d is not a crossing", name, v)
		}
	}
	for x := cdc.LSN(0x1000); x <= 0x7000; x += 0x400 {
		r, err := h.Resolve(ctx, Point{Kind: PointLSN, LSN: x})
		if err != nil {
			t.Fatalf("lsn %s: %v", x, err)
		}
		crossing("lsn:"+x.String(), r.Version, func(h Header) bool { return h.EndLSN >= x })
	}
	for d := time.Duration(0); d <= 70*time.Second; d += 3 * time.Second {
		at := simStart.Add(d)
		r, err := h.Resolve(ctx, Point{Kind: PointTime, Time: at})
		if err != nil {
			t.Fatalf("time %s: %v", at, err)
		}
		if r.AfterNewest {
			continue
		}
		crossing(at.Format(time.RFC3339), r.Version, func(h Header) bool { return !h.MaxCommitTime.Before(at) })
	}
	// Before the dip the key is monotonic: the first version.
	r, err := h.Resolve(ctx, Point{Kind: PointLSN, LSN: 0x2800})
	if err != nil || r.Version != 3 {
		t.Errorf("lsn:0/2800 = version %d, %v; want 3", r.Version, err)
	}
}

// TestResolveOutsideRetention: points before the oldest readable version
// (after the log below it is pruned) and after the newest are errors that
// name both ends of the window.
func TestResolveOutsideRetention(t *testing.T) {
	store := memory.New()
	var steps []step
	for i := 1; i <= 300; i++ {
		steps = append(steps, step{uint64(i), cdc.LSN(0x1000 + 0x100*i), simStart.Add(time.Duration(i) * time.Second)})
	}
	s := scripted(t, store, steps)
	h := NewHistory(store)
	ctx := context.Background()
	objects, err := store.List(ctx, LogPrefix)
	if err != nil {
		t.Fatal(err)
	}
	plan := PlanRetention(objects, 250, 301, nil)
	// The log keeps 200 (250's checkpoint) on, but only 250 keeps its
	// files: the oldest a point resolves to is 250.
	if plan.Retained != 250 || plan.Oldest != 250 {
		t.Fatalf("plan: retained %d, oldest %d; want 250 and 250", plan.Retained, plan.Oldest)
	}
	if err := h.SetOldest(ctx, plan.Oldest); err != nil {
		t.Fatal(err)
	}
	for _, k := range plan.Delete {
		if err := store.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	// Oldest (version 250): epoch 249, LSN 0x1000+0x100*249, time t0+249s.
	for _, tc := range []struct {
		point string
		after bool
	}{
		{"249", false},
		{"302", true},
		{"epoch:248", false},
		{"epoch:301", true},
		{"lsn:" + cdc.LSN(0x1000+0x100*249-1).String(), false},
		{"lsn:" + cdc.LSN(0x1000+0x100*300+1).String(), true},
		{simStart.Add(249*time.Second - time.Millisecond).Format(time.RFC3339Nano), false},
	} {
		p, err := ParsePoint(tc.point)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.Resolve(ctx, p)
		var oe *OutsideRetentionError
		if !errors.Is(err, ErrOutsideRetention) || !errors.As(err, &oe) || oe.After != tc.after {
			t.Errorf("Resolve(%s) = %v; want ErrOutsideRetention (after %v)", tc.point, err, tc.after)
			continue
		}
		msg := err.Error()
		for _, want := range []string{"version 250 (epoch 249, lsn 0/10900", "version 301 (epoch 300, lsn 0/13C00"} {
			if !strings.Contains(msg, want) {
				t.Errorf("Resolve(%s): %q does not name %q", tc.point, msg, want)
			}
		}
	}
	// The oldest point itself, in each form, is the oldest version.
	for _, point := range []string{"250", "epoch:249", "lsn:0/10900", simStart.Add(249 * time.Second).Format(time.RFC3339)} {
		p, _ := ParsePoint(point)
		r, err := h.Resolve(ctx, p)
		if err != nil || r.Version != 250 {
			t.Errorf("Resolve(%s) = %d, %v; want version 250", point, r.Version, err)
		}
	}
	if _, err := h.At(ctx, 150); !errors.Is(err, ErrOutsideRetention) {
		t.Errorf("At(150) = %v, want ErrOutsideRetention", err)
	}
	s.committed = map[uint64][]byte{200: s.committed[200], 250: s.committed[250], 301: s.committed[301]}
	s.checkAll()
}

var _ blob.Store = (*getCounter)(nil)
