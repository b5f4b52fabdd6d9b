package verify

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/extsort"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// sorted is a table's rows in an order, read from an external sort.
type sorted struct {
	sorter *extsort.Sorter
	it     *extsort.Iterator
	rows   int64
	// adjusted counts, per column, source values a documented type rule
	// changed on their way into Parquet (docs/types.md).
	adjusted map[string]int64
}

func (s *sorted) Next() (parquet.Row, error) { return s.it.Next() }

func (s *sorted) Close() error {
	if s.it != nil {
		s.it.Close()
	}
	if s.sorter != nil {
		return s.sorter.Close()
	}
	return nil
}

// readSource copies table t under the snapshot and returns its rows sorted
// by cmp. Every value goes through the same conversion as the snapshot and
// the stream (parquetfile.Writer, type rules included), into a local
// Parquet file under dir that is read back into the sort, so source and
// sink rows have one representation. Source rows carry __op I and zero
// __lsn and __xid; __seq is the row number.
func readSource(ctx context.Context, snap Snapshot, t *cdc.Table, schema *parquetfile.Schema, cmp extsort.Compare, dir string, budget int64) (*sorted, error) {
	f, err := os.CreateTemp(dir, "source-*.parquet")
	if err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	w := parquetfile.NewWriter(bw, schema)
	var seq int64
	n, err := snap.CopyTable(ctx, t, func(values []cdc.Datum) error {
		seq++
		return w.Write(cdc.RowMeta{Op: cdc.OpInsert, Seq: seq}, values)
	})
	if err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	pf, err := parquet.OpenFile(f, size)
	if err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	out := &sorted{sorter: extsort.New(schema.Parquet(), cmp, dir, budget), rows: n, adjusted: w.Adjusted()}
	pr := parquet.NewReader(pf)
	defer pr.Close()
	batch := make([]parquet.Row, 256)
	for {
		if err := ctx.Err(); err != nil {
			out.Close()
			return nil, err
		}
		k, err := pr.ReadRows(batch)
		for _, row := range batch[:k] {
			if err := out.sorter.Add(row); err != nil {
				out.Close()
				return nil, fmt.Errorf("read source: %w", err)
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && k == 0) {
			break
		}
		if err != nil {
			out.Close()
			return nil, fmt.Errorf("read source: %w", err)
		}
	}
	if out.it, err = out.sorter.Sorted(); err != nil {
		out.Close()
		return nil, fmt.Errorf("read source: %w", err)
	}
	return out, nil
}

// sortRows re-sorts an iterator's rows by cmp (the sink's rows of a table
// without a primary key, which merge returns in (__lsn, __seq) order).
func sortRows(ctx context.Context, it rowIter, schema *parquetfile.Schema, cmp extsort.Compare, dir string, budget int64) (*sorted, error) {
	out := &sorted{sorter: extsort.New(schema.Parquet(), cmp, dir, budget)}
	for {
		if err := ctx.Err(); err != nil {
			out.Close()
			return nil, err
		}
		row, err := it.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil {
			err = out.sorter.Add(row)
		}
		if err != nil {
			out.Close()
			return nil, err
		}
		out.rows++
	}
	var err error
	if out.it, err = out.sorter.Sorted(); err != nil {
		out.Close()
		return nil, err
	}
	return out, nil
}
