package parquetfile

import (
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// OpPositions returns the positions (from 0, in file order) of the rows of
// a data file whose __op is op, reading only that column: the rows a
// position delete masks (an Iceberg state table hides a compacted base's
// tombstones, __op D, this way).
func OpPositions(r io.ReaderAt, size int64, op string) ([]int64, error) {
	pf, err := parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, err
	}
	if len(pf.Schema().Fields()) == 0 || pf.Schema().Fields()[0].Name() != ColOp {
		return nil, fmt.Errorf("not a pg-cdc data file: its first column is not %s", ColOp)
	}
	var out []int64
	var base int64
	for _, rg := range pf.RowGroups() {
		pages := rg.ColumnChunks()[leafOp].Pages()
		pos := base
		for {
			p, err := pages.ReadPage()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				pages.Close()
				return nil, fmt.Errorf("read %s: %w", ColOp, err)
			}
			vals := make([]parquet.Value, p.NumValues())
			n, err := p.Values().ReadValues(vals)
			if err != nil && !errors.Is(err, io.EOF) {
				parquet.Release(p)
				pages.Close()
				return nil, fmt.Errorf("read %s: %w", ColOp, err)
			}
			for _, v := range vals[:n] {
				if string(v.ByteArray()) == op {
					out = append(out, pos)
				}
				pos++
			}
			parquet.Release(p)
		}
		pages.Close()
		base += rg.NumRows()
	}
	return out, nil
}
