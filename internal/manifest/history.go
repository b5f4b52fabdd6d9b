package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

// ErrNotReadable is the class of the error At returns for a version inside
// the retention window that the log cannot rebuild (an entry lost to a log
// write that failed twice; see log.go).
var ErrNotReadable = errors.New("manifest version is not readable from the history log")

// History reads the committed manifest versions back from the log
// (log.go). It is safe for concurrent use. Headers are cached (log objects
// are never rewritten), so resolving points again costs little.
type History struct {
	store blob.Store

	mu      sync.Mutex
	headers map[uint64]Header
}

// headerCacheLimit bounds the header cache; it is emptied when full.
const headerCacheLimit = 1 << 16

// fetchParallel bounds the entries At reads at once.
const fetchParallel = 8

// NewHistory returns a reader of store's history. Reading needs Get and
// List; SetOldest uses a compare-and-swap when store is also a
// blob.Conditional.
func NewHistory(store blob.Store) *History {
	return &History{store: store, headers: map[uint64]Header{}}
}

func (h *History) get(ctx context.Context, key string) ([]byte, error) {
	r, err := h.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return data, nil
}

func (h *History) cached(v uint64) (Header, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, ok := h.headers[v]
	return hd, ok
}

func (h *History) cache(hd Header) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.headers) >= headerCacheLimit {
		clear(h.headers)
	}
	h.headers[hd.Version] = hd
}

// current reads the manifest: the newest version, readable whether or not
// its entry is written yet.
func (h *History) current(ctx context.Context) (*Manifest, error) {
	data, err := h.get(ctx, Key)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", Key, err)
	}
	return Decode(data)
}

// Latest returns the newest committed version's header (the manifest's).
func (h *History) Latest(ctx context.Context) (Header, error) {
	m, err := h.current(ctx)
	if err != nil {
		return Header{}, fmt.Errorf("newest version: %w", err)
	}
	hd := HeaderOf(m)
	if hd.Version != 0 {
		h.cache(hd)
	}
	return hd, nil
}

// Oldest returns the header of the oldest version still readable.
func (h *History) Oldest(ctx context.Context) (Header, error) {
	v, err := h.oldestVersion(ctx)
	if err != nil {
		return Header{}, err
	}
	return h.Header(ctx, v)
}

// oldestVersion reads OldestKey. Without one (a crash before the first
// record), it is the first checkpoint of group 0, or else the newest
// version.
func (h *History) oldestVersion(ctx context.Context) (uint64, error) {
	data, err := h.get(ctx, OldestKey)
	if err == nil {
		var rec oldestRecord
		if err := json.Unmarshal(data, &rec); err != nil || rec.Version == 0 {
			return 0, fmt.Errorf("oldest version: %s is not a version record", OldestKey)
		}
		return rec.Version, nil
	}
	if !errors.Is(err, blob.ErrNotFound) {
		return 0, fmt.Errorf("oldest version: %w", err)
	}
	idx, err := h.listGroup(ctx, 0)
	if err != nil {
		return 0, fmt.Errorf("oldest version: %w", err)
	}
	if cs := idx.sortedCheckpoints(); len(cs) > 0 {
		return cs[0], nil
	}
	latest, err := h.Latest(ctx)
	if err != nil {
		return 0, err
	}
	return latest.Version, nil
}

