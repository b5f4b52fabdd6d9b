//go:build !nodb

package mcpserver

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

// The read path's reader and the change feed serve the server's ports.
var (
	_ Reader     = (*query.Reader)(nil)
	_ ChangeFeed = (*changefeed.Feed)(nil)
)

// row is one change row of a test table: op, LSN and the values by
// column name (absent: NULL).
type row struct {
	op   cdc.Op
	lsn  int
	vals map[string]string
}

// testSink is a filesystem sink whose manifest versions a test commits by
// hand (as internal/query's tests do), with four tables:
//
//	public.orders  id bigint (key), note text, amount numeric(12,2), uid uuid;
//	               epoch 3 adds status text (schema version 2)
//	shop.orders    id bigint (key), note text
//	public.items   id bigint (key), note text
//	public.events  id bigint, note text (no key)
type testSink struct {
	t      testing.TB
	dir    string
	store  *fs.Store
	mc     *manifest.Committer
	tables map[string]*cdc.Table
	now    time.Time
}

var sinkStart = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

func numericMod(p, s int) int32 { return int32(p<<16|s) + 4 }

func newTestSink(t testing.TB, dir string) *testSink {
	t.Helper()
	store, err := fs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &testSink{t: t, dir: dir, store: store, tables: map[string]*cdc.Table{}, now: sinkStart}
	m := &manifest.Manifest{Source: manifest.Source{SystemIdentifier: "7300000000000000001", Timeline: 1, Database: "shop", Slot: "pgcdc", Publication: "pgcdc"},
		EndLSN: 0x100, Tables: map[string]*manifest.Table{}}
	base := []cdc.Column{
		{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", FieldID: 1, NotNull: true},
		{Name: "note", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
	}
	for i, key := range []string{"public.orders", "shop.orders", "public.items", "public.events"} {
		schema, name, _ := strings.Cut(key, ".")
		cols := append([]cdc.Column(nil), base...)
		if key == "public.orders" {
			cols = append(cols,
				cdc.Column{Name: "amount", TypeOID: 1700, TypeMod: numericMod(12, 2), PGType: "numeric(12,2)", FieldID: 3},
				cdc.Column{Name: "uid", TypeOID: 2950, TypeMod: -1, PGType: "uuid", FieldID: 4})
		}
		pk := []string{"id"}
		if key == "public.events" {
			pk = nil
		}
		tbl := &cdc.Table{ID: cdc.TableID{Schema: schema, Name: name}, OID: uint32(100 + i), ReplicaIdentity: cdc.ReplicaIdentityDefault, SchemaVersion: 1, Columns: cols, PrimaryKey: pk}
		ps, err := parquetfile.NewSchema(tbl)
		if err != nil {
			t.Fatal(err)
		}
		s.tables[key] = tbl
		m.Tables[key] = &manifest.Table{Schema: schema, Name: name, OID: tbl.OID, Generation: "g0001", PrimaryKey: pk,
			ReplicaIdentity: "default", SchemaVersion: 1, Schemas: []manifest.SchemaVersion{{Version: 1, Columns: ps.ManifestColumns(tbl)}}}
	}
	m.AppendHistory(manifest.EpochRecord{Epoch: 0, EndLSN: 0x100, MaxCommitTime: s.now, FlushedAt: s.now})
	m.FreshAsOf = s.now
	if s.mc, err = manifest.Create(context.Background(), store, m, s.now); err != nil {
		t.Fatal(err)
	}
	return s
}

// addStatus adds public.orders.status text from epoch on (schema
// version 2), as the stream does for an ADD COLUMN.
func (s *testSink) addStatus(m *manifest.Manifest, epoch uint64) {
	s.t.Helper()
	tbl := *s.tables["public.orders"]
	tbl.Columns = append(append([]cdc.Column(nil), tbl.Columns...), cdc.Column{Name: "status", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 5})
	tbl.SchemaVersion = 2
	ps, err := parquetfile.NewSchema(&tbl)
	if err != nil {
		s.t.Fatal(err)
	}
	s.tables["public.orders"] = &tbl
	mt := m.Tables["public.orders"]
	mt.Schemas = append(mt.Schemas, manifest.SchemaVersion{Version: 2, FromEpoch: epoch, Columns: ps.ManifestColumns(&tbl)})
	mt.SchemaVersion = 2
}

// flush commits one epoch: a delta file per table given; change, if set,
// edits the manifest first (a schema change).
func (s *testSink) flush(epoch uint64, rows map[string][]row, change func(*manifest.Manifest)) *manifest.Manifest {
	s.t.Helper()
	s.now = s.now.Add(time.Minute)
	m, err := s.mc.Commit(context.Background(), func(m *manifest.Manifest) error {
		if change != nil {
			change(m)
		}
		maxLSN := m.EndLSN
		for key, rs := range rows {
			f := s.writeFile(key, epoch, rs)
			for _, r := range rs {
				maxLSN = max(maxLSN, cdc.LSN(r.lsn))
			}
			mt := m.Tables[key]
			mt.Deltas = append(mt.Deltas, manifest.Delta{Epoch: epoch, SchemaVersion: mt.SchemaVersion, Rows: f.Rows, Files: []manifest.File{f},
				MinLSN: cdc.LSN(rs[0].lsn), MaxLSN: cdc.LSN(rs[len(rs)-1].lsn)})
		}
		m.Epoch, m.EndLSN = epoch, maxLSN
		m.AppendHistory(manifest.EpochRecord{Epoch: epoch, EndLSN: maxLSN, MaxCommitTime: s.now, FlushedAt: s.now})
		m.FreshAsOf = s.now
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return m
}

func (s *testSink) writeFile(key string, epoch uint64, rs []row) manifest.File {
	s.t.Helper()
	tbl := s.tables[key]
	ps, err := parquetfile.NewSchema(tbl)
	if err != nil {
		s.t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, ps)
	for i, r := range rs {
		vals := make([]cdc.Datum, len(tbl.Columns))
		for j, c := range tbl.Columns {
			if v, ok := r.vals[c.Name]; ok {
				vals[j] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(v)}
			}
		}
		meta := cdc.RowMeta{Op: r.op, LSN: cdc.LSN(r.lsn), Seq: int64(i), XID: cdc.XID(r.lsn), CommitTime: s.now}
		if err := w.Write(meta, vals); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		s.t.Fatal(err)
	}
	path := filepath.ToSlash(filepath.Join(tbl.ID.Schema, tbl.ID.Name, "g0001", "delta", strconv.Itoa(int(epoch)), "part-00000.parquet"))
	if err := s.store.Put(context.Background(), path, bytes.NewReader(buf.Bytes())); err != nil {
		s.t.Fatal(err)
	}
	return manifest.File{Path: path, Rows: int64(len(rs)), Bytes: int64(buf.Len())}
}

const (
	uid1 = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
	uid2 = "b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12"
	uid3 = "c0eebc99-9c0b-4ef8-bb6d-6bb9bd380a13"
	uid4 = "d0eebc99-9c0b-4ef8-bb6d-6bb9bd380a14"
	uid5 = "e0eebc99-9c0b-4ef8-bb6d-6bb9bd380a15"
)

func order(op cdc.Op, lsn int, id int, note, amount, uid string) row {
	return row{op, lsn, map[string]string{"id": strconv.Itoa(id), "note": note, "amount": amount, "uid": uid}}
}

// buildSink writes the fixture every test reads, versions 1 to 4:
//
//	v1 (epoch 0)  the tables, no rows
//	v2 (epoch 1)  orders 1 a, 2 b, 3 c; shop.orders 7; items 1; events e1, e2
//	v3 (epoch 2)  orders: 1 updated to a2, 2 deleted, 4 d inserted
//	v4 (epoch 3)  orders gains status; 5 e (status new) inserted, 3 updated (status paid)
//
// so public.orders is now 1 a2, 3 c paid, 4 d, 5 e new.
func buildSink(t testing.TB, dir string) *testSink {
	s := newTestSink(t, dir)
	s.flush(1, map[string][]row{
		"public.orders": {order(cdc.OpInsert, 0x200, 1, "a", "10.50", uid1), order(cdc.OpInsert, 0x200, 2, "b", "20.00", uid2), order(cdc.OpInsert, 0x200, 3, "c", "30.25", uid3)},
		"shop.orders":   {{cdc.OpInsert, 0x200, map[string]string{"id": "7", "note": "x"}}},
		"public.items":  {{cdc.OpInsert, 0x200, map[string]string{"id": "1", "note": "i"}}},
		"public.events": {{cdc.OpInsert, 0x200, map[string]string{"id": "1", "note": "e1"}}, {cdc.OpInsert, 0x200, map[string]string{"id": "2", "note": "e2"}}},
	}, nil)
	s.flush(2, map[string][]row{
		"public.orders": {order(cdc.OpUpdate, 0x300, 1, "a2", "11.00", uid1), {cdc.OpDelete, 0x300, map[string]string{"id": "2"}}, order(cdc.OpInsert, 0x300, 4, "d", "40.00", uid4)},
	}, nil)
	s.flush(3, map[string][]row{
		"public.orders": {
			{cdc.OpInsert, 0x400, map[string]string{"id": "5", "note": "e", "amount": "50.00", "uid": uid5, "status": "new"}},
			{cdc.OpUpdate, 0x400, map[string]string{"id": "3", "note": "c", "amount": "30.25", "uid": uid3, "status": "paid"}},
		},
	}, func(m *manifest.Manifest) { s.addStatus(m, 3) })
	return s
}

func newReader(t testing.TB, s *testSink, tmp string) *query.Reader {
	t.Helper()
	r, err := query.NewReader(query.ReaderOptions{Sink: s.store, TempDir: filepath.Join(tmp, "query"), Engines: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// addTable captures one more table (id bigint key, note text) from the
// next version on.
func (s *testSink) addTable(key string) {
	s.t.Helper()
	schema, name, _ := strings.Cut(key, ".")
	tbl := &cdc.Table{ID: cdc.TableID{Schema: schema, Name: name}, OID: uint32(200 + len(s.tables)), ReplicaIdentity: cdc.ReplicaIdentityDefault, SchemaVersion: 1, PrimaryKey: []string{"id"},
		Columns: []cdc.Column{
			{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", FieldID: 1, NotNull: true},
			{Name: "note", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
		}}
	ps, err := parquetfile.NewSchema(tbl)
	if err != nil {
		s.t.Fatal(err)
	}
	s.tables[key] = tbl
	if _, err := s.mc.Commit(context.Background(), func(m *manifest.Manifest) error {
		m.Tables[key] = &manifest.Table{Schema: schema, Name: name, OID: tbl.OID, Generation: "g0001", PrimaryKey: []string{"id"},
			ReplicaIdentity: "default", SchemaVersion: 1, Schemas: []manifest.SchemaVersion{{Version: 1, Columns: ps.ManifestColumns(tbl)}}}
		return nil
	}); err != nil {
		s.t.Fatal(err)
	}
}
