package capture

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
	"github.com/pg-cdc/pg-cdc/internal/replicate"
)

// reconcileLockTimeout bounds the wait for the ACCESS SHARE locks that fix
// the tables' shapes while a reconcile request is written: a DDL holding a
// conflicting lock longer than this makes the round skip, not wait.
const reconcileLockTimeout = 5 * time.Second

// Reconciled is what a reconcile request did.
type Reconciled struct {
	Emitted bool
	LSN     cdc.LSN
	Sent    []control.Shape
	Lines   []string // per table, for the operator
}

// Reconcile asks the stream to record the schema changes of tables (all
// when none are named) that no row change has announced yet (design.md
// §8.3), printing per table what it found, and with wait > 0 waits for the
// manifest to hold the result. A change the stream refuses is
// cdc.ErrSchemaChanged (exit 16).
func (c *Capture) Reconcile(ctx context.Context, tables []string, force bool, wait time.Duration, out io.Writer) error {
	m, err := c.Load(ctx)
	if err != nil {
		return err
	}
	if err := c.CheckOwner(m); err != nil {
		return err
	}
	ids, err := Resolve(m, tables)
	if err != nil {
		return err
	}
	db, err := c.ConnectUpstream(ctx, m)
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := RequestReconcile(ctx, db, m, ids, force, nil)
	if err != nil {
		return err
	}
	for _, line := range r.Lines {
		fmt.Fprintln(out, line)
	}
	if !r.Emitted {
		fmt.Fprintln(out, "nothing to reconcile: every table's catalog matches its newest schema version")
		return nil
	}
	fmt.Fprintf(out, "requested at LSN %s\n", r.LSN)
	if wait <= 0 {
		return nil
	}
	if m, err = c.awaitLSN(ctx, r.LSN, wait); err != nil {
		return err
	}
	return reconcileOutcome(m, r.Sent, out)
}

// awaitLSN polls the manifest until its end LSN reaches lsn: the stream
// commits a reconcile request like a transaction, so once the manifest has
// passed it, the versions it made are there.
func (c *Capture) awaitLSN(ctx context.Context, lsn cdc.LSN, wait time.Duration) (*manifest.Manifest, error) {
	deadline := time.Now().Add(wait)
	for {
		m, _, err := manifest.Load(ctx, c.Sink)
		if err != nil {
			return nil, err
		}
		if m.EndLSN >= lsn {
			return m, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no stream has reached the request at LSN %s in %s (the manifest ends at %s): is 'pg-cdc start' running? It applies the request when it gets there",
				lsn, wait, m.EndLSN)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// reconcileOutcome says per table whether the stream recorded the shape
// sent.
func reconcileOutcome(m *manifest.Manifest, sent []control.Shape, out io.Writer) error {
	var refused []string
	for _, shape := range sent {
		mt := m.Tables[shape.ID().String()]
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

// RequestReconcile reads the shapes of the manifest's tables ids (all when
// empty) under ACCESS SHARE locks and writes a reconcile request for those
// that differ from their newest schema version (all, with force). A table
// that no longer exists, or exists under another OID, is reported and left
// out: the stream stops at its next change, which a request cannot avert.
// sent, when not nil, remembers the shape last requested per table and
// leaves out a table whose shape was requested already: the stream records
// it when it gets there (a manifest read behind a backlog still differs),
// or has refused it, and asking again would change neither.
func RequestReconcile(ctx context.Context, db *postgres.DB, m *manifest.Manifest, ids []cdc.TableID, force bool, sent map[string]string) (Reconciled, error) {
	if len(ids) == 0 {
		for _, mt := range m.Tables {
			ids = append(ids, mt.ID())
		}
	}
	slices.SortFunc(ids, func(a, b cdc.TableID) int { return strings.Compare(a.String(), b.String()) })
	var r Reconciled
	lsn, emitted, err := db.EmitAtShapes(ctx, ids, reconcileLockTimeout, control.PrefixReconcile,
		func(shapes []postgres.TableShape) (string, bool, error) {
			var err error
			if r.Sent, r.Lines, err = compareShapes(m, shapes, force, sent); err != nil || len(r.Sent) == 0 {
				return "", false, err
			}
			_, content, err := control.Encode(control.Reconcile{Tables: r.Sent})
			return content, err == nil, err
		})
	if err != nil {
		return Reconciled{}, err
	}
	r.Emitted, r.LSN = emitted, lsn
	if sent != nil && emitted {
		for _, shape := range r.Sent {
			sent[shape.ID().String()] = shapeKey(shape)
		}
	}
	return r, nil
}

// compareShapes picks the shapes to send, and words per table what it
// found.
func compareShapes(m *manifest.Manifest, shapes []postgres.TableShape, force bool, sent map[string]string) ([]control.Shape, []string, error) {
	var send []control.Shape
	var lines []string
	for _, s := range shapes {
		mt := m.Tables[s.ID.String()]
		recorded, err := mt.SourceTable()
		if err != nil {
			return nil, nil, err
		}
		shape := control.Shape{Schema: s.ID.Schema, Name: s.ID.Name, OID: s.OID, Columns: s.Columns}
		switch {
		case s.Missing:
			lines = append(lines, fmt.Sprintf("%s: dropped from the source (the stream stops if a change of it is still to come)", s.ID))
		case s.OID != mt.OID:
			lines = append(lines, fmt.Sprintf("%s: re-created (OID %d, the manifest has %d): a new table; rebuild or resnapshot it", s.ID, s.OID, mt.OID))
		case replicate.SameShape(recorded, shape) && !force:
			lines = append(lines, fmt.Sprintf("%s: unchanged (schema version %d)", s.ID, mt.SchemaVersion))
		case sent != nil && sent[s.ID.String()] == shapeKey(shape):
			lines = append(lines, fmt.Sprintf("%s: requested before", s.ID))
		default:
			send = append(send, shape)
			lines = append(lines, fmt.Sprintf("%s: columns %s → %s", s.ID, columnList(recorded.Columns), columnList(s.Columns)))
		}
	}
	return send, lines, nil
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
