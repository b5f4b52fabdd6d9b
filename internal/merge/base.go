package merge

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/extsort"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// A base that compaction wrote holds one row per key, sorted by key, then
// (__lsn, __seq) — the merge order — and split into files in that order. In
// steady state it is most of a compaction's input, so sorting it again cost
// most of the work (cloning every row into the sort buffer, spilling it,
// reading it back). Instead its files are read one after the other as an
// already sorted input of the merge (extsort.Source).
//
// The order is checked row by row as the base is read: a base out of order
// would fold versions wrongly, so the merge fails rather than guess.

// baseInOrder reports whether b's files are in merge order: it says it is
// sorted by the key, then (__lsn, __seq).
func baseInOrder(b *manifest.Base, key []string) bool {
	if b == nil || len(b.Files) == 0 {
		return false
	}
	want := append(slices.Clone(key), parquetfile.ColLSN, parquetfile.ColSeq)
	return slices.Equal(b.SortedBy, want)
}

// baseStream reads a sorted base's files in order.
type baseStream struct {
	r      *Reader
	keys   []string // the files' keys in the sink, for messages
	locals []string // the downloaded files
	next   int      // the file to open next

	key   string
	f     *os.File
	pr    *parquet.Reader
	eof   bool // the open file has no more rows after the batch
	batch []parquet.Row
	n, j  int
	prev  parquet.Row // the row before batch[0], for the order check
	prevA extsort.Arena
}

// openBase downloads the base's files and takes the merge statistics the
// base contributes (newest __lsn and __op_ts, which compaction needs before
// the first row is merged) from their footers. It returns nil, having
// removed what it downloaded, when a footer lacks them: the base is then
// sorted like any input.
func openBase(ctx context.Context, store blob.Store, r *Reader, keys []string, dir string) (*baseStream, error) {
	b := &baseStream{r: r, keys: keys, batch: make([]parquet.Row, 256)}
	var maxLSN, maxOpTS int64
	for _, key := range keys {
		local, err := blob.Download(ctx, store, key, dir, "in-*.parquet")
		if err != nil {
			b.close()
			return nil, fmt.Errorf("merge %s: %w", r.table.ID, err)
		}
		b.locals = append(b.locals, local)
		lsn, opTS, ok, err := footerMaxima(local)
		if err != nil {
			b.close()
			return nil, fmt.Errorf("merge %s: file %s: %w", r.table.ID, key, err)
		}
		if !ok {
			b.close()
			return nil, nil
		}
		maxLSN, maxOpTS = max(maxLSN, lsn), max(maxOpTS, opTS)
	}
	r.stats.MaxLSN = max(r.stats.MaxLSN, maxLSN)
	r.stats.MaxOpTS = max(r.stats.MaxOpTS, maxOpTS)
	return b, nil
}

// footerMaxima returns the largest __lsn and __op_ts of a file from its
// row groups' column statistics; ok is false when one is missing.
func footerMaxima(path string) (maxLSN, maxOpTS int64, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, false, err
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return 0, 0, false, err
	}
	for _, rg := range pf.Metadata().RowGroups {
		if rg.NumRows == 0 {
			continue
		}
		var haveLSN, haveOpTS bool
		for _, c := range rg.Columns {
			md := c.MetaData
			if len(md.PathInSchema) != 1 {
				continue
			}
			v, found := statMax(md.Statistics.MaxValue, md.Statistics.Max)
			switch md.PathInSchema[0] {
			case parquetfile.ColLSN:
				haveLSN = found
				maxLSN = max(maxLSN, v)
			case parquetfile.ColOpTS:
				haveOpTS = found
				maxOpTS = max(maxOpTS, v)
			}
		}
		if !haveLSN || !haveOpTS {
			return 0, 0, false, nil
		}
	}
	return maxLSN, maxOpTS, true, nil
}

// statMax decodes an INT64 column's maximum (PLAIN: 8 bytes little-endian),
// from the current field or the deprecated one.
func statMax(current, deprecated []byte) (int64, bool) {
	for _, b := range [][]byte{current, deprecated} {
		if len(b) == 8 {
			return int64(binary.LittleEndian.Uint64(b)), true
		}
	}
	return 0, false
}

// Next returns the base's next version (extsort.Source).
func (b *baseStream) Next() (parquet.Row, error) {
	for {
		if b.j == b.n {
			if err := b.fill(); err != nil {
				return nil, err
			}
		}
		row := b.batch[b.j]
		prev := b.prev
		if b.j > 0 {
			prev = b.batch[b.j-1]
		}
		b.j++
		if prev != nil && b.r.order.Compare(prev, row) > 0 {
			return nil, fmt.Errorf("merge %s: base file %s is not sorted by %v as the manifest says: the version at LSN %s comes after a greater one",
				b.r.table.ID, b.key, b.r.table.PrimaryKey, cdc.LSN(row[parquetfile.LeafLSN].Int64()))
		}
		if opOf(row) == cdc.OpTruncate {
			// A base records its truncate in the manifest, never as a row;
			// one here could not apply to versions merged before it.
			return nil, fmt.Errorf("merge %s: base file %s holds a truncate marker", b.r.table.ID, b.key)
		}
		keep, err := b.r.admit(row, b.key, Options{})
		if err != nil {
			return nil, err
		}
		if keep {
			return row, nil
		}
	}
}

// fill reads the next batch, opening the next file as one ends; io.EOF
// after the last file.
func (b *baseStream) fill() error {
	if b.n > 0 {
		// The batch is about to be overwritten; its last row is the next
		// one's predecessor.
		b.prevA.Reset()
		b.prev = b.prevA.Clone(b.batch[b.n-1])
	}
	b.n, b.j = 0, 0
	for {
		if b.pr != nil && b.eof {
			if err := b.closeFile(); err != nil {
				return err
			}
		}
		if b.pr == nil {
			if b.next == len(b.locals) {
				return io.EOF
			}
			f, pr, err := b.r.openLocal(b.locals[b.next], b.keys[b.next])
			if err != nil {
				return err
			}
			b.f, b.pr, b.key, b.eof = f, pr, b.keys[b.next], false
			b.next++
		}
		n, err := b.pr.ReadRows(b.batch)
		switch {
		case errors.Is(err, io.EOF) || (err == nil && n == 0):
			b.eof = true
		case err != nil:
			return fmt.Errorf("merge %s: read %s: %w", b.r.table.ID, b.key, err)
		}
		if n > 0 {
			if fills := b.r.fills[b.key]; fills != nil {
				for i := range b.batch[:n] {
					b.batch[i] = fillRow(b.batch[i], fills)
				}
			}
			b.n = n
			return nil
		}
	}
}

// closeFile closes the open file and removes its download.
func (b *baseStream) closeFile() error {
	b.pr.Close()
	err := errors.Join(b.f.Close(), os.Remove(b.locals[b.next-1]))
	b.f, b.pr = nil, nil
	if err != nil {
		return fmt.Errorf("merge %s: %w", b.r.table.ID, err)
	}
	return nil
}

// close releases the open file and removes every download.
func (b *baseStream) close() error {
	var errs []error
	if b.pr != nil {
		errs = append(errs, b.closeFile())
	}
	for _, l := range b.locals[b.next:] {
		if err := os.Remove(l); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	b.next = len(b.locals)
	return errors.Join(errs...)
}
