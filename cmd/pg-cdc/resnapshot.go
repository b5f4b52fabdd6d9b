package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

func newResnapshotCmd(configPath *string) *cobra.Command {
	var (
		table string
		wait  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "resnapshot --table schema.table",
		Short: "Copy one table again into a new generation while the stream runs",
		Long: `resnapshot records in the manifest a request to copy the table again, into
its next generation (DESIGN §8), and tells a running 'pg-cdc start' (a
logical decoding message makes it re-read the manifest); a stopped one takes
the request up when it starts. start copies the table in primary-key chunks
(backfill.chunk_rows) under the next generation's prefix, writes every change
streamed for the table meanwhile to both generations, and when the copy is
complete switches the table to the new generation in one manifest write,
retiring the old generation's files (deleted by gc after gc.grace_period).
Readers keep reading the current generation, whole, until the switch.
--wait (default 10m) waits for the switch and prints progress; --wait 0
returns once the request is recorded.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&table, "table", "", "the table to copy again (schema.table, as the manifest names it)")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for the switch to the new generation (0: do not wait)")
	_ = cmd.MarkFlagRequired("table")
	cmd.RunE = withSignals(configPath, func(ctx context.Context, cfg config.Config, log *slog.Logger, cmd *cobra.Command) error {
		return runResnapshot(ctx, cfg, log, cmd.OutOrStdout(), table, wait)
	})
	return cmd
}

func runResnapshot(ctx context.Context, cfg config.Config, log *slog.Logger, out io.Writer, table string, wait time.Duration) error {
	store, err := openSink(ctx, cfg)
	if err != nil {
		return err
	}
	mc, err := compact.NewCommitter(ctx, store)
	if err != nil {
		return notInitialized(err, cfg)
	}
	if err := checkOwner(mc.Current(), cfg); err != nil {
		return err
	}
	ids, err := resolveTables(mc.Current(), []string{table})
	if err != nil {
		return err
	}
	key := ids[0].String()
	mt := mc.Current().Tables[key]
	switch {
	case len(mt.PrimaryKey) == 0:
		return usageError{fmt.Errorf("table %s has no primary key: a resnapshot places copied rows by key; add a primary key first", key)}
	case !mt.Snapshot.Complete():
		return usageError{fmt.Errorf("table %s is still being snapshotted (%s): 'pg-cdc start' completes it; a resnapshot can follow", key, mt.Snapshot.State)}
	}
	from := mt.Generation
	gen := ""
	if r := mt.Resnapshot; r != nil {
		gen = r.Generation
		fmt.Fprintf(out, "%s: a resnapshot into generation %s was already requested at %s\n", key, gen, r.RequestedAt.Format(time.RFC3339))
	} else {
		if gen, err = manifest.NextGeneration(mt.Generation); err != nil {
			return err
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
			return fmt.Errorf("record the resnapshot request of %s: %w", key, err)
		}
		fmt.Fprintf(out, "%s: resnapshot requested: generation %s → %s\n", key, from, gen)
	}
	if err := notifyStream(ctx, cfg, key); err != nil {
		// The request is in the manifest: a start that is not running now
		// takes it up when it starts.
		log.Warn("could not tell a running start about the request; it is taken up at the next start", "table", key, "err", err)
	}
	if wait <= 0 {
		return nil
	}
	deadline := time.Now().Add(wait)
	last := ""
	for {
		m, _, err := manifest.Load(ctx, store)
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
		if p := t.Resnapshot.Snapshot.State + " " + snapshotProgress(t.Resnapshot.Snapshot) + " rows copied"; p != last {
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

// notifyStream writes the message that makes a running start re-read the
// manifest and take the request up.
func notifyStream(ctx context.Context, cfg config.Config, key string) error {
	db, err := connectSource(ctx, cfg)
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
