package generation

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
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/snapshot"
)

// source is a table of n rows (id, v) that both the snapshot's COPY and
// Validate's sample read; edit changes what Validate reads.
type source struct {
	n         int
	edit      func(rows map[string][]cdc.Datum) int64 // returns the count
	rewritten bool                                    // truncated since the snapshot
}

func (s source) rows() map[string][]cdc.Datum {
	rows := map[string][]cdc.Datum{}
	for i := 1; i <= s.n; i++ {
		v := cdc.Datum{Kind: cdc.DatumText, Text: []byte("value " + strconv.Itoa(i))}
		if i%3 == 0 {
			v = cdc.Datum{Kind: cdc.DatumNull}
		}
		rows[strconv.Itoa(i)] = []cdc.Datum{{Kind: cdc.DatumText, Text: []byte(strconv.Itoa(i))}, v}
	}
	return rows
}

func (s source) CopyTable(ctx context.Context, _ string, _ *cdc.Table, fn func([]cdc.Datum) error) (int64, error) {
	for i := 1; i <= s.n; i++ {
		if err := fn(s.rows()[strconv.Itoa(i)]); err != nil {
			return 0, err
		}
	}
	return int64(s.n), nil
}

func (s source) SampleSnapshot(_ context.Context, snap string, _ *cdc.Table, keys [][]cdc.Datum) (int64, [][]cdc.Datum, bool, error) {
	if snap != "snap-1" {
		return 0, nil, false, errors.New("wrong snapshot")
	}
	if s.rewritten {
		return 0, nil, true, nil
	}
	rows, count := s.rows(), int64(s.n)
	if s.edit != nil {
		count = s.edit(rows)
	}
	var found [][]cdc.Datum
	for _, k := range keys {
		found = append(found, rows[string(k[0].Text)])
	}
	return count, found, false, nil
}

func TestValidate(t *testing.T) {
	tab := &cdc.Table{
		ID: cdc.TableID{Schema: "public", Name: "t"}, OID: 1,
		Columns: []cdc.Column{
			{Name: "id", TypeOID: 20, TypeMod: -1, PGType: "bigint", NotNull: true, FieldID: 1},
			{Name: "v", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 2},
		},
		PrimaryKey: []string{"id"}, ReplicaIdentity: cdc.ReplicaIdentityDefault,
	}
	load := func(t *testing.T, src source) (*memory.Store, *manifest.Base) {
		store := memory.New()
		bases, err := snapshot.Run(context.Background(), src, store, []*cdc.Table{tab}, snapshot.Options{
			Snapshot: "snap-1", LSN: 0x1000, Time: time.Now(), Workers: 1, Generation: "g0002",
			SpoolDir: t.TempDir(), PartRows: 40,
		}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return store, bases["public.t"]
	}

	t.Run("agrees", func(t *testing.T) {
		src := source{n: 100}
		store, base := load(t, src)
		check, err := Validate(context.Background(), src, store, tab, base, "snap-1", 16, t.TempDir())
		if err != nil || check.Rows != 100 || check.Files != 3 || check.Sampled != 16 {
			t.Fatalf("check %+v, %v; want 100 rows in 3 files, 16 sampled", check, err)
		}
	})
	t.Run("truncated since the snapshot", func(t *testing.T) {
		store, base := load(t, source{n: 100})
		check, err := Validate(context.Background(), source{n: 100, rewritten: true}, store, tab, base, "snap-1", 16, t.TempDir())
		if err != nil || !check.Rewritten || check.Rows != 100 || check.Sampled != 0 {
			t.Fatalf("check %+v, %v; want the files counted, the source not compared", check, err)
		}
		base.Files[0].Rows++
		base.RowCount++
		if _, err := Validate(context.Background(), source{n: 100, rewritten: true}, store, tab, base, "snap-1", 16, t.TempDir()); !errors.Is(err, cdc.ErrDifferences) {
			t.Fatalf("a file that lies about its rows passed when the source could not be compared: %v", err)
		}
	})
	for _, c := range []struct {
		name string
		edit func(rows map[string][]cdc.Datum) int64
		base func(b *manifest.Base)
		want string
	}{
		{"a row more in the source", func(map[string][]cdc.Datum) int64 { return 101 }, nil,
			"the source holds 101 rows in the snapshot, the new files 100"},
		{"a value differs", func(rows map[string][]cdc.Datum) int64 {
			rows["1"][1] = cdc.Datum{Kind: cdc.DatumText, Text: []byte("changed")}
			return 100
		}, nil, `key (id="1"), column "v": the new files hold "value 1", the source "changed"`},
		{"a NULL differs", func(rows map[string][]cdc.Datum) int64 {
			rows["1"][1] = cdc.Datum{Kind: cdc.DatumNull}
			return 100
		}, nil, `the new files hold "value 1", the source NULL`},
		{"a key is missing", func(rows map[string][]cdc.Datum) int64 {
			delete(rows, "1")
			return 100
		}, nil, `key (id="1") of the new files is not in the source's snapshot`},
		{"a file holds fewer rows than listed", nil, func(b *manifest.Base) {
			b.Files[0].Rows++
			b.RowCount++
		}, "holds 40 rows, the manifest entry says 41"},
		{"the files do not add up", nil, func(b *manifest.Base) { b.RowCount++ },
			"its files list 100 rows in all, its base 101"},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, base := load(t, source{n: 100})
			if c.base != nil {
				c.base(base)
			}
			_, err := Validate(context.Background(), source{n: 100, edit: c.edit}, store, tab, base, "snap-1", 16, t.TempDir())
			if !errors.Is(err, cdc.ErrDifferences) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v; want cdc.ErrDifferences saying %q", err, c.want)
			}
		})
	}
}

