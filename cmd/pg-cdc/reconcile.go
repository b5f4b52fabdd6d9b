package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/config"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/replicate"
)

// reconcileLockTimeout bounds the wait for the ACCESS SHARE locks that fix
// the tables' shapes while a reconcile request is written: a DDL holding a
// conflicting lock longer than this makes the round skip, not wait.
const reconcileLockTimeout = 5 * time.Second

func newReconcileCmd(configPath *string) *cobra.Command {
	var (
		tables []string
		force  bool
		wait   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Record schema changes that no row change has announced yet",
		Long: `reconcile compares each captured table's columns in the source catalog with
its newest schema version in the manifest and, for the tables that differ,
asks the stream to record the change: it writes a logical decoding message
while the tables' shapes are locked, and 'pg-cdc start' records the new
schema versions when it reads that message, at exactly its position in the
WAL (docs/decisions.md, "Reconcile"). A running start applies it within a
flush interval; a stopped one when it starts. --wait (default 2m) waits for
the manifest to hold the result and reports it; --wait 0 returns after
writing the request. --force sends the tables even when their shape
already matches the manifest. start does the same every
schema.reconcile_interval_sec.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringArrayVar(&tables, "table", nil, "reconcile only this table (schema.table, as the manifest names it); repeatable")
	cmd.Flags().BoolVar(&force, "force", false, "send the tables even when their catalog shape matches the manifest")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the stream to record the request (0: do not wait)")
	cmd.RunE = withSignals(configPath, func(ctx context.Context, cfg config.Config, log *slog.Logger, cmd *cobra.Command) error {
		return runReconcile(ctx, cfg, cmd.OutOrStdout(), tables, force, wait)
	})
	return cmd
}

func runReconcile(ctx context.Context, cfg config.Config, out io.Writer, tables []string, force bool, wait time.Duration) error {
	store, err := openSink(ctx, cfg)
	if err != nil {
		return err
	}
	m, _, err := manifest.Load(ctx, store)
	if err != nil {
		return notInitialized(err, cfg)
	}
	if err := checkOwner(m, cfg); err != nil {
		return err
	}
	ids, err := resolveTables(m, tables)
	if err != nil {
		return err
	}
	db, err := connectUpstream(ctx, cfg, m)
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := requestReconcile(ctx, db, m, ids, force, nil)
	if err != nil {
		return err
	}
	for _, line := range r.lines {
		fmt.Fprintln(out, line)
	}
	if !r.emitted {
		fmt.Fprintln(out, "nothing to reconcile: every table's catalog matches its newest schema version")
		return nil
	}
	fmt.Fprintf(out, "requested at LSN %s\n", r.lsn)
	if wait <= 0 {
		return nil
	}
	// The stream commits the request like a transaction: once the
	// manifest's end LSN has passed it, the versions it made are there.
	deadline := time.Now().Add(wait)
	for m.EndLSN < r.lsn {
		if time.Now().After(deadline) {
			return fmt.Errorf("no stream has reached the request at LSN %s in %s (the manifest ends at %s): is 'pg-cdc start' running? It applies the request when it gets there",
				r.lsn, wait, m.EndLSN)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if m, _, err = manifest.Load(ctx, store); err != nil {
			return err
		}
	}
	var refused []string
	for _, shape := range r.sent {
		mt := m.Tables[cdc.TableID{Schema: shape.Schema, Name: shape.Name}.String()]
		recorded, err := mt.SourceTable()
		if err != nil {
			return err
		}
		if replicate.SameShape(recorded, shape) {
			fmt.Fprintf(out, "%s.%s: recorded (schema version %d)\n", shape.Schema, shape.Name, mt.SchemaVersion)
			continue
		}
		refused = append(refused, shape.Schema+"."+shape.Name)
	}
	if len(refused) > 0 {
		return &cdc.Error{
			Class: cdc.ErrSchemaChanged,
			Msg:   fmt.Sprintf("the stream did not record the change of %s: it is a change this version does not follow", strings.Join(refused, ", ")),
			Hint:  "the start log says why (\"reconcile: a schema change this version does not follow\"); the stream stops at the table's next row change; see docs/decisions.md, schema evolution",
		}
	}
	return nil
}

// reconcileResult is what requestReconcile did.
type reconcileResult struct {
	emitted bool
	lsn     cdc.LSN
	sent    []control.Shape
	lines   []string // per table, for the operator
}

// requestReconcile reads the shapes of the manifest's tables ids (all when
// empty) under ACCESS SHARE locks and writes a reconcile request for those
// that differ from their newest schema version (all, with force). A table
// that no longer exists, or exists under another OID, is reported and
// left out: the stream stops at its next change, which a request cannot
// avert. sent, when not nil, remembers the shape last requested per table
// and leaves out a table whose shape was requested already: the stream
// records it when it gets there (a manifest read behind a backlog still
// differs), or has refused it, and asking again would change neither.
func requestReconcile(ctx context.Context, db *postgres.DB, m *manifest.Manifest, ids []cdc.TableID, force bool, sent map[string]string) (reconcileResult, error) {
	if len(ids) == 0 {
		for _, mt := range m.Tables {
			ids = append(ids, mt.ID())
		}
	}
	slices.SortFunc(ids, func(a, b cdc.TableID) int { return strings.Compare(a.String(), b.String()) })
	var r reconcileResult
	lsn, emitted, err := db.EmitAtShapes(ctx, ids, reconcileLockTimeout, control.PrefixReconcile,
		func(shapes []postgres.TableShape) (string, bool, error) {
			r.sent, r.lines = nil, nil
			for _, s := range shapes {
				mt := m.Tables[s.ID.String()]
				recorded, err := mt.SourceTable()
				if err != nil {
					return "", false, err
				}
				shape := control.Shape{Schema: s.ID.Schema, Name: s.ID.Name, OID: s.OID, Columns: s.Columns}
				switch {
				case s.Missing:
					r.lines = append(r.lines, fmt.Sprintf("%s: dropped from the source (the stream stops if a change of it is still to come)", s.ID))
				case s.OID != mt.OID:
					r.lines = append(r.lines, fmt.Sprintf("%s: re-created (OID %d, the manifest has %d): a new table; rebuild or resnapshot it", s.ID, s.OID, mt.OID))
				case replicate.SameShape(recorded, shape) && !force:
					r.lines = append(r.lines, fmt.Sprintf("%s: unchanged (schema version %d)", s.ID, mt.SchemaVersion))
				case sent != nil && sent[s.ID.String()] == shapeKey(shape):
					r.lines = append(r.lines, fmt.Sprintf("%s: requested before", s.ID))
				default:
					r.sent = append(r.sent, shape)
					r.lines = append(r.lines, fmt.Sprintf("%s: columns %s → %s", s.ID, columnList(recorded.Columns), columnList(s.Columns)))
				}
			}
			if len(r.sent) == 0 {
				return "", false, nil
			}
			_, content, err := control.Encode(control.Reconcile{Tables: r.sent})
			return content, err == nil, err
		})
	if err != nil {
		return reconcileResult{}, err
	}
	r.emitted, r.lsn = emitted, lsn
	if sent != nil && emitted {
		for _, shape := range r.sent {
			sent[cdc.TableID{Schema: shape.Schema, Name: shape.Name}.String()] = shapeKey(shape)
		}
	}
	return r, nil
}

// shapeKey identifies a table's shape (its columns as the catalog
// describes them), to tell whether it was requested before.
func shapeKey(shape control.Shape) string {
	b, err := json.Marshal(shape)
	if err != nil {
		return "" // never equal to a recorded key: requested again
	}
	return string(b)
}

// columnList names columns with their types, for the operator.
func columnList(cols []cdc.Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + " " + c.PGType
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// runReconciler requests a reconcile of every captured table each
// interval, beside the stream, until ctx ends. It is a side channel: a
// failed round is logged and the next one tries again; the stream never
// depends on it (a Relation message records the same change when a row
// changes).
func runReconciler(ctx context.Context, spec postgres.ConnSpec, interval time.Duration, current func() *manifest.Manifest, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	sent := map[string]string{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, interval)
		r, err := reconcileRound(rctx, spec, current(), sent)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("reconcile: round failed; the next one tries again", "err", err)
		case r.emitted:
			tables := make([]string, len(r.sent))
			for i, s := range r.sent {
				tables[i] = s.Schema + "." + s.Name
			}
			log.Info("reconcile: requested", "lsn", r.lsn, "tables", strings.Join(tables, ","))
		default:
			log.Debug("reconcile: nothing to request")
		}
	}
}

// reconcileRound is one background round on a connection of its own.
func reconcileRound(ctx context.Context, spec postgres.ConnSpec, m *manifest.Manifest, sent map[string]string) (reconcileResult, error) {
	db, err := postgres.Connect(ctx, spec)
	if err != nil {
		return reconcileResult{}, err
	}
	defer db.Close()
	return requestReconcile(ctx, db, m, nil, false, sent)
}
