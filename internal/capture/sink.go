package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// ProbeSink checks that the sink enforces conditional writes (design.md
// §2.3) before anything is written: a store that silently ignores them
// would let two writers overwrite each other's manifest. Refused with
// cdc.ErrSinkUnsafe (exit 14) unless AcceptSingleWriterRisk is set.
func (c *Capture) ProbeSink(ctx context.Context) error {
	host, _ := os.Hostname()
	key := fmt.Sprintf("_pgcdc/probe/%s-%d-%d", KeySafe(host), os.Getpid(), time.Now().UnixNano())
	err := blob.ProbeConditional(ctx, c.Sink, key)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, blob.ErrConditionalIgnored):
		return fmt.Errorf("probe sink %s: %w", c.SinkName, err)
	case c.AcceptSingleWriterRisk:
		c.Log.Warn("the sink ignores conditional writes; running anyway because storage.accept_single_writer_risk is set: a second writer on this prefix would go undetected",
			"sink", c.SinkName, "err", err)
		return nil
	default:
		return &cdc.Error{Class: cdc.ErrSinkUnsafe, Msg: "sink " + c.SinkName, Cause: err,
			Hint: "use a store that enforces If-Match / If-None-Match (or generation preconditions); if this pg-cdc is certainly the only writer, set storage.accept_single_writer_risk: true"}
	}
}

// KeySafe keeps the characters a host name may put in an object key.
func KeySafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// LockSink takes the sink's writer lock, if it has one, so a second writer
// fails fast (cdc.ErrSinkLocked, exit 15). what names the command holding
// it.
func (c *Capture) LockSink(ctx context.Context, what string) (release func() error, err error) {
	l, ok := c.Sink.(blob.Locker)
	if !ok {
		return func() error { return nil }, nil
	}
	host, _ := os.Hostname()
	owner := fmt.Sprintf("pg-cdc %s pid %d on %s since %s", what, os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	release, err = l.LockWriter(ctx, owner)
	if errors.Is(err, blob.ErrLocked) {
		return nil, &cdc.Error{Class: cdc.ErrSinkLocked, Msg: err.Error(),
			Hint: "another pg-cdc process is writing to this storage path; stop it first"}
	}
	if err != nil {
		return nil, fmt.Errorf("lock sink: %w", err)
	}
	return release, nil
}

// NotInitialized gives a missing manifest its operator hint.
func (c *Capture) NotInitialized(err error) error {
	if errors.Is(err, cdc.ErrNotInitialized) {
		return &cdc.Error{Class: cdc.ErrNotInitialized, Msg: fmt.Sprintf("no manifest in %s", c.SinkName), Hint: "run 'pg-cdc init' first"}
	}
	return err
}

// Load reads the manifest; a missing one is cdc.ErrNotInitialized with
// its hint.
func (c *Capture) Load(ctx context.Context) (*manifest.Manifest, error) {
	m, _, err := manifest.Load(ctx, c.Sink)
	if err != nil {
		return nil, c.NotInitialized(err)
	}
	return m, nil
}

// Resolve maps schema.table names to the manifest's tables; a name the
// manifest does not hold is a usage error that lists what it does hold.
func Resolve(m *manifest.Manifest, names []string) ([]cdc.TableID, error) {
	var ids []cdc.TableID
	for _, n := range names {
		t := m.Tables[n]
		if t == nil {
			return nil, cdc.Usage(fmt.Errorf("table %q is not in the manifest (it holds %s)", n, strings.Join(SortedTables(m), ", ")))
		}
		ids = append(ids, t.ID())
	}
	return ids, nil
}
