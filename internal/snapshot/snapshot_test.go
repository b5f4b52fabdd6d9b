package snapshot

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// fakeSource serves n rows per table, or fails a named table.
type fakeSource struct {
	rows map[string]int
	fail string
}

func (f fakeSource) CopyTable(ctx context.Context, snapshot string, t *cdc.Table, fn func([]cdc.Datum) error) (int64, error) {
	if t.ID.String() == f.fail {
		return 0, errors.New("connection reset")
	}
	n := f.rows[t.ID.String()]
	for i := 0; i < n; i++ {
		if err := fn([]cdc.Datum{{Kind: cdc.DatumText, Text: []byte(strconv.Itoa(i))}, {Kind: cdc.DatumNull}}); err != nil {
			return int64(i), err
		}
	}
	return int64(n), nil
}

func table(name string) *cdc.Table {
	return &cdc.Table{
		ID: cdc.TableID{Schema: "public", Name: name}, OID: 1,
		Columns: []cdc.Column{
			{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", NotNull: true, FieldID: 1},
			{Name: "v", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
		},
		PrimaryKey: []string{"id"}, ReplicaIdentity: cdc.ReplicaIdentityDefault,
	}
}

func TestRunSplitsPartsAndKeepsEmptyTables(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	src := fakeSource{rows: map[string]int{"public.big": 25, "public.empty": 0}}
	bases, err := Run(ctx, src, store, []*cdc.Table{table("big"), table("empty")}, Options{
		Snapshot: "snap", LSN: 0x1000, Time: time.Now(), Workers: 2, Generation: "g0001",
		SpoolDir: t.TempDir(), PartRows: 10,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	big := bases["public.big"]
	if big.RowCount != 25 || len(big.Files) != 3 || big.MaxLSN != 0x1000 || big.Epoch != 0 {
		t.Fatalf("big base: %+v", big)
	}
	var sum int64
	for i, f := range big.Files {
		if !strings.HasSuffix(f.Path, "/base/00000000/part-0000"+strconv.Itoa(i)+".parquet") || f.Bytes == 0 {
			t.Errorf("file %d: %+v", i, f)
		}
		sum += f.Rows
	}
	if sum != 25 {
		t.Errorf("files hold %d rows", sum)
	}
	empty := bases["public.empty"]
	if empty.RowCount != 0 || len(empty.Files) != 1 {
		t.Fatalf("an empty table gets one empty base file, got %+v", empty)
	}
	objs, err := store.List(ctx, "public/")
	if err != nil || len(objs) != 4 {
		t.Fatalf("stored objects: %v %v", objs, err)
	}
}

func TestRunNamesTheFailingTable(t *testing.T) {
	_, err := Run(context.Background(), fakeSource{rows: map[string]int{"public.ok": 3}, fail: "public.bad"},
		memory.New(), []*cdc.Table{table("ok"), table("bad")},
		Options{Workers: 2, Generation: "g0001", SpoolDir: t.TempDir()}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "public.bad") {
		t.Fatalf("want an error naming public.bad, got %v", err)
	}
}

// TestRunTwoEncoders copies a table big enough for a second encoder: every
// row lands exactly once, in one of the parts, with __seq from its place in
// the COPY, and an encoder's error stops the COPY and names the row.
func TestRunTwoEncoders(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	const rows = secondEncoderAfter + 50_000
	bases, err := Run(ctx, fakeSource{rows: map[string]int{"public.big": rows}}, store, []*cdc.Table{table("big")}, Options{
		LSN: 0x1000, Time: time.Now(), Workers: 1, Generation: "g0001", SpoolDir: t.TempDir(), Encoders: 2,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	big := bases["public.big"]
	if big.RowCount != rows || len(big.Files) != 2 {
		t.Fatalf("want %d rows in 2 files, got %d rows in %d files", rows, big.RowCount, len(big.Files))
	}
	seen := make([]bool, rows)
	for i, f := range big.Files {
		if !strings.HasSuffix(f.Path, "/part-0000"+strconv.Itoa(i)+".parquet") {
			t.Errorf("file %d: %s", i, f.Path)
		}
		rc, err := store.Get(ctx, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if pf.NumRows() != f.Rows {
			t.Errorf("%s: %d rows, manifest says %d", f.Path, pf.NumRows(), f.Rows)
		}
		r := parquet.NewReader(pf)
		row := parquet.Row{}
		for {
			rs := []parquet.Row{row}
			n, err := r.ReadRows(rs)
			if n == 1 {
				// Leaves: __op, __lsn, __seq, __xid, __op_ts, __unchanged, id, v.
				var seq, id int64
				rs[0].Range(func(col int, v []parquet.Value) bool {
					switch col {
					case 2:
						seq = v[0].Int64()
					case 6:
						id = v[0].Int64()
					}
					return true
				})
				if id < 0 || id >= rows || seen[id] {
					t.Fatalf("row id %d out of range or seen twice", id)
				}
				seen[id] = true
				if seq != math.MinInt64+id {
					t.Fatalf("row %d has __seq %d", id, seq)
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for id, ok := range seen {
		if !ok {
			t.Fatalf("row %d missing", id)
		}
	}

	// A value the writer refuses (not an integer in a bigint column) fails
	// the table with the row number, whichever encoder meets it.
	_, err = Run(ctx, badSource{rows: rows, bad: rows - 10}, memory.New(), []*cdc.Table{table("big")},
		Options{Workers: 1, Generation: "g0001", SpoolDir: t.TempDir(), Encoders: 2}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "row "+strconv.Itoa(rows-10+1)) {
		t.Fatalf("want an error naming row %d, got %v", rows-10+1, err)
	}
}

// badSource serves rows of which one has a malformed id.
type badSource struct{ rows, bad int }

func (b badSource) CopyTable(ctx context.Context, snapshot string, t *cdc.Table, fn func([]cdc.Datum) error) (int64, error) {
	for i := 0; i < b.rows; i++ {
		id := strconv.Itoa(i)
		if i == b.bad {
			id = "x"
		}
		if err := fn([]cdc.Datum{{Kind: cdc.DatumText, Text: []byte(id)}, {Kind: cdc.DatumText, Text: []byte("v")}}); err != nil {
			return int64(i), err
		}
		if err := ctx.Err(); err != nil {
			return int64(i), err
		}
	}
	return int64(b.rows), nil
}
