// Package refs holds the sink's named points (design.md §11):
// `_pgcdc/refs.json`, written with compare-and-swap after the manifest,
// holds the branches — `staging`, which follows every committed manifest
// version, and `main`, which follows it too (promotion mode auto) or moves
// only when an operator promotes (manual). Tags `raw@<RFC 3339 time>` name
// every flush inside the history's retention window; they are not stored:
// the history itself holds them (each flush version's flushed_at), so a
// flush a second costs no growing file.
//
// Refs are derived from the manifest: a write that was lost (a crash after
// the manifest's commit, a store failure) is repaired by the next version
// (Follow); a branch never points at a version the history cannot read
// longer than the retention window, because the garbage collector keeps
// the files of every version a branch names (Pinned).
package refs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// Key is the refs file's key, beside the manifest.
const Key = "_pgcdc/refs.json"

// FormatVersion is the refs format this code writes and reads.
const FormatVersion = 1

// The branches.
const (
	Staging = "staging"
	Main    = "main"
)

// Promotion modes (promotion.mode): main follows staging, or moves only
// with pg-cdc promote.
const (
	ModeAuto   = "auto"
	ModeManual = "manual"
)

// TagPrefix starts the name of a flush's tag: raw@<flushed_at, RFC 3339>.
const TagPrefix = "raw@"

// Refs is the refs file.
type Refs struct {
	FormatVersion int `json:"format_version"`
	// Version counts the writes of the file (compare-and-swap).
	Version  uint64            `json:"version"`
	Branches map[string]Branch `json:"branches"`
}

// Branch is where a branch points: a manifest version, with what names it
// for a reader (epoch, end LSN, the newest commit time it holds).
type Branch struct {
	ManifestVersion uint64    `json:"manifest_version"`
	Epoch           uint64    `json:"epoch"`
	EndLSN          cdc.LSN   `json:"end_lsn"`
	MaxCommitTime   time.Time `json:"max_commit_time"`
	UpdatedAt       time.Time `json:"updated_at"`
	// By says what moved it last: "follow" (the daemon), "promote" (an
	// operator, with the user).
	By string `json:"by"`
}

// Branch returns the branch named name; a nil Refs (no refs file yet) has
// none.
func (r *Refs) Branch(name string) (Branch, bool) {
	if r == nil {
		return Branch{}, false
	}
	b, ok := r.Branches[name]
	return b, ok
}

// At is the branch pointing at m.
func At(m *manifest.Manifest, now time.Time, by string) Branch {
	b := Branch{ManifestVersion: m.Version, Epoch: m.Epoch, EndLSN: m.EndLSN, UpdatedAt: now.UTC(), By: by}
	if n := len(m.History); n > 0 {
		b.MaxCommitTime = m.History[n-1].MaxCommitTime
	}
	return b
}

// ErrNoRefs: the sink has no refs file yet (a capture before refs, or no
// version followed yet).
var ErrNoRefs = errors.New("no refs file")

// ErrUnreadable: the refs file exists but does not decode (damaged, or
// edited by hand). Load's error says how to recover.
var ErrUnreadable = errors.New("refs file is unreadable")

// unreadableError is an error of class ErrUnreadable with the fix.
type unreadableError struct{ cause error }

func (e unreadableError) Error() string {
	return fmt.Sprintf("%s is unreadable (%v): restore it, or delete it and the daemon writes it again (in promotion.mode manual, main then starts at the newest version unless a running daemon remembers it)", Key, e.cause)
}
func (e unreadableError) Is(target error) bool { return target == ErrUnreadable }
func (e unreadableError) Unwrap() error        { return e.cause }

// Load reads the refs file and its store version. A file that does not
// decode is an error of class ErrUnreadable, with its store version.
func Load(ctx context.Context, store blob.Conditional) (*Refs, blob.Version, error) {
	data, v, err := store.ReadVersion(ctx, Key)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, "", fmt.Errorf("read %s: %w", Key, ErrNoRefs)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", Key, err)
	}
	r, err := Decode(data)
	if err != nil {
		return nil, v, unreadableError{err}
	}
	return r, v, nil
}

// Decode parses a refs file.
func Decode(data []byte) (*Refs, error) {
	var r Refs
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode %s: %w", Key, err)
	}
	if r.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("decode %s: format version %d, this version reads %d", Key, r.FormatVersion, FormatVersion)
	}
	if r.Branches == nil {
		r.Branches = map[string]Branch{}
	}
	return &r, nil
}

// Encode writes the refs file (stable key order).
func (r *Refs) Encode() ([]byte, error) {
	r.FormatVersion = FormatVersion
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", Key, err)
	}
	return append(b, '\n'), nil
}

// maxAttempts bounds one Update's compare-and-swap retries.
const maxAttempts = 20

// Update applies mutate to the refs file (a new one when there is none)
// and writes it with compare-and-swap, again on a conflict with another
// writer. mutate reports whether it changed anything; nothing is written
// when it did not.
func Update(ctx context.Context, store blob.Conditional, mutate func(*Refs) (bool, error)) (*Refs, error) {
	return update(ctx, store, nil, mutate)
}

