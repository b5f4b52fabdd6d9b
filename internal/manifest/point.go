package manifest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// PointKind is the form of a point in the history (design.md §11).
type PointKind string

// Point kinds.
const (
	PointVersion PointKind = "version" // a manifest version: "1234"
	PointEpoch   PointKind = "epoch"   // "epoch:N"
	PointLSN     PointKind = "lsn"     // "lsn:X/Y"
	PointTime    PointKind = "time"    // RFC 3339
	// PointRef is any other name: a ref or tag, looked up by its owner.
	PointRef PointKind = "ref"
)

// Point is a position in the history a reader asks for.
type Point struct {
	Kind    PointKind
	Version uint64
	Epoch   uint64
	LSN     cdc.LSN
	Time    time.Time
	Ref     string
}

// ParsePoint parses "epoch:N", "lsn:X/Y", an RFC 3339 time, or a version
// number. Anything else that is not empty is a ref name (Kind PointRef),
// for the caller to look up; "epoch:" and "lsn:" with a malformed value
// are errors, not names.
func ParsePoint(s string) (Point, error) {
	switch {
	case s == "":
		return Point{}, errors.New("parse point: empty")
	case strings.HasPrefix(s, "epoch:"):
		n, err := strconv.ParseUint(strings.TrimPrefix(s, "epoch:"), 10, 64)
		if err != nil {
			return Point{}, fmt.Errorf("parse point %q: want epoch:N with N a whole number", s)
		}
		return Point{Kind: PointEpoch, Epoch: n}, nil
	case strings.HasPrefix(s, "lsn:"):
		l, err := cdc.ParseLSN(strings.TrimPrefix(s, "lsn:"))
		if err != nil {
			return Point{}, fmt.Errorf("parse point %q: %w", s, err)
		}
		return Point{Kind: PointLSN, LSN: l}, nil
	}
	if isDigits(s) {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return Point{}, fmt.Errorf("parse point %q: version out of range", s)
		}
		return Point{Kind: PointVersion, Version: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Point{Kind: PointTime, Time: t.UTC()}, nil
	}
	return Point{Kind: PointRef, Ref: s}, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// String renders the point as ParsePoint reads it.
func (p Point) String() string {
	switch p.Kind {
	case PointVersion:
		return strconv.FormatUint(p.Version, 10)
	case PointEpoch:
		return "epoch:" + strconv.FormatUint(p.Epoch, 10)
	case PointLSN:
		return "lsn:" + p.LSN.String()
	case PointTime:
		return p.Time.UTC().Format(time.RFC3339Nano)
	}
	return p.Ref
}

// Resolved is the version a point names, and the cut the reader applies to
// its rows.
type Resolved struct {
	Point   Point
	Version uint64
	Header  Header
	// UpToLSN, for an lsn point, is X: keep only rows whose __lsn ≤ X.
	// It is exact: the version is the first whose end LSN reaches X, so
	// every base in it folds only rows before X. Zero for other points.
	UpToLSN cdc.LSN
	// UpToTime, for a time point, is T: keep only rows whose __op_ts ≤ T.
	// Zero for other points.
	UpToTime time.Time
	// AfterNewest says a time point is later than every commit the sink
	// holds: the version is the newest, which holds every transaction up
	// to its end LSN and none after.
	AfterNewest bool
}

// ErrOutsideRetention is the class of the error for a point before the
// oldest readable version or after the newest (OutsideRetentionError).
var ErrOutsideRetention = errors.New("point is outside the history the sink retains")

// ErrNoVersion is the class of the error for an epoch inside the window
// that no version committed.
var ErrNoVersion = errors.New("no manifest version matches the point")

// OutsideRetentionError names the point and the window that is available.
type OutsideRetentionError struct {
	Point          Point
	After          bool // after the newest (else before the oldest)
	Oldest, Newest Header
}

func (e *OutsideRetentionError) Error() string {
	where := "before the oldest version still readable"
	if e.After {
		where = "after the newest version"
	}
	return fmt.Sprintf("point %s is %s: the history holds %s to %s (history.retention)", e.Point, where, describe(e.Oldest), describe(e.Newest))
}

// Is makes the error match ErrOutsideRetention.
func (e *OutsideRetentionError) Is(target error) bool { return target == ErrOutsideRetention }

func describe(h Header) string {
	s := fmt.Sprintf("version %d (epoch %d, lsn %s", h.Version, h.Epoch, h.EndLSN)
	if !h.MaxCommitTime.IsZero() {
		s += ", commits to " + h.MaxCommitTime.UTC().Format(time.RFC3339Nano)
	}
	return s + ", committed " + h.CommittedAt.UTC().Format(time.RFC3339) + ")"
}

// outside builds the error for p, reading the window's ends (best effort:
// an end that cannot be read is left zero).
func (h *History) outside(ctx context.Context, p Point, after bool) error {
	e := &OutsideRetentionError{Point: p, After: after}
	e.Oldest, _ = h.Oldest(ctx)
	e.Newest, _ = h.Latest(ctx)
	return e
}

// Resolve returns the version a point names (a ref is not resolved here:
// its owner looks it up and asks for the version):
//
//   - a version number: that version;
//   - epoch:N: the last version whose epoch is N;
//   - lsn:X/Y: the first version whose end LSN is ≥ X;
//   - a time T: the first version whose newest history record's
//     max_commit_time is ≥ T, or the newest version when none is yet;
//
// and then, when the point holds the whole of that version (an epoch; an
// LSN at or past its end LSN; a time at or past its newest commit), the
// last version of its epoch: the versions after a flush that keep its
// epoch add no transaction — they compact, collect, advance the end LSN
// over an idle stretch, or add the chunks of a snapshot (the initial one
// is a run of epoch-0 versions, the first with no rows yet) — so the last
// is the whole state of the point. A point inside a version stays at the
// first: a later compaction may have folded rows past the point into a
// base, which no bound can take apart again.
//
// It bisects over the dense version numbers between the oldest readable
// version and the newest, reading about 20 small headers (cached). The
// window's oldest end is exact for each form: a point before the oldest
// version's own epoch, end LSN or commit time could need a version no
// longer readable, and gives an error matching ErrOutsideRetention, as does
// a point after the newest version (a later epoch or LSN).
//
// Epochs never decrease from one version to the next. End LSNs do once: a
// rebuild onto another upstream (--accept-new-upstream) restarts them; and
// the max commit time of a flush can be earlier than the previous one's
// (concurrent commits, a clock step). Where the key decreases, "the first
// version" is not well defined, and Resolve returns a crossing: a version
// whose key reaches the point while the one before does not, the one the
// bisection meets, which need not be the first in the window.
func (h *History) Resolve(ctx context.Context, p Point) (Resolved, error) {
	if p.Kind == PointRef {
		return Resolved{}, fmt.Errorf("resolve %q: a ref is resolved by the refs, not the history", p.Ref)
	}
	newest, err := h.Latest(ctx)
	if err != nil {
		return Resolved{}, err
	}
	oldest, err := h.Oldest(ctx)
	if err != nil {
		return Resolved{}, err
	}
	res := Resolved{Point: p}
	outside := func(after bool) error {
		return &OutsideRetentionError{Point: p, After: after, Oldest: oldest, Newest: newest}
	}
	// first finds the first version whose header satisfies reaches,
	// knowing the oldest's does not and the newest's does.
	first := func(reaches func(Header) bool) (Header, error) {
		if reaches(oldest) {
			return oldest, nil
		}
		return h.search(ctx, oldest.Version, newest.Version, newest, reaches)
	}
	var hd Header
	switch p.Kind {
	case PointVersion:
		if p.Version < oldest.Version || p.Version > newest.Version {
			return Resolved{}, outside(p.Version > newest.Version)
		}
		if hd, err = h.Header(ctx, p.Version); err != nil {
			return Resolved{}, err
		}
	case PointEpoch:
		if p.Epoch < oldest.Epoch || p.Epoch > newest.Epoch {
			return Resolved{}, outside(p.Epoch > newest.Epoch)
		}
		if hd, err = first(func(x Header) bool { return x.Epoch >= p.Epoch }); err != nil {
			return Resolved{}, err
		}
		if hd.Epoch != p.Epoch {
			return Resolved{}, fmt.Errorf("resolve %s: %w: version %d has epoch %d and the one before it an earlier one", p, ErrNoVersion, hd.Version, hd.Epoch)
		}
	case PointLSN:
		if p.LSN < oldest.EndLSN || p.LSN > newest.EndLSN {
			return Resolved{}, outside(p.LSN > newest.EndLSN)
		}
		if hd, err = first(func(x Header) bool { return x.EndLSN >= p.LSN }); err != nil {
			return Resolved{}, err
		}
		res.UpToLSN = p.LSN
	case PointTime:
		if p.Time.Before(oldest.MaxCommitTime) {
			return Resolved{}, outside(false)
		}
		reaches := func(x Header) bool { return !x.MaxCommitTime.Before(p.Time) }
		if !reaches(newest) {
			hd, res.AfterNewest = newest, true
		} else if hd, err = first(reaches); err != nil {
			return Resolved{}, err
		}
		res.UpToTime = p.Time
	default:
		return Resolved{}, fmt.Errorf("resolve: unknown point kind %q", p.Kind)
	}
	whole := p.Kind == PointEpoch ||
		p.Kind == PointLSN && p.LSN >= hd.EndLSN ||
		p.Kind == PointTime && !res.AfterNewest && !p.Time.Before(hd.MaxCommitTime)
	if whole {
		if hd, err = h.lastOfEpoch(ctx, hd, newest); err != nil {
			return Resolved{}, err
		}
	}
	res.Version, res.Header = hd.Version, hd
	return res, nil
}

// lastOfEpoch returns the header of the last version whose epoch is hd's,
// by bisection up to the newest; hd itself when the version before the
// next epoch lost its entry.
func (h *History) lastOfEpoch(ctx context.Context, hd, newest Header) (Header, error) {
	if newest.Epoch == hd.Epoch {
		return newest, nil
	}
	next, err := h.search(ctx, hd.Version, newest.Version, newest, func(x Header) bool { return x.Epoch > hd.Epoch })
	if err != nil || next.Version-1 == hd.Version {
		return hd, err
	}
	last, err := h.Header(ctx, next.Version-1)
	switch {
	case errors.Is(err, ErrNotReadable):
		return hd, nil
	case err != nil:
		return Header{}, err
	}
	return last, nil
}
