package snapshot

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

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
