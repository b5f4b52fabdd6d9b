// Package changefeedtest builds filesystem sinks for the change feed's and
// the REST API's tests: manifest versions committed by hand with real
// Parquet files, compactions by internal/compact and its garbage
// collection, so tests read them through the real read path. Test use
// only; it imports no DuckDB.
package changefeedtest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/fs"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// Row is one change row of a test table (id bigint primary key, status
// text, amount numeric(12,2), at timestamptz): a NULL status when Status is
// "\x00", Seq its place in the transaction.
type Row struct {
	Op     cdc.Op
	LSN    cdc.LSN
	Seq    int64
	ID     int64
	Status string
	Amount string // numeric text, "" for NULL
}

// Sink is a filesystem sink whose versions a test commits by hand.
type Sink struct {
	tb     testing.TB
	Dir    string
	Store  *fs.Store
	MC     *manifest.Committer
	tables map[string]*cdc.Table
	Now    time.Time
	files  int
}

// Columns of every test table.
var Columns = []cdc.Column{
	{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", FieldID: 1, NotNull: true},
	{Name: "status", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
	{Name: "amount", TypeOID: 1700, TypeMod: (12<<16 | 2) + 4, PGType: "numeric(12,2)", FieldID: 3},
	{Name: "at", TypeOID: 1184, TypeMod: -1, PGType: "timestamp with time zone", FieldID: 4},
}

// New creates a sink capturing tables ("schema.name"; a name may hold
// quotes or dots after the first), keyed by id unless listed in keyless.
// Version 1 is the created manifest: every table complete, no file.
func New(tb testing.TB, tables []string, keyless ...string) *Sink {
	tb.Helper()
	dir := tb.TempDir()
	store, err := fs.New(dir)
	if err != nil {
		tb.Fatal(err)
	}
	s := &Sink{tb: tb, Dir: dir, Store: store, tables: map[string]*cdc.Table{}, Now: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	m := &manifest.Manifest{Source: manifest.Source{SystemIdentifier: "1", Database: "shop"}, EndLSN: 0x100, Tables: map[string]*manifest.Table{}}
	for i, key := range tables {
		schema, name, _ := strings.Cut(key, ".")
		tbl := &cdc.Table{ID: cdc.TableID{Schema: schema, Name: name}, OID: uint32(100 + i), ReplicaIdentity: cdc.ReplicaIdentityDefault, SchemaVersion: 1, Columns: Columns}
		ps, err := parquetfile.NewSchema(tbl)
		if err != nil {
			tb.Fatal(err)
		}
		pk := []string{"id"}
		for _, k := range keyless {
			if k == key {
				pk = []string{}
			}
		}
		s.tables[key] = tbl
		m.Tables[key] = &manifest.Table{Schema: schema, Name: name, OID: tbl.OID, Generation: "g0001", PrimaryKey: pk,
			ReplicaIdentity: "default", SchemaVersion: 1, Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete, LSN: 0x100},
			Schemas: []manifest.SchemaVersion{{Version: 1, Columns: ps.ManifestColumns(tbl)}}}
	}
	m.AppendHistory(manifest.EpochRecord{Epoch: 0, EndLSN: 0x100, MaxCommitTime: s.Now, FlushedAt: s.Now})
	if s.MC, err = manifest.Create(context.Background(), store, m, s.Now); err != nil {
		tb.Fatal(err)
	}
	return s
}

// Flush commits epoch: one delta file per table given, the clock a second
// on. It returns the new version.
func (s *Sink) Flush(epoch uint64, rows map[string][]Row) *manifest.Manifest {
	s.tb.Helper()
	s.Now = s.Now.Add(time.Second)
	files := map[string]manifest.Delta{}
	endLSN := cdc.LSN(0)
	for key, rs := range rows {
		f := s.writeFile(key, epoch, rs)
		d := manifest.Delta{Epoch: epoch, SchemaVersion: 1, Rows: f.Rows, Files: []manifest.File{f}, MinLSN: rs[0].LSN}
		for _, r := range rs {
			d.MaxLSN = max(d.MaxLSN, r.LSN)
		}
		endLSN = max(endLSN, d.MaxLSN)
		files[key] = d
	}
	m, err := s.MC.Commit(context.Background(), func(m *manifest.Manifest) error {
		for key, d := range files {
			m.Tables[key].Deltas = append(m.Tables[key].Deltas, d)
		}
		m.Epoch, m.EndLSN = epoch, max(m.EndLSN, endLSN+8)
		m.AppendHistory(manifest.EpochRecord{Epoch: epoch, EndLSN: m.EndLSN, MaxCommitTime: s.Now, FlushedAt: s.Now})
		return nil
	})
	if err != nil {
		s.tb.Fatal(err)
	}
	return m
}

// CommitTime is the commit time Flush stamps rows of its epoch with.
func (s *Sink) writeFile(key string, epoch uint64, rs []Row) manifest.File {
	s.tb.Helper()
	tbl := s.tables[key]
	ps, err := parquetfile.NewSchema(tbl)
	if err != nil {
		s.tb.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, ps)
	for _, r := range rs {
		vals := []cdc.Datum{{Kind: cdc.DatumText, Text: []byte(strconv.FormatInt(r.ID, 10))}, {Kind: cdc.DatumNull}, {Kind: cdc.DatumNull}, {Kind: cdc.DatumNull}}
		if r.Op == cdc.OpTruncate {
			vals[0] = cdc.Datum{Kind: cdc.DatumNull}
		}
		if r.Status != "\x00" && r.Op != cdc.OpTruncate && r.Op != cdc.OpDelete {
			vals[1] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(r.Status)}
			vals[3] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(s.Now.Format("2006-01-02 15:04:05.999999+00"))}
		}
		if r.Amount != "" && r.Op != cdc.OpDelete {
			vals[2] = cdc.Datum{Kind: cdc.DatumText, Text: []byte(r.Amount)}
		}
		meta := cdc.RowMeta{Op: r.Op, LSN: r.LSN, Seq: r.Seq, XID: cdc.XID(r.LSN), CommitTime: s.Now}
		if err := w.Write(meta, vals); err != nil {
			s.tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		s.tb.Fatal(err)
	}
	s.files++
	path := filepath.ToSlash(filepath.Join(tbl.ID.Schema, tbl.ID.Name, "g0001", "delta", fmt.Sprintf("%08d", epoch), fmt.Sprintf("part-%05d.parquet", s.files)))
	if err := s.Store.Put(context.Background(), path, bytes.NewReader(buf.Bytes())); err != nil {
		s.tb.Fatal(err)
	}
	return manifest.File{Path: path, Rows: int64(len(rs)), Bytes: int64(buf.Len())}
}

// Compact folds the table's deltas into a new base with internal/compact,
// committed as the next version.
func (s *Sink) Compact(key string) {
	s.tb.Helper()
	ctx := context.Background()
	mc, err := compact.NewCommitter(ctx, s.Store)
	if err != nil {
		s.tb.Fatal(err)
	}
	schema, name, _ := strings.Cut(key, ".")
	s.Now = s.Now.Add(time.Second)
	now := s.Now
	res, err := compact.Table(ctx, s.Store, mc, cdc.TableID{Schema: schema, Name: name}, compact.Options{
		ScratchDir: filepath.Join(s.tb.TempDir(), "compact"), Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		s.tb.Fatal(err)
	}
	if res.Skipped != "" {
		s.tb.Fatalf("compact %s: skipped: %s", key, res.Skipped)
	}
	if err := s.MC.Refresh(ctx); err != nil {
		s.tb.Fatal(err)
	}
}

// Expire runs garbage collection as if after a long while with a short
// history.retention: only the newest version stays readable, and files
// retired before it are deleted.
func (s *Sink) Expire() compact.CollectResult {
	s.tb.Helper()
	ctx := context.Background()
	mc, err := compact.NewCommitter(ctx, s.Store)
	if err != nil {
		s.tb.Fatal(err)
	}
	later := s.Now.Add(30 * 24 * time.Hour)
	res, err := compact.Collect(ctx, s.Store, mc, compact.CollectOptions{Grace: time.Minute, Retention: time.Hour, Now: func() time.Time { return later }})
	if err != nil {
		s.tb.Fatal(err)
	}
	if err := s.MC.Refresh(ctx); err != nil {
		s.tb.Fatal(err)
	}
	return res
}