// update is Update with a way back for a file that is missing or does not
// decode: restore returns the refs to start from instead (nil: a missing
// file starts empty and a damaged one is an error). The write replaces
// exactly the version read, so a file someone fixed meanwhile is not
// overwritten.
func update(ctx context.Context, store blob.Conditional, restore func(cause error) *Refs, mutate func(*Refs) (bool, error)) (*Refs, error) {
	for range maxAttempts {
		r, v, err := Load(ctx, store)
		restored := false
		if errors.Is(err, ErrNoRefs) || errors.Is(err, ErrUnreadable) {
			var base *Refs
			if restore != nil {
				base = restore(err)
			}
			switch {
			case base != nil:
				r, err, restored = base.clone(), nil, true
			case errors.Is(err, ErrNoRefs):
				r, v, err = &Refs{FormatVersion: FormatVersion, Branches: map[string]Branch{}}, "", nil
			}
		}
		if err != nil {
			return nil, err
		}
		changed, err := mutate(r)
		if err != nil || !changed && !restored {
			return r, err
		}
		r.Version++
		data, err := r.Encode()
		if err != nil {
			return nil, err
		}
		_, err = store.PutIf(ctx, Key, data, v)
		if errors.Is(err, blob.ErrPrecondition) {
			continue // another writer: read its refs and apply again
		}
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", Key, err)
		}
		return r, nil
	}
	return nil, fmt.Errorf("write %s: %d conflicting writes in a row", Key, maxAttempts)
}

// Follow moves staging to m, a committed manifest version, and main too in
// auto mode: what the daemon does after every version. A branch never
// moves backwards (a follower that saw an older version than another
// writer). It writes nothing when the refs are already there.
func Follow(ctx context.Context, store blob.Conditional, m *manifest.Manifest, mode string, now time.Time) (*Refs, error) {
	return Update(ctx, store, follow(m, mode, now))
}

// Follower is Follow for a long-lived process (the daemon). It remembers
// the refs it last read or wrote, so that a refs file deleted or damaged
// under it is written again from what it held — a manual main keeps the
// position it was promoted to — rather than main starting over at the
// newest version (a missing file) or every later follow failing (a damaged
// one). Not safe for concurrent use: one goroutine follows.
type Follower struct {
	Store blob.Conditional
	Mode  string
	// Restored is told when a missing or damaged file is written again
	// from memory (nil: not told).
	Restored func(cause error, from *Refs)
	last     *Refs
}

// Follow moves the branches to m (see the package function). A missing or
// damaged file is written again from what the follower last saw and the
// newest promotion records, whichever is newer per branch (a promotion
// made since the follower last read the file is in a record only).
func (f *Follower) Follow(ctx context.Context, m *manifest.Manifest, now time.Time) (*Refs, error) {
	var restoreErr error
	restore := func(cause error) *Refs {
		recs, err := lastPromotions(ctx, f.Store)
		if err != nil {
			restoreErr = err
			return nil
		}
		base := f.last
		if base == nil && len(recs) == 0 {
			return nil
		}
		if base == nil {
			base = &Refs{FormatVersion: FormatVersion, Branches: map[string]Branch{}}
		} else {
			base = base.clone()
		}
		for name, p := range recs {
			if _, ok := base.Branches[name]; !ok || p.RefsVersion > base.Version {
				base.Branches[name] = p.At
			}
		}
		for _, p := range recs {
			base.Version = max(base.Version, p.RefsVersion)
		}
		if f.Restored != nil {
			f.Restored(cause, base)
		}
		return base
	}
	r, err := update(ctx, f.Store, restore, follow(m, f.Mode, now))
	if err != nil && restoreErr != nil {
		err = fmt.Errorf("%w (and the promotion records: %w)", err, restoreErr)
	}
	if err == nil {
		f.last = r.clone()
	}
	return r, err
}

// clone is a deep copy of r.
func (r *Refs) clone() *Refs {
	c := *r
	c.Branches = maps.Clone(r.Branches)
	if c.Branches == nil {
		c.Branches = map[string]Branch{}
	}
	return &c
}

// follow is Follow's mutation.
func follow(m *manifest.Manifest, mode string, now time.Time) func(*Refs) (bool, error) {
	return func(r *Refs) (bool, error) {
		changed := false
		for _, name := range []string{Staging, Main} {
			if name == Main && mode == ModeManual {
				if _, ok := r.Branches[Main]; ok {
					continue // moves only with promote
				}
				// A manual main starts where staging is first seen.
			}
			if b, ok := r.Branches[name]; !ok || b.ManifestVersion < m.Version {
				r.Branches[name] = At(m, now, "follow")
				changed = true
			}
		}
		return changed, nil
	}
}