// Header returns version v's header, from its entry, its checkpoint, or
// the manifest when v is the newest version.
func (h *History) Header(ctx context.Context, v uint64) (Header, error) {
	if hd, ok := h.cached(v); ok {
		return hd, nil
	}
	data, err := h.get(ctx, LogEntryKey(v))
	switch {
	case err == nil:
		e, err := decodeEntry(data, v)
		if err != nil {
			return Header{}, err
		}
		h.cache(e.Header)
		return e.Header, nil
	case !errors.Is(err, blob.ErrNotFound):
		return Header{}, fmt.Errorf("header of version %d: %w", v, err)
	}
	data, err = h.get(ctx, CheckpointKey(v))
	switch {
	case err == nil:
		m, err := Decode(data)
		if err != nil {
			return Header{}, fmt.Errorf("checkpoint of version %d: %w", v, err)
		}
		if m.Version != v {
			return Header{}, fmt.Errorf("checkpoint of version %d holds version %d", v, m.Version)
		}
		hd := HeaderOf(m)
		h.cache(hd)
		return hd, nil
	case !errors.Is(err, blob.ErrNotFound):
		return Header{}, fmt.Errorf("header of version %d: %w", v, err)
	}
	m, err := h.current(ctx)
	if err != nil {
		return Header{}, fmt.Errorf("header of version %d: %w", v, err)
	}
	if m.Version == v {
		return HeaderOf(m), nil
	}
	return Header{}, fmt.Errorf("header of version %d: %w: no entry or checkpoint", v, ErrNotReadable)
}

// logIndex is what a listing says of the log: which versions have an
// entry and which a checkpoint.
type logIndex struct {
	entries, checkpoints map[uint64]bool
}

func newLogIndex(objects []blob.ObjectInfo) logIndex {
	idx := logIndex{entries: map[uint64]bool{}, checkpoints: map[uint64]bool{}}
	for _, o := range objects {
		v, cp, ok := ParseLogKey(o.Key)
		switch {
		case !ok:
		case cp:
			idx.checkpoints[v] = true
		default:
			idx.entries[v] = true
		}
	}
	return idx
}

