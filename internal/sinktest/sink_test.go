package sinktest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// change is one row written to a test sink: its op, order token and values
// by column name (missing is NULL, unchanged is an unchanged TOAST value).
type change struct {
	op     cdc.Op
	lsn    cdc.LSN
	seq    int64
	values map[string]string
}

const unchanged = "\x00unchanged"

func ins(lsn cdc.LSN, seq int64, kv ...string) change {
	return change{cdc.OpInsert, lsn, seq, pairs(kv)}
}
func upd(lsn cdc.LSN, seq int64, kv ...string) change {
	return change{cdc.OpUpdate, lsn, seq, pairs(kv)}
}
func del(lsn cdc.LSN, seq int64, kv ...string) change {
	return change{cdc.OpDelete, lsn, seq, pairs(kv)}
}
func trunc(lsn cdc.LSN, seq int64) change { return change{cdc.OpTruncate, lsn, seq, nil} }

func pairs(kv []string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// testSink builds a filesystem sink by hand: Parquet files written with
// parquetfile at their manifest keys, and a manifest naming them.
type testSink struct {
	t    *testing.T
	root string
	m    *manifest.Manifest
}

func newSink(t *testing.T) *testSink {
	return &testSink{t: t, root: t.TempDir(), m: &manifest.Manifest{
		FormatVersion: manifest.FormatVersion,
		Tables:        map[string]*manifest.Table{},
	}}
}

// table registers tbl (a new schema version when it is already there).
func (s *testSink) table(tbl *cdc.Table, fromEpoch uint64) {
	s.t.Helper()
	schema, err := parquetfile.NewSchema(tbl)
	if err != nil {
		s.t.Fatal(err)
	}
	mt := s.m.Tables[tbl.ID.String()]
	if mt == nil {
		mt = &manifest.Table{Schema: tbl.ID.Schema, Name: tbl.ID.Name, OID: tbl.OID, Generation: "g0001",
			PrimaryKey: tbl.PrimaryKey, ReplicaIdentity: string(tbl.ReplicaIdentity),
			Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete}}
		s.m.Tables[tbl.ID.String()] = mt
	}
	mt.SchemaVersion++
	mt.Schemas = append(mt.Schemas, manifest.SchemaVersion{Version: mt.SchemaVersion, FromEpoch: fromEpoch,
		Columns: schema.ManifestColumns(tbl)})
}

// file writes changes of tbl as one part and returns its manifest entry.
func (s *testSink) file(tbl *cdc.Table, kind manifest.Kind, epoch uint64, part int, changes []change) manifest.File {
	s.t.Helper()
	schema, err := parquetfile.NewSchema(tbl)
	if err != nil {
		s.t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, schema)
	for _, c := range changes {
		var values []cdc.Datum
		if c.op != cdc.OpTruncate {
			values = make([]cdc.Datum, len(tbl.Columns))
			for i, col := range tbl.Columns {
				v, ok := c.values[col.Name]
				switch {
				case !ok:
				case v == unchanged:
					values[i] = cdc.Datum{Kind: cdc.DatumUnchanged}
				default:
					values[i] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(v)}
				}
			}
		}
		meta := cdc.RowMeta{Op: c.op, LSN: c.lsn, Seq: c.seq, XID: cdc.XID(c.lsn), CommitTime: time.Unix(int64(c.lsn), 0)}
		if err := w.Write(meta, values); err != nil {
			s.t.Fatalf("write %v: %v", c, err)
		}
	}
	if err := w.Close(); err != nil {
		s.t.Fatal(err)
	}
	key := manifest.FileKey(tbl.ID, "g0001", kind, epoch, part)
	path := filepath.Join(s.root, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		s.t.Fatal(err)
	}
	return manifest.File{Path: key, Rows: w.Rows(), Bytes: int64(buf.Len())}
}

func (s *testSink) base(tbl *cdc.Table, changes ...change) {
	s.t.Helper()
	f := s.file(tbl, manifest.KindBase, 0, 0, changes)
	s.m.Tables[tbl.ID.String()].Base = &manifest.Base{Epoch: 0, RowCount: f.Rows, Files: []manifest.File{f}}
}

// delta adds one epoch's delta of tbl, one file per list of changes.
func (s *testSink) delta(tbl *cdc.Table, epoch uint64, parts ...[]change) {
	s.t.Helper()
	mt := s.m.Tables[tbl.ID.String()]
	d := manifest.Delta{Epoch: epoch, SchemaVersion: mt.SchemaVersion}
	for i, p := range parts {
		f := s.file(tbl, manifest.KindDelta, epoch, i, p)
		d.Files = append(d.Files, f)
		d.Rows += f.Rows
	}
	mt.Deltas = append(mt.Deltas, d)
	s.m.Epoch = max(s.m.Epoch, epoch)
}

// commit writes the manifest and returns the sink root.
func (s *testSink) commit() string {
	s.t.Helper()
	data, err := s.m.Encode()
	if err != nil {
		s.t.Fatal(err)
	}
	path := filepath.Join(s.root, filepath.FromSlash(manifest.Key))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		s.t.Fatal(err)
	}
	return s.root
}

// itemsTable is a keyed table with a TOASTable column and typed values.
func itemsTable() *cdc.Table {
	return &cdc.Table{
		ID:  cdc.TableID{Schema: "public", Name: "items"},
		OID: 16400,
		Columns: []cdc.Column{
			{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", NotNull: true, FieldID: 1},
			{Name: "name", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
			{Name: "payload", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 3},
			{Name: "price", TypeOID: 1700, TypeMod: 10<<16 | 2 + 4, PGType: "numeric(10,2)", FieldID: 4},
			{Name: "ref", TypeOID: 2950, TypeMod: -1, PGType: "uuid", FieldID: 5},
			{Name: "doc", TypeOID: 3802, TypeMod: -1, PGType: "jsonb", FieldID: 6},
		},
		PrimaryKey:      []string{"id"},
		ReplicaIdentity: cdc.ReplicaIdentityDefault,
	}
}

// logTable has no primary key: insert-only.
func logTable() *cdc.Table {
	return &cdc.Table{
		ID: cdc.TableID{Schema: "public", Name: "log"},
		Columns: []cdc.Column{
			{Name: "at", TypeOID: 1184, TypeMod: -1, PGType: "timestamp with time zone", FieldID: 1},
			{Name: "msg", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
		},
		ReplicaIdentity: cdc.ReplicaIdentityDefault,
	}
}

// canonicalRows renders rows through Canonical, one string per row.
func canonicalRows(rows [][]any) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		for j, v := range r {
			if j > 0 {
				out[i] += " | "
			}
			out[i] += Canonical(v)
		}
	}
	return out
}

func checkRows(t *testing.T, got [][]any, want ...string) {
	t.Helper()
	g := canonicalRows(got)
	if len(g) != len(want) {
		t.Fatalf("got %d rows, want %d:\n%s", len(g), len(want), joinLines(g))
	}
	for i := range want {
		if g[i] != want[i] {
			t.Errorf("row %d:\n got %s\nwant %s", i, g[i], want[i])
		}
	}
}

func joinLines(s []string) string {
	out := ""
	for i, l := range s {
		out += strconv.Itoa(i) + ": " + l + "\n"
	}
	return out
}
