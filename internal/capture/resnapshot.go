package capture

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// Resnapshot asks for table to be copied again into its next generation
// while the stream runs (design.md §8.6): it records the request in the
// manifest and tells a running start with a control message (a stopped
// one takes it up when it starts). With wait > 0 it waits for the switch,
// writing progress to out.
func (c *Capture) Resnapshot(ctx context.Context, table string, wait time.Duration, out io.Writer) error {
	// A writer beside the stream: its conflicts with the streamer are
	// expected and never count toward the breaker.
	mc, err := compact.NewCommitter(ctx, c.Sink)
	if err != nil {
		return c.NotInitialized(err)
	}
	mc.SetLogger(c.Log)
	if err := c.CheckOwner(mc.Current()); err != nil {
		return err
	}
	ids, err := Resolve(mc.Current(), []string{table})
	if err != nil {
		return err
	}
	key := ids[0].String()
	mt := mc.Current().Tables[key]
	switch {
	case len(mt.PrimaryKey) == 0:
		return cdc.Usage(fmt.Errorf("table %s has no primary key: a resnapshot places copied rows by key; add a primary key first", key))
	case !mt.Snapshot.Complete():
		return cdc.Usage(fmt.Errorf("table %s is still being snapshotted (%s): 'pg-cdc start' completes it; a resnapshot can follow", key, mt.Snapshot.State))
	}
	from, gen, err := c.requestResnapshot(ctx, mc, key, out)
	if err != nil {
		return err
	}
	if err := c.notifyStream(ctx, key); err != nil {
		// The request is in the manifest: a start that is not running now
		// takes it up when it starts.
		c.Log.Warn("could not tell a running start about the request; it is taken up at the next start", "table", key, "err", err)
	}
	if wait <= 0 {
		return nil
	}
	return c.awaitSwitch(ctx, key, from, gen, wait, out)
}

// requestResnapshot records the request for table key (unless one is
// recorded already) and returns the generations it goes from and to.
func (c *Capture) requestResnapshot(ctx context.Context, mc *manifest.Committer, key string, out io.Writer) (from, gen string, err error) {
	mt := mc.Current().Tables[key]
	from = mt.Generation
	if r := mt.Resnapshot; r != nil {
		fmt.Fprintf(out, "%s: a resnapshot into generation %s was already requested at %s\n", key, r.Generation, r.RequestedAt.Format(time.RFC3339))
		return from, r.Generation, nil
	}
	if gen, err = manifest.NextGeneration(mt.Generation); err != nil {
		return "", "", err
	}
	now := time.Now().UTC()
	if _, err := mc.Commit(ctx, func(m *manifest.Manifest) error {
		t := m.Tables[key]
		if t == nil {
			return fmt.Errorf("resnapshot %s: the table vanished from the manifest", key)
		}
		if t.Resnapshot == nil && t.Generation == from {
			t.Resnapshot = &manifest.Resnapshot{Generation: gen, RequestedAt: now,
				Snapshot: manifest.Snapshot{State: manifest.SnapshotPending}, Deltas: []manifest.Delta{}}
		}
		return nil
	}); err != nil {
		return "", "", fmt.Errorf("record the resnapshot request of %s: %w", key, err)
	}
	fmt.Fprintf(out, "%s: resnapshot requested: generation %s → %s\n", key, from, gen)
	return from, gen, nil
}

// notifyStream writes the message that makes a running start re-read the
// manifest and take the request up.
func (c *Capture) notifyStream(ctx context.Context, key string) error {
	db, err := postgres.Connect(ctx, c.Source)
	if err != nil {
		return err
	}
	defer db.Close()
	prefix, content, err := control.Encode(control.Resnapshot{Table: key})
	if err != nil {
		return err
	}
	_, err = db.EmitMarker(ctx, prefix, content)
	return err
}

// awaitSwitch waits until table key is at generation gen, printing the
// copy's progress as it changes.
func (c *Capture) awaitSwitch(ctx context.Context, key, from, gen string, wait time.Duration, out io.Writer) error {
	deadline := time.Now().Add(wait)
	last := ""
	for {
		m, _, err := manifest.Load(ctx, c.Sink)
		if err != nil {
			return err
		}
		t := m.Tables[key]
		if t == nil {
			return fmt.Errorf("resnapshot %s: the table vanished from the manifest", key)
		}
		if t.Generation == gen {
			fmt.Fprintf(out, "%s: switched to generation %s (%d rows copied in %d chunks); the files of %s are garbage after gc.grace_period\n",
				key, gen, t.Snapshot.RowsCopied, t.Snapshot.Chunks, from)
			return nil
		}
		if t.Resnapshot == nil || t.Resnapshot.Generation != gen {
			return fmt.Errorf("resnapshot %s: the request for generation %s is gone from the manifest (the table is at %s)", key, gen, t.Generation)
		}
		if p := t.Resnapshot.Snapshot.State + " " + SnapshotProgress(t.Resnapshot.Snapshot) + " rows copied"; p != last {
			fmt.Fprintf(out, "%s: %s\n", key, p)
			last = p
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("resnapshot %s: not complete after %s (%s); is 'pg-cdc start' running? The request stays in the manifest", key, wait, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