func (idx logIndex) sortedCheckpoints() []uint64 {
	out := make([]uint64, 0, len(idx.checkpoints))
	for v := range idx.checkpoints {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// base returns the newest checkpoint c ≤ v from which the entries c+1..v
// all exist, or the first missing entry.
func (idx logIndex) base(v, floor uint64) (c uint64, missing uint64, ok bool) {
	for u := v; u >= max(floor, 1); u-- {
		if idx.checkpoints[u] {
			return u, 0, true
		}
		if !idx.entries[u] {
			return 0, u, false
		}
	}
	return 0, max(floor, 1) - 1, false
}

func (h *History) listGroup(ctx context.Context, g uint64) (logIndex, error) {
	objects, err := h.store.List(ctx, LogGroupPrefix(g*LogGroupSize))
	if err != nil {
		return logIndex{}, fmt.Errorf("list history log: %w", err)
	}
	return newLogIndex(objects), nil
}

// chain finds the checkpoint version v is rebuilt from, listing v's group
// and, only while the entries reach back past its start, earlier groups.
func (h *History) chain(ctx context.Context, v uint64) (checkpoint uint64, err error) {
	need := v
	for g := v / LogGroupSize; ; g-- {
		idx, err := h.listGroup(ctx, g)
		if err != nil {
			return 0, err
		}
		start := g * LogGroupSize
		c, missing, ok := idx.base(need, start)
		if ok {
			return c, nil
		}
		if missing >= start && missing != 0 || g == 0 {
			return 0, fmt.Errorf("version %d: %w: log entry %d is missing and no checkpoint after it", v, ErrNotReadable, max(missing, 1))
		}
		need = start - 1
	}
}

// At returns the manifest committed as version v, exactly: its encoding
// equals the one committed. It starts from the newest checkpoint at or
// before v whose entries reach v and applies their diffs. A version before
// the oldest readable one gives an error matching ErrOutsideRetention; one
// inside the window the log cannot rebuild, ErrNotReadable.
func (h *History) At(ctx context.Context, v uint64) (*Manifest, error) {
	if v == 0 {
		return nil, fmt.Errorf("manifest version 0: %w: versions start at 1", ErrNotReadable)
	}
	c, err := h.chain(ctx, v)
	if err != nil {
		if !errors.Is(err, ErrNotReadable) {
			return nil, fmt.Errorf("read manifest version %d: %w", v, err)
		}
		return h.notReadable(ctx, v, err)
	}
	m, err := h.rebuild(ctx, c, v)
	if err != nil {
		if errors.Is(err, blob.ErrNotFound) {
			// Collect deleted it while this read ran.
			return h.notReadable(ctx, v, err)
		}
		return nil, fmt.Errorf("read manifest version %d: %w", v, err)
	}
	return m, nil
}

// notReadable answers for a version the log cannot rebuild: the manifest
// itself when v is the newest (its entry may not be written yet), else the
// error that fits.
func (h *History) notReadable(ctx context.Context, v uint64, cause error) (*Manifest, error) {
	cur, err := h.current(ctx)
	if err != nil {
		return nil, fmt.Errorf("read manifest version %d: %w", v, err)
	}
	if cur.Version == v {
		return cur, nil
	}
	oldest, oerr := h.oldestVersion(ctx)
	if v > cur.Version || oerr == nil && v < oldest {
		return nil, h.outside(ctx, Point{Kind: PointVersion, Version: v}, v > cur.Version)
	}
	return nil, fmt.Errorf("read manifest version %d: %w", v, cause)
}

func (h *History) rebuild(ctx context.Context, c, v uint64) (*Manifest, error) {
	tree, err := h.rebuildTree(ctx, c, v)
	if err != nil {
		return nil, err
	}
	return decodeTree(tree, v)
}

// decodeTree decodes version v from its generic tree.
func decodeTree(tree any, v uint64) (*Manifest, error) {
	data, err := json.Marshal(tree)
	if err != nil {
		return nil, fmt.Errorf("rebuilt version %d: %w", v, err)
	}
	m, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("rebuilt version %d: %w", v, err)
	}
	if m.Version != v {
		return nil, fmt.Errorf("rebuilt version %d: it says version %d", v, m.Version)
	}
	return m, nil
}

// rebuildTree is version v's generic tree, from checkpoint c and the
// entries after it.
func (h *History) rebuildTree(ctx context.Context, c, v uint64) (any, error) {
	raw, err := h.get(ctx, CheckpointKey(c))
	if err != nil {
		return nil, fmt.Errorf("checkpoint of version %d: %w", c, err)
	}
	tree, err := decodeGeneric(raw)
	if err != nil {
		return nil, fmt.Errorf("checkpoint of version %d: %w", c, err)
	}
	entries := make([]*entry, v-c)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchParallel)
	for i := range entries {
		u := c + 1 + uint64(i)
		g.Go(func() error {
			data, err := h.get(gctx, LogEntryKey(u))
			if err != nil {
				return fmt.Errorf("log entry of version %d: %w", u, err)
			}
			e, err := decodeEntry(data, u)
			if err != nil {
				return err
			}
			entries[i] = e
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, e := range entries {
		h.cache(e.Header)
		if tree, err = applyOps(tree, e.Ops); err != nil {
			return nil, fmt.Errorf("log entry of version %d: %w", e.Version, err)
		}
	}
	return tree, nil
}

// Walk calls fn with every version from from to to, in order. It rebuilds
// from once and then applies each later entry, so a run of n versions
// reads n entries where n calls of At would read a chain each; a version
// whose entry is missing is read by At (from a later checkpoint, or the
// manifest itself for the newest). Errors are At's.
func (h *History) Walk(ctx context.Context, from, to uint64, fn func(*Manifest) error) error {
	if from == 0 || to < from {
		return fmt.Errorf("walk manifest versions %d to %d: %w: not a range of versions", from, to, ErrNotReadable)
	}
	m, err := h.At(ctx, from)
	if err != nil {
		return err
	}
	var tree any
	for v := from; ; v++ {
		if err := fn(m); err != nil || v == to {
			return err
		}
		if tree == nil {
			if tree, err = treeOf(m); err != nil {
				return err
			}
		}
		next, err := h.entryAfter(ctx, tree, v+1)
		if err != nil {
			// Lost, or not written yet: At knows where else to look.
			if m, err = h.At(ctx, v+1); err != nil {
				return err
			}
			tree = nil
			continue
		}
		if m, err = decodeTree(next, v+1); err != nil {
			return err
		}
		tree = next
	}
}

// treeOf is m's generic tree, as its stored encoding decodes.
func treeOf(m *Manifest) (any, error) {
	data, err := m.Encode()
	if err != nil {
		return nil, err
	}
	return decodeGeneric(data)
}

// entryAfter applies version v's entry to tree, version v-1's.
func (h *History) entryAfter(ctx context.Context, tree any, v uint64) (any, error) {
	data, err := h.get(ctx, LogEntryKey(v))
	if err != nil {
		return nil, err
	}
	e, err := decodeEntry(data, v)
	if err != nil {
		return nil, err
	}
	h.cache(e.Header)
	return applyOps(tree, e.Ops)
}

// search returns the smallest version in (lo, hi] whose header satisfies
// pred, given that hi's does (the caller checked) and lo's does not. It
// bisects over the dense version numbers, reading about log2(hi-lo)
// headers. For a pred that is not monotonic over the versions it returns
// a crossing: a version whose header satisfies pred while the one before
// does not. A version without a header (lost) is stepped over.
func (h *History) search(ctx context.Context, lo, hi uint64, hiHeader Header, pred func(Header) bool) (Header, error) {
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		v, hd, err := h.headerNear(ctx, mid, lo, hi)
		if err != nil {
			return Header{}, err
		}
		if v == 0 {
			break // no header between lo and hi
		}
		if pred(hd) {
			hi, hiHeader = v, hd
		} else {
			lo = v
		}
	}
	return hiHeader, nil
}

// headerNear reads the header of mid or, if mid's is lost, of the nearest
// version strictly between lo and hi that has one (0: none within reach).
func (h *History) headerNear(ctx context.Context, mid, lo, hi uint64) (uint64, Header, error) {
	const reach = 2 * CheckpointEvery
	var candidates []uint64
	for d := uint64(0); d <= reach; d++ {
		up, down := mid+d < hi, d < mid-lo
		if !up && !down {
			break
		}
		if up {
			candidates = append(candidates, mid+d)
		}
		if down && d > 0 {
			candidates = append(candidates, mid-d)
		}
	}
	for _, v := range candidates {
		hd, err := h.Header(ctx, v)
		if err == nil {
			return v, hd, nil
		}
		if !errors.Is(err, ErrNotReadable) {
			return 0, Header{}, err
		}
	}
	return 0, Header{}, nil
}

// VersionAt returns the version that was the newest at time t: the newest
// whose committed_at is at or before t (by bisection; see search). ok is
// false when the oldest readable version was committed after t.
func (h *History) VersionAt(ctx context.Context, t time.Time) (v uint64, ok bool, err error) {
	oldest, err := h.Oldest(ctx)
	if err != nil {
		return 0, false, err
	}
	latest, err := h.Latest(ctx)
	if err != nil {
		return 0, false, err
	}
	switch {
	case oldest.CommittedAt.After(t):
		return 0, false, nil
	case !latest.CommittedAt.After(t) || latest.Version <= oldest.Version:
		return latest.Version, true, nil
	}
	after, err := h.search(ctx, oldest.Version, latest.Version, latest, func(hd Header) bool { return hd.CommittedAt.After(t) })
	if err != nil {
		return 0, false, err
	}
	return after.Version - 1, true, nil
}

// SetOldest records v as the oldest readable version, unless a newer one
// is recorded already: the record never moves back, whichever of two
// concurrent collections writes last.
func (h *History) SetOldest(ctx context.Context, v uint64) error {
	data, err := encodeOldest(v)
	if err != nil {
		return err
	}
	cond, ok := h.store.(blob.Conditional)
	if !ok {
		if err := h.store.Put(ctx, OldestKey, bytes.NewReader(data)); err != nil {
			return fmt.Errorf("record oldest version: %w", err)
		}
		return nil
	}
	for range maxAttempts {
		cur, ver, err := cond.ReadVersion(ctx, OldestKey)
		switch {
		case errors.Is(err, blob.ErrNotFound):
			ver = ""
		case err != nil:
			return fmt.Errorf("record oldest version: %w", err)
		default:
			var rec oldestRecord
			if json.Unmarshal(cur, &rec) == nil && rec.Version >= v {
				return nil
			}
		}
		_, err = cond.PutIf(ctx, OldestKey, data, ver)
		if err == nil {
			return nil
		}
		if !errors.Is(err, blob.ErrPrecondition) {
			return fmt.Errorf("record oldest version: %w", err)
		}
	}
	return fmt.Errorf("record oldest version: %d conflicting writes in a row", maxAttempts)
}

// RetentionPlan is what a garbage collection keeps and deletes of the log.
type RetentionPlan struct {
	// Retained is the oldest version the retention keeps readable: the
	// one current at the retention boundary, or the first readable one
	// after it.
	Retained uint64
	// Oldest is the oldest version a point may resolve to once Delete is
	// done: Retained. The log from the checkpoint Retained is rebuilt from
	// stays, but the versions between that checkpoint and Retained lose
	// their data files, so resolving them would answer "collected, ask
	// again" for ever instead of "outside the retention".
	Oldest uint64
	// Keep lists the versions whose data files must stay: Retained and
	// every pinned version still readable.
	Keep []uint64
	// Unreadable lists pinned versions the log cannot rebuild: nothing
	// can be kept for them.
	Unreadable []uint64
	// Delete lists the log objects no kept version needs.
	Delete []string
}

// PlanRetention decides what of the log a garbage collection deletes.
// objects is a listing of the log (a listing of the whole sink will do);
// boundary the version current at the retention boundary (VersionAt), 0
// for none; latest the newest version; pinned the versions refs pin. It
// keeps the checkpoint Retained is rebuilt from and everything after it,
// and for each older pinned version its checkpoint and the entries up to
// it.
func PlanRetention(objects []blob.ObjectInfo, boundary, latest uint64, pinned []uint64) RetentionPlan {
	idx := newLogIndex(objects)
	var plan RetentionPlan
	if boundary == 0 {
		boundary = 1
	}
	keepFrom := boundary
	if c, _, ok := idx.base(boundary, 0); ok {
		plan.Retained, keepFrom = boundary, c
	} else {
		// Boundary is not readable: the first readable version after it
		// starts at the first checkpoint after it, or is the newest
		// (readable from the manifest itself).
		plan.Retained = latest
		for _, c := range idx.sortedCheckpoints() {
			if c > boundary {
				plan.Retained, keepFrom = c, c
				break
			}
		}
		keepFrom = min(keepFrom, plan.Retained)
	}
	plan.Oldest = plan.Retained
	plan.Keep = []uint64{plan.Retained}
	type span struct{ from, to uint64 }
	var spans []span
	for _, p := range pinned {
		if p >= keepFrom {
			if p <= latest && !slices.Contains(plan.Keep, p) {
				plan.Keep = append(plan.Keep, p)
			}
			continue
		}
		c, _, ok := idx.base(p, 0)
		if !ok {
			plan.Unreadable = append(plan.Unreadable, p)
			continue
		}
		spans = append(spans, span{c, p})
		if !slices.Contains(plan.Keep, p) {
			plan.Keep = append(plan.Keep, p)
		}
	}
	needed := func(v uint64) bool {
		if v >= keepFrom {
			return true
		}
		for _, s := range spans {
			if s.from <= v && v <= s.to {
				return true
			}
		}
		return false
	}
	for _, o := range objects {
		if v, _, ok := ParseLogKey(o.Key); ok && !needed(v) {
			plan.Delete = append(plan.Delete, o.Key)
		}
	}
	sort.Strings(plan.Delete)
	slices.Sort(plan.Keep)
	return plan
}
