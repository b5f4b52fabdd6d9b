package compact_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/merge"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// The test table: id bigint primary key, a int, big text (the column whose
// value TOAST leaves unchanged).
var testTable = &cdc.Table{
	ID:              cdc.TableID{Schema: "public", Name: "t"},
	OID:             16384,
	PrimaryKey:      []string{"id"},
	ReplicaIdentity: cdc.ReplicaIdentityDefault,
	Columns: []cdc.Column{
		{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", NotNull: true, FieldID: 1},
		{Name: "a", TypeOID: 23, TypeMod: -1, PGType: "integer", FieldID: 2},
		{Name: "big", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 3},
	},
}

const gen = "g0001"

// newManifest creates the sink's first manifest with the test table and no
// files.
func newManifest(t testing.TB, store blob.Conditional) {
	t.Helper()
	s, err := parquetfile.NewSchema(testTable)
	if err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{
		Source: manifest.Source{SystemIdentifier: "1", Database: "db", Slot: "s", Publication: "p"},
		Tables: map[string]*manifest.Table{
			testTable.ID.String(): {
				Schema: "public", Name: "t", OID: testTable.OID, Generation: gen,
				PrimaryKey: []string{"id"}, ReplicaIdentity: "default", SchemaVersion: 1,
				Schemas:  []manifest.SchemaVersion{{Version: 1, Columns: s.ManifestColumns(testTable)}},
				Snapshot: manifest.Snapshot{State: manifest.SnapshotComplete},
			},
		},
	}
	if _, err := manifest.Create(context.Background(), store, m, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// change is one row change of the test table.
type change struct {
	op       cdc.Op
	lsn      int64
	seq      int64
	id       int64
	a        int64
	big      string
	bigUnset bool // big left unchanged (TOAST)
	keyOnly  bool // a delete that carries the key only
}

// writeDelta writes changes as the delta of the next epoch, the way a flush
// does (file, then manifest).
func writeDelta(t testing.TB, store interface {
	blob.Store
	blob.Conditional
}, changes []change) uint64 {
	t.Helper()
	ctx := context.Background()
	mc, err := manifest.Open(ctx, store, manifest.Breaker{})
	if err != nil {
		t.Fatal(err)
	}
	epoch := mc.Current().Epoch + 1
	s, err := parquetfile.NewSchema(testTable)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := parquetfile.NewWriter(&buf, s)
	var minLSN, maxLSN int64
	for i, c := range changes {
		meta := cdc.RowMeta{Op: c.op, LSN: cdc.LSN(c.lsn), Seq: c.seq, XID: cdc.XID(c.lsn), CommitTime: time.UnixMicro(c.lsn * 1000)}
		var values []cdc.Datum
		if c.op != cdc.OpTruncate {
			values = []cdc.Datum{text(strconv.FormatInt(c.id, 10)), text(strconv.FormatInt(c.a, 10)), text(c.big)}
			if c.bigUnset {
				values[2] = cdc.Datum{Kind: cdc.DatumUnchanged}
			}
			if c.keyOnly {
				values[1], values[2] = cdc.Datum{}, cdc.Datum{}
			}
		}
		if err := w.Write(meta, values); err != nil {
			t.Fatal(err)
		}
		if i == 0 || c.lsn < minLSN {
			minLSN = c.lsn
		}
		maxLSN = max(maxLSN, c.lsn)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	key := manifest.FileKey(testTable.ID, gen, manifest.KindDelta, epoch, 0)
	if err := store.Put(ctx, key, bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	_, err = mc.Commit(ctx, func(m *manifest.Manifest) error {
		mt := m.Tables[testTable.ID.String()]
		mt.Deltas = append(mt.Deltas, manifest.Delta{
			Epoch: epoch, MinLSN: cdc.LSN(minLSN), MaxLSN: cdc.LSN(maxLSN), Rows: int64(len(changes)), SchemaVersion: 1,
			Files: []manifest.File{{Path: key, Rows: int64(len(changes)), Bytes: int64(buf.Len())}},
		})
		m.Epoch = epoch
		m.EndLSN = max(m.EndLSN, cdc.LSN(maxLSN))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return epoch
}

func text(s string) cdc.Datum { return cdc.Datum{Kind: cdc.DatumText, Text: []byte(s)} }

// stateRow is one live row of the test table as the sink holds it.
type stateRow struct {
	a        int64
	big      string
	bigNull  bool
	bigUnset bool // still listed in __unchanged
}

func (r stateRow) String() string {
	return fmt.Sprintf("{a=%d big=%q null=%v unset=%v}", r.a, r.big, r.bigNull, r.bigUnset)
}

// mergedState reads the table's merged state from the sink.
func mergedState(t testing.TB, store blob.Store, scratch string) map[int64]stateRow {
	t.Helper()
	ctx := context.Background()
	mc, err := manifest.Open(ctx, store.(blob.Conditional), manifest.Breaker{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := merge.Open(ctx, store, mc.Current().Tables[testTable.ID.String()], merge.Options{ScratchDir: scratch, MemoryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := map[int64]stateRow{}
	var prev parquet.Row
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil && r.Order().CompareKey(prev, row) >= 0 {
			t.Fatalf("merged rows out of key order")
		}
		prev = row.Clone()
		id, sr := decodeRow(t, row)
		if _, dup := out[id]; dup {
			t.Fatalf("key %d returned twice", id)
		}
		out[id] = sr
	}
	return out
}

// decodeRow reads a row of the test table's layout.
func decodeRow(t testing.TB, row parquet.Row) (int64, stateRow) {
	t.Helper()
	var id int64
	var sr stateRow
	row.Range(func(col int, vals []parquet.Value) bool {
		switch col {
		case parquetfile.LeafUnchanged:
			for _, v := range vals {
				if !v.IsNull() && string(v.ByteArray()) == "big" {
					sr.bigUnset = true
				}
			}
		case parquetfile.FirstDataLeaf:
			id = vals[0].Int64()
		case parquetfile.FirstDataLeaf + 1:
			sr.a = int64(vals[0].Int32())
		case parquetfile.FirstDataLeaf + 2:
			if vals[0].IsNull() {
				sr.bigNull = true
			} else {
				sr.big = string(vals[0].ByteArray())
			}
		}
		return true
	})
	return id, sr
}
