package manifest

import (
	"context"
	"errors"
	"time"
)

// FlushVersion returns the header of the version a flush made at
// flushedAt produced: the first version whose newest epoch was flushed at
// or after flushedAt. ok is false when no version inside the retention window was flushed at
// exactly that time (a tag that names no flush the history holds).
//
// A flush's tag is its flushed_at, not the version's committed_at (stamped
// a moment later, when the manifest is written), and the versions after it
// that only compact keep its flushed_at, so the first is the flush's own.
func (h *History) FlushVersion(ctx context.Context, flushedAt time.Time) (hd Header, ok bool, err error) {
	oldest, err := h.Oldest(ctx)
	if err != nil {
		return Header{}, false, err
	}
	latest, err := h.Latest(ctx)
	if err != nil {
		return Header{}, false, err
	}
	atOrAfter := func(hd Header) bool { return !hd.FlushedAt.Before(flushedAt) }
	var found Header
	switch {
	case !atOrAfter(latest):
		return Header{}, false, nil
	case atOrAfter(oldest):
		found = oldest
	default:
		if found, err = h.search(ctx, oldest.Version, latest.Version, latest, atOrAfter); err != nil {
			return Header{}, false, err
		}
	}
	if !found.FlushedAt.Equal(flushedAt) {
		return Header{}, false, nil
	}
	return found, true, nil
}

// Flushes returns the headers of the newest flushes, newest first, at most
// limit of them: one per flushed_at (a version that only compacted names
// the flush before it and is left out), walking back from the newest
// version to the oldest readable one.
func (h *History) Flushes(ctx context.Context, limit int) ([]Header, error) {
	oldest, err := h.Oldest(ctx)
	if err != nil {
		return nil, err
	}
	latest, err := h.Latest(ctx)
	if err != nil {
		return nil, err
	}
	var out []Header
	prev := latest
	for v := latest.Version; v > oldest.Version && len(out) < limit; v-- {
		hd, err := h.Header(ctx, v-1)
		if errors.Is(err, ErrNotReadable) {
			continue // a lost entry: the next readable version decides
		}
		if err != nil {
			return nil, err
		}
		if !prev.FlushedAt.IsZero() && !hd.FlushedAt.Equal(prev.FlushedAt) {
			out = append(out, prev)
		}
		prev = hd
	}
	if len(out) < limit && !prev.FlushedAt.IsZero() && prev.Version == oldest.Version {
		out = append(out, prev)
	}
	return out, nil
}