// Pinned returns the manifest versions the branches name (sorted, unique):
// the garbage collector keeps their files and their history.
func Pinned(ctx context.Context, store blob.Conditional) ([]uint64, error) {
	r, _, err := Load(ctx, store)
	if errors.Is(err, ErrNoRefs) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, b := range r.Branches {
		out = append(out, b.ManifestVersion)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Tag is the tag name of a flush made at flushedAt.
func Tag(flushedAt time.Time) string { return TagPrefix + flushedAt.UTC().Format(time.RFC3339Nano) }

// ParseTag reads a tag's time; ok is false for a name that is no tag.
func ParseTag(name string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(name, TagPrefix)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, rest)
	return t, err == nil
}

// ErrMoved: the branch a promotion moves is no longer where the promotion
// was judged (another promotion, or the follower in auto mode).
var ErrMoved = errors.New("the branch moved since the promotion was judged")

// Promote points branch to at m, a committed manifest version, if it still
// points at the version expected (0: it does not exist yet) — the one the
// promotion's verdict was judged against. It may move the branch back (to
// an older tag, say); staging cannot be promoted to, since it follows
// every version.
func Promote(ctx context.Context, store blob.Conditional, to string, expected uint64, m *manifest.Manifest, now time.Time, by string) (*Refs, error) {
	if to == Staging {
		return nil, fmt.Errorf("promote to %s: it follows every committed version; promote to %s or another branch", Staging, Main)
	}
	if !validBranch(to) {
		return nil, fmt.Errorf("promote to %q: a branch name is letters, digits, '-' and '_', and cannot start with %q", to, TagPrefix)
	}
	moved := false
	r, err := Update(ctx, store, func(r *Refs) (bool, error) {
		if got := r.Branches[to].ManifestVersion; got != expected {
			return false, fmt.Errorf("promote %s: %w (it is at version %d, the verdict was for version %d); run it again", to, ErrMoved, got, expected)
		}
		if expected == m.Version {
			return false, nil
		}
		r.Branches[to] = At(m, now, by)
		moved = true
		return true, nil
	})
	if err != nil || !moved {
		return r, err
	}
	if err := recordPromotion(ctx, store, r.Version, to, r.Branches[to]); err != nil {
		return r, fmt.Errorf("%w: %w", ErrNotRecorded, err)
	}
	return r, nil
}

// PromotionPrefix holds one immutable record per promotion, keyed by the
// refs version it wrote: the only other place a manual branch's position
// lives, so that a refs file deleted or damaged gives it back (Follower).
const PromotionPrefix = "_pgcdc/refs/promotions/"

// ErrNotRecorded: a promotion moved the branch, but its record could not
// be written; the branch is where it was promoted, only a lost refs file
// could not give it back.
var ErrNotRecorded = errors.New("the promotion moved the branch but its record was not written")

// promotion is a promotion's record.
type promotion struct {
	RefsVersion uint64 `json:"refs_version"`
	Branch      string `json:"branch"`
	At          Branch `json:"at"`
}

func promotionKey(refsVersion uint64) string {
	return fmt.Sprintf("%s%020d.json", PromotionPrefix, refsVersion)
}

func recordPromotion(ctx context.Context, store blob.Conditional, refsVersion uint64, branch string, at Branch) error {
	data, err := json.Marshal(promotion{RefsVersion: refsVersion, Branch: branch, At: at})
	if err != nil {
		return err
	}
	_, err = store.PutIf(ctx, promotionKey(refsVersion), data, "")
	if errors.Is(err, blob.ErrPrecondition) {
		return nil // written already (a retried promotion of the same refs version)
	}
	return err
}

// lister is what reading the promotion records needs besides a read.
type lister interface {
	List(ctx context.Context, prefix string) ([]blob.ObjectInfo, error)
}

// lastPromotions returns each branch's newest promotion record (none when
// the store cannot list, or holds none).
func lastPromotions(ctx context.Context, store blob.Conditional) (map[string]promotion, error) {
	l, ok := store.(lister)
	if !ok {
		return nil, nil
	}
	objects, err := l.List(ctx, PromotionPrefix)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", PromotionPrefix, err)
	}
	keys := make([]string, 0, len(objects))
	for _, o := range objects {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys) // refs versions, zero-padded: oldest first
	out := map[string]promotion{}
	for i := len(keys) - 1; i >= 0 && len(keys)-i <= 64; i-- {
		data, _, err := store.ReadVersion(ctx, keys[i])
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", keys[i], err)
		}
		var p promotion
		if err := json.Unmarshal(data, &p); err != nil {
			return nil, fmt.Errorf("decode %s: %w", keys[i], err)
		}
		if _, seen := out[p.Branch]; !seen {
			out[p.Branch] = p
		}
	}
	return out, nil
}

// validBranch reports whether name can name a branch: never a tag, never
// a time or another point's syntax.
func validBranch(name string) bool {
	if name == "" || strings.HasPrefix(name, TagPrefix) {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return name[0] < '0' || name[0] > '9'
}
