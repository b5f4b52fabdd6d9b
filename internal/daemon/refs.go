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
// from the manifest, so nothing is lost meanwhile).
type refsFollower struct {
	sink capture.Sink
	mode string
	log  *slog.Logger
}

func (f refsFollower) follow(ctx context.Context, m *manifest.Manifest) error {
	if _, err := refs.Follow(ctx, f.sink, m, f.mode, time.Now()); err != nil && ctx.Err() == nil {
		f.log.Warn("refs: could not move the branches; the next version tries again", "manifest_version", m.Version, "err", err)
	}
	return nil
}
