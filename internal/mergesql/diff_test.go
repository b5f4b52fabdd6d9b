package mergesql_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/parquet-go/parquet-go"
	"pgregory.net/rapid"

	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/merge"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/render"
)

// The test table's schema versions: id bigint primary key, a int, big text
// (the column TOAST leaves unchanged); then c int added with a default;
// then a and big renamed to a2 and big2; then c widened to bigint.
var versions = func() []*cdc.Table {
	id := cdc.Column{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", NotNull: true, FieldID: 1, AttNum: 1}
	a := cdc.Column{Name: "a", TypeOID: 23, TypeMod: -1, PGType: "integer", FieldID: 2, AttNum: 2}
	big := cdc.Column{Name: "big", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 3, AttNum: 3}
	seven := "7"
	c := cdc.Column{Name: "c", TypeOID: 23, TypeMod: -1, PGType: "integer", FieldID: 4, AttNum: 4, Missing: &seven}
	a2, big2 := a, big
	a2.Name, big2.Name = "a2", "big2"
	cBig := c
	cBig.TypeOID, cBig.PGType = 20, "bigint"
	mk := func(v int, cols ...cdc.Column) *cdc.Table {
		return &cdc.Table{ID: cdc.TableID{Schema: "public", Name: "t"}, OID: 16384, PrimaryKey: []string{"id"},
			ReplicaIdentity: cdc.ReplicaIdentityDefault, SchemaVersion: v, Columns: cols}
	}
	return []*cdc.Table{mk(1, id, a, big), mk(2, id, a, big, c), mk(3, id, a2, big2, c), mk(4, id, a2, big2, cBig)}
}()

const gen = "g0001"

// sink is a filesystem sink holding the test table.
type sink struct {
	root  string
	store *fs.Store
}

func newSink(t *testing.T) *sink {
	t.Helper()
	root := t.TempDir()
	store, err := fs.New(root)
	if err != nil {
		t.Fatal(err)
	}
	var schemas []manifest.SchemaVersion
	for _, v := range versions {
		s, err := parquetfile.NewSchema(v)
		if err != nil {
			t.Fatal(err)
		}
		schemas = append(schemas, manifest.SchemaVersion{Version: v.SchemaVersion, Columns: s.ManifestColumns(v)})
	}
	m := &manifest.Manifest{
		Source: manifest.Source{SystemIdentifier: "1", Database: "db", Slot: "s", Publication: "p"},
		Tables: map[string]*manifest.Table{"public.t": {
			Schema: "public", Name: "t", OID: 16384, Generation: gen, PrimaryKey: []string{"id"},
			ReplicaIdentity: "default", SchemaVersion: 1, Schemas: schemas[:1],
			Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete}, Deltas: []manifest.Delta{},
		}},
	}
	// The later versions join the manifest as the stream meets them.
	m.Tables["public.t"].Schemas = schemas[:1]
	later = schemas[1:]
	if _, err := manifest.Create(context.Background(), store, m, time.Now()); err != nil {
		t.Fatal(err)
	}
	return &sink{root: root, store: store}
}

// later holds the schema versions not yet in the manifest (set by newSink).
var later []manifest.SchemaVersion

// change is one change row.
type change struct {
	op       cdc.Op
	lsn, seq int64
	id, a, c int64
	big      string
	bigUnset bool // left unchanged (TOAST)
	keyOnly  bool // a delete carrying the key only
}

