package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/capture"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/refs"
)

// refsFollower moves the branches after every committed version
// (design.md §11): staging always, main too in auto mode. It follows the
// post-commit seam, so it never holds up the stream; a write that fails is
// logged and made again with the next version (the branches are derived
// from the manifest, so nothing is lost meanwhile). It remembers the refs
// it last saw (refs.Follower), so a refs file deleted or damaged while it
// runs is written again with main where it was, said in the log.
type refsFollower struct {
	f   *refs.Follower
	log *slog.Logger
}

func newRefsFollower(sink capture.Sink, mode string, log *slog.Logger) *refsFollower {
	f := &refsFollower{log: log}
	f.f = &refs.Follower{Store: sink, Mode: mode, Restored: func(cause error, from *refs.Refs) {
		main, _ := from.Branch(refs.Main)
		log.Warn("refs: the refs file was missing or damaged; writing it again from the branches this process last saw",
			"cause", cause, "main_manifest_version", main.ManifestVersion)
	}}
	return f
}

func (f *refsFollower) follow(ctx context.Context, m *manifest.Manifest) error {
	if _, err := f.f.Follow(ctx, m, time.Now()); err != nil && ctx.Err() == nil {
		f.log.Warn("refs: could not move the branches; the next version tries again", "manifest_version", m.Version, "err", err)
	}
	return nil
}