// nanKeys is a table keyed by numeric(10,2) whose first row's key is NaN,
// which the DECIMAL column holds as NULL (docs/types.md).
type nanKeys struct{}

func (nanKeys) CopyTable(_ context.Context, _ string, _ *cdc.Table, fn func([]cdc.Datum) error) (int64, error) {
	for _, k := range []string{"NaN", "1.50", "2.00"} {
		if err := fn([]cdc.Datum{{Kind: cdc.DatumText, Text: []byte(k)}}); err != nil {
			return 0, err
		}
	}
	return 3, nil
}

func (nanKeys) SampleSnapshot(_ context.Context, _ string, _ *cdc.Table, keys [][]cdc.Datum) (int64, [][]cdc.Datum, bool, error) {
	var found [][]cdc.Datum
	for _, k := range keys {
		if string(k[0].Text) == "NaN" || len(k[0].Text) == 0 || k[0].Text[0] == 0 {
			return 0, nil, false, errors.New("a key the files hold as NULL was looked up")
		}
		found = append(found, []cdc.Datum{k[0]})
	}
	return 3, found, false, nil
}

func TestValidateSkipsKeysARuleMadeNull(t *testing.T) {
	tab := &cdc.Table{
		ID: cdc.TableID{Schema: "public", Name: "n"}, OID: 1,
		Columns:    []cdc.Column{{Name: "k", TypeOID: 1700, TypeMod: (10<<16 | 2) + 4, PGType: "numeric(10,2)", NotNull: true, FieldID: 1}},
		PrimaryKey: []string{"k"}, ReplicaIdentity: cdc.ReplicaIdentityDefault,
	}
	store := memory.New()
	bases, err := snapshot.Run(context.Background(), nanKeys{}, store, []*cdc.Table{tab}, snapshot.Options{
		Snapshot: "snap-1", LSN: 0x1000, Time: time.Now(), Workers: 1, Generation: "g0002", SpoolDir: t.TempDir(),
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	check, err := Validate(context.Background(), nanKeys{}, store, tab, bases["public.n"], "snap-1", 16, t.TempDir())
	if err != nil || check.Rows != 3 || check.Sampled != 2 {
		t.Fatalf("check %+v, %v; want 3 rows, the 2 keys that are not NULL sampled", check, err)
	}
}