// writeDelta writes rows as the next epoch's delta under schema version v.
func (s *sink) writeDelta(t *testing.T, rows []change, v int) {
	t.Helper()
	ctx := context.Background()
	mc, err := manifest.Open(ctx, s.store, manifest.Breaker{})
	if err != nil {
		t.Fatal(err)
	}
	tbl := versions[v-1]
	schema, err := parquetfile.NewSchema(tbl)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, schema)
	minLSN, maxLSN := int64(1<<62), int64(0)
	for _, r := range rows {
		meta := cdc.RowMeta{Op: r.op, LSN: cdc.LSN(r.lsn), Seq: r.seq, XID: cdc.XID(r.lsn), CommitTime: time.UnixMicro(r.lsn * 1000)}
		values := make([]cdc.Datum, len(tbl.Columns))
		if r.op != cdc.OpTruncate {
			for i, col := range tbl.Columns {
				switch col.FieldID {
				case 1:
					values[i] = text(strconv.FormatInt(r.id, 10))
				case 2:
					values[i] = text(strconv.FormatInt(r.a, 10))
				case 3:
					values[i] = text(r.big)
					if r.bigUnset {
						values[i] = cdc.Datum{Kind: cdc.DatumUnchanged}
					}
				case 4:
					values[i] = text(strconv.FormatInt(r.c, 10))
				}
				if r.keyOnly && col.FieldID != 1 {
					values[i] = cdc.Datum{}
				}
			}
		}
		if err := w.Write(meta, values); err != nil {
			t.Fatal(err)
		}
		minLSN, maxLSN = min(minLSN, r.lsn), max(maxLSN, r.lsn)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	epoch := mc.Current().Epoch + 1
	key := manifest.FileKey(tbl.ID, gen, manifest.KindDelta, epoch, 0)
	if err := s.store.Put(ctx, key, bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Commit(ctx, func(m *manifest.Manifest) error {
		mt := m.Tables["public.t"]
		for _, sv := range later {
			if sv.Version <= v && mt.SchemaAt(sv.Version) == nil {
				sv.FromEpoch = epoch
				mt.Schemas = append(mt.Schemas, sv)
				mt.SchemaVersion = sv.Version
			}
		}
		mt.Deltas = append(mt.Deltas, manifest.Delta{Epoch: epoch, MinLSN: cdc.LSN(minLSN), MaxLSN: cdc.LSN(maxLSN),
			Rows: int64(len(rows)), SchemaVersion: v, Files: []manifest.File{{Path: key, Rows: int64(len(rows)), Bytes: int64(buf.Len())}}})
		m.Epoch, m.EndLSN = epoch, max(m.EndLSN, cdc.LSN(maxLSN))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func text(s string) cdc.Datum { return cdc.Datum{Kind: cdc.DatumText, Text: []byte(s)} }

func (s *sink) table(t *testing.T) *manifest.Table {
	t.Helper()
	m, _, err := manifest.Load(context.Background(), s.store)
	if err != nil {
		t.Fatal(err)
	}
	return m.Tables["public.t"]
}

// viaSQL is the state as the generated SQL computes it in DuckDB, one text
// line per row (NULL as \N), sorted.
func (s *sink) viaSQL(t *testing.T, db *sql.DB, bound mergesql.Bound) []string {
	t.Helper()
	mt := s.table(t)
	q, err := mergesql.State(mergesql.Input{Table: mt, Bound: bound,
		Path: func(key string) (string, error) { return filepath.Join(s.root, filepath.FromSlash(key)), nil }})
	if errors.Is(err, mergesql.ErrNoFiles) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var casts []string
	for _, c := range mergesql.Columns(mt) {
		casts = append(casts, fmt.Sprintf("coalesce(CAST(%s AS VARCHAR), '\\N')", mergesql.Ident(c)))
	}
	rows, err := db.Query("SELECT concat_ws('|', " + strings.Join(casts, ", ") + ") FROM (" + q + ")")
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		out = append(out, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// viaMerge is the state internal/merge computes, in the same form.
func (s *sink) viaMerge(t *testing.T) []string {
	t.Helper()
	mt := s.table(t)
	r, err := merge.Open(context.Background(), s.store, mt, merge.Options{ScratchDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rt, err := render.NewTable(mt.CurrentSchema().Columns)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var split [][]parquet.Value
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if split, err = rt.Split(row, split); err != nil {
			t.Fatal(err)
		}
		fields := make([]string, len(split))
		for i, vals := range split {
			txt, null, err := rt.Text(i, vals)
			if err != nil {
				t.Fatal(err)
			}
			if null {
				txt = `\N`
			}
			fields[i] = txt
		}
		out = append(out, strings.Join(fields, "|"))
	}
	slices.Sort(out)
	return out
}

var quiet = slog.New(slog.DiscardHandler)

// TestStateMatchesMerge: over random workloads — inserts, updates leaving
// big unchanged, deletes carrying the key only, key changes, truncates,
// replayed and duplicated rows, four schema versions (an added column with
// a default, a rename, a widening) and compactions in between — the merge
// SQL gives exactly the state internal/merge gives, before and after every
// compaction.
func TestStateMatchesMerge(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rapid.Check(t, func(rt *rapid.T) {
		s := newSink(t)
		live := map[int64]bool{}
		lsn, version := int64(1000), 1
		var pending []change
		type batch struct {
			version int
			rows    []change
		}
		var written []batch
		// earlier are the states after each flush since the last compaction:
		// the state as of each of those points must come out of the later
		// versions' files with a bound, by LSN and by commit time.
		type point struct {
			lsn     int64
			version int // the newest schema version then: the state is read in the newest
			state   []string
		}
		var earlier []point
		check := func(when string) {
			got, want := s.viaSQL(t, db, mergesql.Bound{}), s.viaMerge(t)
			if !slices.Equal(got, want) {
				rt.Fatalf("%s: the merge SQL differs from internal/merge\n sql %q\nmerge %q", when, got, want)
			}
			for _, p := range earlier {
				if p.version != s.table(t).SchemaVersion {
					continue
				}
				for _, b := range []mergesql.Bound{{LSN: cdc.LSN(p.lsn)}, {Time: time.UnixMicro(p.lsn * 1000)}} {
					if got := s.viaSQL(t, db, b); !slices.Equal(got, p.state) {
						rt.Fatalf("%s: the state as of %+v differs from the state then\n now %q\nthen %q", when, b, got, p.state)
					}
				}
			}
		}
		for range rapid.IntRange(1, 30).Draw(rt, "txns") {
			lsn += 10
			seq := int64(0)
			for range rapid.IntRange(1, 4).Draw(rt, "ops") {
				seq += 3 // room for a key change's two rows
				pending = append(pending, drawChange(rt, live, lsn, seq)...)
			}
			if !rapid.Bool().Draw(rt, "cut") {
				continue
			}
			if version < len(versions) && rapid.IntRange(0, 3).Draw(rt, "next version") == 0 {
				version++ // slowly: old versions' rows meet later ones
			}
			rows := append([]change(nil), pending...)
			if len(written) > 0 && rapid.IntRange(0, 4).Draw(rt, "replay") == 0 {
				// A replay is written as it was the first time: under the
				// same schema version (the stream binds the version the
				// manifest recorded for it), so both copies are the same.
				if w := written[rapid.IntRange(0, len(written)-1).Draw(rt, "replayed")]; w.version == version {
					rows = append(rows, w.rows...)
				}
			}
			if len(rows) > 0 && rapid.IntRange(0, 4).Draw(rt, "dup") == 0 {
				rows = append(rows, rows[rapid.IntRange(0, len(rows)-1).Draw(rt, "dup row")])
			}
			s.writeDelta(t, rows, version)
			written, pending = append(written, batch{version: version, rows: pending}), nil
			if len(rows) > 0 && !slices.ContainsFunc(rows, func(c change) bool { return c.lsn > lsn }) {
				earlier = append(earlier, point{lsn: lsn, version: s.table(t).SchemaVersion, state: s.viaMerge(t)})
			}
			if rapid.IntRange(0, 3).Draw(rt, "compact") == 0 {
				check("before a compaction")
				s.compact(t, rt)
				earlier = nil // folded: the history of versions answers those points
				check("after a compaction")
			}
		}
		if len(pending) > 0 {
			s.writeDelta(t, pending, version)
		}
		check("at the end")
	})
}

func (s *sink) compact(t *testing.T, rt *rapid.T) {
	ctx := context.Background()
	mc, err := compact.NewCommitter(ctx, s.store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := compact.Table(ctx, s.store, mc, cdc.TableID{Schema: "public", Name: "t"}, compact.Options{
		ScratchDir: t.TempDir(), Log: quiet,
		TargetFileBytes: int64(rapid.SampledFrom([]int{1 << 10, 1 << 30}).Draw(rt, "target")),
	}); err != nil {
		rt.Fatalf("compact: %v", err)
	}
}

// drawChange draws one statement and returns the rows the stream writes
// for it; live tracks the keys that exist.
func drawChange(rt *rapid.T, live map[int64]bool, lsn, seq int64) []change {
	id := rapid.Int64Range(0, 9).Draw(rt, "id")
	a := rapid.Int64Range(0, 1000).Draw(rt, "a")
	c := rapid.Int64Range(0, 9).Draw(rt, "c")
	big := fmt.Sprintf("big-%d-%d", lsn, seq)
	switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
	case op == 0:
		clear(live)
		return []change{{op: cdc.OpTruncate, lsn: lsn, seq: seq}}
	case !live[id]:
		live[id] = true
		return []change{{op: cdc.OpInsert, lsn: lsn, seq: seq, id: id, a: a, c: c, big: big}}
	case op <= 2:
		delete(live, id)
		return []change{{op: cdc.OpDelete, lsn: lsn, seq: seq, id: id, keyOnly: true}}
	case op == 3:
		to := rapid.Int64Range(0, 9).Draw(rt, "to")
		if live[to] {
			return nil // PostgreSQL would refuse the duplicate key
		}
		delete(live, id)
		live[to] = true
		return []change{
			{op: cdc.OpDelete, lsn: lsn, seq: seq, id: id, keyOnly: true},
			{op: cdc.OpUpdate, lsn: lsn, seq: seq + 1, id: to, a: a, c: c, bigUnset: true},
		}
	case op <= 6:
		return []change{{op: cdc.OpUpdate, lsn: lsn, seq: seq, id: id, a: a, c: c, bigUnset: true}}
	default:
		return []change{{op: cdc.OpUpdate, lsn: lsn, seq: seq, id: id, a: a, c: c, big: big}}
	}
}

// TestUnchangedAcrossRename: a row whose TOAST column was left unchanged
// under the column's old name still takes the value the key's earlier
// version sent, once the column is renamed (__unchanged names the column as
// the file's schema version called it).
func TestUnchangedAcrossRename(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := newSink(t)
	s.writeDelta(t, []change{{op: cdc.OpInsert, lsn: 100, seq: 1, id: 1, a: 5, big: "kept"}}, 1)
	s.writeDelta(t, []change{{op: cdc.OpUpdate, lsn: 110, seq: 1, id: 1, a: 6, bigUnset: true}}, 1)
	s.writeDelta(t, []change{{op: cdc.OpInsert, lsn: 120, seq: 1, id: 2, a: 7, c: 1, big: "other"}}, 3)
	want := []string{"1|6|kept|7", "2|7|other|1"}
	if got := s.viaSQL(t, db, mergesql.Bound{}); !slices.Equal(got, want) {
		t.Errorf("merge SQL: %q, want %q", got, want)
	}
	if got := s.viaMerge(t); !slices.Equal(got, want) {
		t.Errorf("internal/merge: %q, want %q", got, want)
	}
}
