package query

import (
	"context"
	"errors"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

// RefList is what pg-cdc refs shows: the branches, the newest tags and
// the window of versions the history holds.
type RefList struct {
	Branches map[string]refs.Branch `json:"branches"`
	Tags     []Tag                  `json:"tags"`
	Oldest   manifest.Header        `json:"oldest"`
	Newest   manifest.Header        `json:"newest"`
}

// Tag is one flush's tag: its epoch, which a tag reads whole (the last
// version that has it), and the version the flush wrote.
type Tag struct {
	Name          string    `json:"name"`
	FlushVersion  uint64    `json:"flush_version"`
	Epoch         uint64    `json:"epoch"`
	EndLSN        cdc.LSN   `json:"end_lsn"`
	MaxCommitTime time.Time `json:"max_commit_time,omitzero"`
}

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
