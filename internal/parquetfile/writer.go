package parquetfile

import (
	"errors"
	"fmt"
	"github.com/pg-cdc/pg-cdc/internal/icebergschema"
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// DefaultRowGroupBytes is the buffered size at which a row group is flushed.
// parquet-go keeps a whole row group's compressed pages in memory until it is
// flushed, so this bounds the writer's memory whatever the number of rows;
// 16 MiB compressed is still a large enough row group for readers to scan
// efficiently (DuckDB itself writes ~120k-row groups).
const DefaultRowGroupBytes = 16 << 20

// The buffered size is measured every sizeCheckRows rows, or sooner once
// sizeCheckBytes of values arrived: asking parquet-go walks every column, so
// it is not done per row, but a run of large values must not overshoot the
// budget by much.
const (
	sizeCheckRows  = 256
	sizeCheckBytes = 1 << 20
)

// maxKeptBuf is the largest conversion buffer kept between rows.
const maxKeptBuf = 1 << 20

var errClosed = errors.New("parquet writer is closed")

// Writer streams change rows of one table into one Parquet file (zstd).
// It is not safe for concurrent use.
type Writer struct {
	schema *Schema
	pw     *parquet.Writer
	budget int64

	row      parquet.Row
	batch    [1]parquet.Row
	buf      []byte   // bytes converted values reference until the row is written
	names    [][]byte // column names, for __unchanged
	rows     int64
	sinceChk int        // rows since the size was last measured
	pending  int        // value bytes since the size was last measured
	flushed  int64      // pw.Size() right after the last flush
	adj      []adjusted // values of the current row a rule changed
	adjusted []int64    // per table column: values a rule changed
	err      error      // sticky: the file is unusable after a write failure
	closed   bool
	pipe     *pipeline // nil unless pipelining (NewPipelinedWriter): pw then belongs to its encoders
	// probe: a pipelined writer still encoding on the caller, measuring
	// its rows (probeWide).
	probe      bool
	probeRows  int
	probeBytes int
}

// NewWriter returns a writer of rows of s's table to w. Close writes the
// footer; w itself is not closed.
func NewWriter(w io.Writer, s *Schema) *Writer { return newWriter(w, s, 1) }

// newWriter is NewWriter whose zstd codec serves up to encoders goroutines
// at once (a pipelined writer's row groups compress in parallel).
func newWriter(w io.Writer, s *Schema, encoders int) *Writer {
	names := make([][]byte, len(s.cols))
	for i, c := range s.cols {
		names[i] = []byte(c.name)
	}
	var codec compress.Codec = &parquet.Zstd
	if z, err := newZstdCodec(encoders); err == nil {
		codec = z
	} // else: only invalid options fail, and they are constants; parquet.Zstd works too.
	options := []parquet.WriterOption{
		s.schema,
		parquet.Compression(codec),
		parquet.CreatedBy("pg-cdc", "", ""),
		// Page header statistics repeat each page's min and max value in
		// full, twice (deprecated and current fields): a page holding one
		// 1 MB text carried 4 MB of statistics. Readers prune with the
		// column chunk statistics and the page index (whose values
		// parquet-go truncates), so the page headers go without.
		parquet.DataPageStatistics(false),
	}
	if s.iceberg != "" {
		options = append(options, parquet.KeyValueMetadata(icebergschema.FooterKey, s.iceberg))
	}
	for _, c := range s.cols {
		if c.key {
			continue
		}
		switch c.parquetType {
		case "STRING", "BINARY", "JSON":
			// parquet-go keeps every page's min and max of a byte-array
			// column whole until Close (for the page index, which it only
			// truncates when writing it), and the chunk's in the footer: a
			// column of 1 MB values kept about twice its data in memory, so
			// the row-group budget bounded nothing. Key columns keep their
			// bounds for pruning by key, and their values are small (a btree
			// entry is under ~2.7 kB); other text, bytea and json columns go
			// without, chunk statistics included.
			options = append(options, parquet.SkipPageBounds(c.name))
		case "LIST<STRING>", "LIST<BINARY>", "LIST<JSON>", "LIST<ENUM>":
			options = append(options, parquet.SkipPageBounds(c.name, "list", "element"))
		}
	}
	return &Writer{
		schema: s,
		pw:     parquet.NewWriter(w, options...),
		budget: DefaultRowGroupBytes,
		row:    make(parquet.Row, 0, firstDataLeaf+2*len(s.cols)),
		names:  names,
	}
}

// Write appends one row. values are in table column order; a truncate marker
// (cdc.OpTruncate) may pass none. Every value is converted and copied before
// Write returns, so the caller may reuse the Text buffers.
//
// A value that a documented rule changes (Rule) is written with the rule
// applied and counted (Adjusted). Only malformed input, which PostgreSQL's
// own output never is, gives a *ValueError (matching cdc.ErrData); the row
// is then not written and the writer stays usable.
// Any other error leaves the file unusable.
func (w *Writer) Write(meta cdc.RowMeta, values []cdc.Datum) error {
	if w.closed {
		return errClosed
	}
	if w.err != nil {
		return w.err
	}
	switch meta.Op {
	case cdc.OpInsert, cdc.OpUpdate, cdc.OpDelete, cdc.OpTruncate:
	default:
		return fmt.Errorf("write row of %s: unknown op %q", w.schema.table, byte(meta.Op))
	}
	if len(values) != len(w.schema.cols) && (meta.Op != cdc.OpTruncate || len(values) != 0) {
		return fmt.Errorf("write row of %s: %d values for %d columns", w.schema.table, len(values), len(w.schema.cols))
	}
	if w.pipe != nil {
		// Converted on an encoder (pipeline); a refused value fails a
		// later Write or Close.
		if err := w.put(meta, values); err != nil {
			w.err = err
			return w.err
		}
		w.rows++
		return nil
	}

	row, buf, err := w.convert(w.row[:0], w.buf[:0], &w.adj, meta, values)
	if err != nil {
		w.row, w.buf, w.adj = row[:0], buf[:0], w.adj[:0]
		return err
	}
	// parquet-go copies the values into its column buffers here, which is
	// what lets the caller reuse its Text buffers and us reuse buf.
	w.batch[0] = row
	_, err = w.pw.WriteRows(w.batch[:])
	w.batch[0] = nil
	w.row, w.buf = row[:0], buf[:0]
	if cap(buf) > maxKeptBuf {
		w.buf = nil // one huge bytea must not stay allocated for the file's life
	}
	if err != nil {
		w.err = wrapWrite(w, err)
		return w.err
	}
	w.rows++
	if len(w.adj) > 0 {
		w.countAdjusted(&w.adjusted, w.adj, values)
		w.adj = w.adj[:0]
	}
	for i := range values {
		w.pending += len(values[i].Text)
	}
	if w.sinceChk++; w.sinceChk >= sizeCheckRows || w.pending >= sizeCheckBytes {
		w.sinceChk, w.pending = 0, 0
		if w.pw.Size()-w.flushed >= w.budget {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	if w.probe {
		return w.probeWide(values)
	}
	return nil
}

// opBytes are the __op values, shared read-only by every row.
var opBytes = [...]byte{byte(cdc.OpInsert), byte(cdc.OpUpdate), byte(cdc.OpDelete), byte(cdc.OpTruncate)}

func opByte(op cdc.Op) []byte {
	for i := range opBytes {
		if opBytes[i] == byte(op) {
			return opBytes[i : i+1 : i+1]
		}
	}
	return nil // Write refuses other ops before converting
}

// convert appends the leaf values of one row (op and values already
// checked) to row, converting into buf, and the rules it applied to *adj.
// The values reference buf, the caller's Text and read-only names; they
// stay valid until row and buf are reused. An error leaves row and buf to
// be reset by the caller.
func (w *Writer) convert(row parquet.Row, buf []byte, adj *[]adjusted, meta cdc.RowMeta, values []cdc.Datum) (parquet.Row, []byte, error) {
	row = append(row,
		parquet.ByteArrayValue(opByte(meta.Op)).Level(0, 0, leafOp),
		parquet.Int64Value(int64(meta.LSN)).Level(0, 0, leafLSN),
		parquet.Int64Value(meta.Seq).Level(0, 0, leafSeq),
		parquet.Int64Value(int64(meta.XID)).Level(0, 0, leafXID),
		parquet.Int64Value(meta.CommitTime.UnixMicro()).Level(0, 0, leafOpTS),
	)
	// __unchanged: one element per unchanged column (rep 0 on the first, 1
	// after), or an empty list, never NULL.
	rep := 0
	for i := range values {
		if values[i].Kind == cdc.DatumUnchanged {
			row = append(row, parquet.ByteArrayValue(w.names[i]).Level(rep, unchangedElementDef, leafUnchanged))
			rep = 1
		}
	}
	if rep == 0 {
		row = append(row, parquet.NullValue().Level(0, unchangedEmptyDef, leafUnchanged))
	}

	for i := range w.schema.cols {
		leaf := firstDataLeaf + i
		if i >= len(values) || values[i].Kind == cdc.DatumNull || values[i].Kind == cdc.DatumUnchanged {
			row = append(row, parquet.NullValue().Level(0, 0, leaf))
			continue
		}
		c := &w.schema.cols[i]
		if values[i].Kind != cdc.DatumText {
			return row, buf, fmt.Errorf("write row of %s: column %q: unknown datum kind %d", w.schema.table, c.name, values[i].Kind)
		}
		var (
			v     parquet.Value
			grown []byte
			err   error
			null  bool
		)
		if c.elem != nil {
			var ra *ruleApplied
			if row, grown, ra, err = appendList(row, buf, values[i].Text, c.elem, leaf); err == nil && ra != nil {
				err = ra
			}
		} else {
			v, grown, err = c.conv(buf, values[i].Text)
		}
		if err != nil {
			ra, ok := err.(*ruleApplied)
			if !ok {
				return row, buf, newValueError(w.schema.table, c, values[i].Text, err)
			}
			// A documented rule wrote the value (docs/types.md): counted,
			// and reported once the row is written.
			*adj = append(*adj, adjusted{col: i, rule: ra.rule})
			null = v.IsNull()
		}
		buf = grown
		switch {
		case c.elem != nil:
		case null:
			row = append(row, parquet.NullValue().Level(0, 0, leaf))
		default:
			row = append(row, v.Level(0, 1, leaf))
		}
	}
	return row, buf, nil
}

func wrapWrite(w *Writer, err error) error {
	return fmt.Errorf("write row of %s: %w", w.schema.table, err)
}

func wrapFlush(w *Writer, err error) error {
	return fmt.Errorf("flush row group of %s: %w", w.schema.table, err)
}

// flush ends the current row group, writing its pages to the output.
func (w *Writer) flush() error {
	if err := w.pw.Flush(); err != nil {
		w.err = wrapFlush(w, err)
		return w.err
	}
	w.flushed = w.pw.Size()
	return nil
}

// Rows returns the number of rows written so far.
func (w *Writer) Rows() int64 { return w.rows }

// Close flushes the last row group and writes the footer. It does not close
// the underlying io.Writer. Closing twice is a no-op.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		if w.pipe != nil {
			_ = w.pipe.drain(false)
		}
		return w.err
	}
	if w.pipe != nil {
		if err := w.pipe.drain(true); err != nil {
			w.err = err
			return w.err
		}
	}
	if err := w.pw.Close(); err != nil {
		w.err = fmt.Errorf("close parquet file of %s: %w", w.schema.table, err)
		return w.err
	}
	return nil
}
