package query

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

// ErrBreaking is the class of a promotion refused for its verdict: it is
// breaking and was not forced.
var ErrBreaking = errors.New("the promotion is breaking")

// Promotion is what moving a branch to a point would do to the branch's
// readers (design.md §11): the data diff per table and the verdict.
type Promotion struct {
	// From is the point promoted, To the branch it would move.
	From, To string
	FromAt   At
	// ToAt is where To points now; nil when the branch does not exist
	// (everything is new to its readers).
	ToAt    *At
	Verdict refs.Verdict
	Changes []refs.TableChange
}

// WriteText writes the plan: the point, where the branch is now, the
// per-table changes and the verdict.
func (p *Promotion) WriteText(w io.Writer) {
	current := p.To + ": does not exist yet"
	if p.ToAt != nil {
		current = p.ToAt.Describe()
	}
	fmt.Fprintf(w, "promote %s\nto      %s\n\n", p.FromAt.Describe(), current)
	readpath.WriteChanges(w, p.Changes)
	fmt.Fprintf(w, "\nverdict: %s\n", p.Verdict)
}

// PlanPromotion judges moving the branch to to the point from: the
// diff from where to points now to from, and its verdict. It moves
// nothing.
func (r *Reader) PlanPromotion(ctx context.Context, from, to string) (*Promotion, error) {
	fromAt, err := r.Resolve(ctx, from)
	if err != nil {
		return nil, err
	}
	if !wholeVersion(fromAt) {
		return nil, fmt.Errorf("promote %s: a branch names a whole committed version, and %s falls inside version %d; "+
			"promote a branch, a tag (raw@…), epoch:N or a version number", from, from, fromAt.Version())
	}
	p := &Promotion{From: from, To: to, FromAt: fromAt}
	current := &manifest.Manifest{Tables: map[string]*manifest.Table{}}
	rf, _, err := refs.Load(ctx, r.o.Sink)
	if err != nil && !errors.Is(err, refs.ErrNoRefs) {
		return nil, err
	}
	if b, ok := rf.Branch(to); ok {
		m, err := r.history.At(ctx, b.ManifestVersion)
		if err != nil {
			return nil, fmt.Errorf("where %s points (version %d): %w", to, b.ManifestVersion, err)
		}
		p.ToAt, current = &At{Name: to, Manifest: m}, m
	}
	counts, err := r.Diff(ctx, At{Name: to, Manifest: current}, fromAt, nil)
	if err != nil {
		return nil, err
	}
	p.Verdict, p.Changes = refs.Judge(current, fromAt.Manifest, counts)
	return p, nil
}

// wholeVersion reports whether at reads its version whole: no LSN or time
// bound cuts into it.
func wholeVersion(at At) bool {
	m := at.Manifest
	if at.Bound.LSN != 0 && at.Bound.LSN < m.EndLSN {
		return false
	}
	if !at.Bound.Time.IsZero() {
		if n := len(m.History); n > 0 && at.Bound.Time.Before(m.History[n-1].MaxCommitTime) {
			return false
		}
	}
	return true
}

// Promote moves the branch as p judged it, if it is still where p found
// it; a breaking verdict needs force. by names who promoted, for the refs
// file ("promote <user>").
func (r *Reader) Promote(ctx context.Context, p *Promotion, force bool, by string) (*refs.Refs, error) {
	if p.Verdict == refs.Breaking && !force {
		var why []string
		for _, c := range p.Changes {
			for _, b := range c.Breaking {
				why = append(why, c.Table+": "+b)
			}
		}
		return nil, fmt.Errorf("promote %s to %s: %w (%s); its readers' queries may fail — promote with --force to move it anyway",
			p.From, p.To, ErrBreaking, strings.Join(why, "; "))
	}
	var expected uint64
	if p.ToAt != nil {
		expected = p.ToAt.Version()
	}
	return refs.Promote(ctx, r.o.Sink, p.To, expected, p.FromAt.Manifest, time.Now(), by)
}
