package query

import (
	"context"
	"errors"
	"github.com/pg-cdc/pg-cdc/internal/readpath"

	"github.com/pg-cdc/pg-cdc/internal/refs"
)

type (
	RefList = readpath.RefList
	Tag     = readpath.Tag
)

// Refs lists the branches, the newest tags (at most tags of them) and the
// history's window.
func (r *Reader) Refs(ctx context.Context, tags int) (*RefList, error) {
	l := &RefList{Branches: map[string]refs.Branch{}, Tags: []Tag{}}
	rf, _, err := refs.Load(ctx, r.o.Sink)
	switch {
	case err == nil:
		l.Branches = rf.Branches
	case !errors.Is(err, refs.ErrNoRefs):
		return nil, err
	}
	if l.Newest, err = r.history.Latest(ctx); err != nil {
		return nil, err
	}
	if l.Oldest, err = r.history.Oldest(ctx); err != nil {
		return nil, err
	}
	if tags == 0 {
		return l, nil
	}
	flushes, err := r.history.Flushes(ctx, tags)
	if err != nil {
		return nil, err
	}
	for _, f := range flushes {
		l.Tags = append(l.Tags, Tag{Name: refs.Tag(f.FlushedAt), FlushVersion: f.Version, Epoch: f.Epoch, EndLSN: f.EndLSN, MaxCommitTime: f.MaxCommitTime})
	}
	return l, nil
}
