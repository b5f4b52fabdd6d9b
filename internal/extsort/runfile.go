package extsort

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/klauspost/compress/s2"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// Run files hold sorted rows in a row-oriented encoding, in blocks
// compressed with S2. They were Parquet files once; Parquet cost this
// package its memory bound, since parquet-go buffers a whole row group
// while writing (a run is one row group, as large as the budget) and keeps
// a page of every column per open file while reading (about 6 MiB per run
// for a 14-leaf table, so a 10M-row merge of 72 runs needed 450 MiB). A run
// file is written as a stream and read one block at a time.
//
// A file is a sequence of blocks: a little-endian uint32 length, then that
// many bytes of one S2 block. A block decodes to whole rows back to back:
//
//	row:   uvarint number of values, then each value
//	value: one byte: 0 for NULL, else 1 + its parquet.Kind, | 0x80 for a
//	       true BOOLEAN; uvarint repetition level, definition level and
//	       column index; then the data: INT32 and INT64 zigzag varints,
//	       FLOAT and DOUBLE their IEEE bits little-endian (4 and 8 bytes),
//	       INT96 12 bytes, BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY a uvarint
//	       length and the bytes.

// blockSize is the encoded size at which a block is compressed and
// written. A block holds whole rows, so a row larger than this makes a
// larger block. A reader holds one block compressed and decoded.
const blockSize = 64 << 10

// runReadBytes is what one open run costs while runs are merged: a decoded
// block, its compressed form, and slack for the decoded row.
const runReadBytes = 3 * blockSize

const trueFlag = 0x80

// appendRow appends row's encoding to dst.
func appendRow(dst []byte, row parquet.Row) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(row)))
	for _, v := range row {
		if v.IsNull() {
			dst = append(dst, 0)
			dst = appendLevels(dst, v)
			continue
		}
		k := v.Kind()
		code := byte(k) + 1
		if k == parquet.Boolean && v.Boolean() {
			code |= trueFlag
		}
		dst = append(dst, code)
		dst = appendLevels(dst, v)
		switch k {
		case parquet.Boolean:
		case parquet.Int32:
			dst = binary.AppendVarint(dst, int64(v.Int32()))
		case parquet.Int64:
			dst = binary.AppendVarint(dst, v.Int64())
		case parquet.Float:
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v.Float()))
		case parquet.Double:
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.Double()))
		case parquet.Int96:
			i := v.Int96()
			for _, w := range i {
				dst = binary.LittleEndian.AppendUint32(dst, w)
			}
		default: // ByteArray, FixedLenByteArray
			b := v.ByteArray()
			dst = binary.AppendUvarint(dst, uint64(len(b)))
			dst = append(dst, b...)
		}
	}
	return dst
}

func appendLevels(dst []byte, v parquet.Value) []byte {
	dst = binary.AppendUvarint(dst, uint64(v.RepetitionLevel()))
	dst = binary.AppendUvarint(dst, uint64(v.DefinitionLevel()))
	return binary.AppendUvarint(dst, uint64(v.Column()))
}

var errCorrupt = errors.New("extsort: corrupt run file")

// decodeRow decodes one row from src, appending its values to dst. Byte
// arrays point into src. It returns the row and the bytes consumed.
func decodeRow(dst parquet.Row, src []byte) (parquet.Row, int, error) {
	d := decoder{b: src}
	n := d.uvarint()
	if d.err != nil || n > uint64(len(src)) {
		return dst, 0, errCorrupt
	}
	for range n {
		if d.pos >= len(d.b) {
			return dst, 0, errCorrupt
		}
		code := d.b[d.pos]
		d.pos++
		rep, def, col := d.uvarint(), d.uvarint(), d.uvarint()
		if d.err != nil || rep > parquet.MaxRepetitionLevel || def > parquet.MaxDefinitionLevel || col > parquet.MaxColumnIndex {
			return dst, 0, errCorrupt
		}
		var v parquet.Value
		if code == 0 {
			v = parquet.NullValue()
		} else {
			switch k := parquet.Kind(code&^trueFlag) - 1; k {
			case parquet.Boolean:
				v = parquet.BooleanValue(code&trueFlag != 0)
			case parquet.Int32:
				v = parquet.Int32Value(int32(d.varint()))
			case parquet.Int64:
				v = parquet.Int64Value(d.varint())
			case parquet.Float:
				v = parquet.FloatValue(math.Float32frombits(binary.LittleEndian.Uint32(d.next(4))))
			case parquet.Double:
				v = parquet.DoubleValue(math.Float64frombits(binary.LittleEndian.Uint64(d.next(8))))
			case parquet.Int96:
				b := d.next(12)
				v = parquet.Int96Value(deprecated.Int96{binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])})
			case parquet.ByteArray:
				v = parquet.ByteArrayValue(d.next(int(d.uvarint())))
			case parquet.FixedLenByteArray:
				v = parquet.FixedLenByteArrayValue(d.next(int(d.uvarint())))
			default:
				return dst, 0, errCorrupt
			}
		}
		if d.err != nil {
			return dst, 0, errCorrupt
		}
		dst = append(dst, v.Level(int(rep), int(def), int(col)))
	}
	return dst, d.pos, nil
}

// decoder reads varints and byte strings; the first overrun sets err and
// makes every later read return zeros.
type decoder struct {
	b   []byte
	pos int
	err error
}

var zeros [12]byte

func (d *decoder) uvarint() uint64 {
	x, n := binary.Uvarint(d.b[min(d.pos, len(d.b)):])
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.pos += n
	return x
}

func (d *decoder) varint() int64 {
	x, n := binary.Varint(d.b[min(d.pos, len(d.b)):])
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.pos += n
	return x
}

// next returns the next n bytes (capacity limited to them).
func (d *decoder) next(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b)-d.pos {
		d.err = errCorrupt
		return zeros[:min(max(n, 0), len(zeros))]
	}
	b := d.b[d.pos : d.pos+n : d.pos+n]
	d.pos += n
	return b
}

// runWriter writes one run file.
type runWriter struct {
	f    *os.File
	w    *bufio.Writer
	raw  []byte
	comp []byte
}

func createRun(dir string) (*runWriter, error) {
	f, err := os.CreateTemp(dir, "run-*")
	if err != nil {
		return nil, fmt.Errorf("extsort: create run: %w", err)
	}
	return &runWriter{f: f, w: bufio.NewWriterSize(f, 2*blockSize), raw: make([]byte, 0, blockSize+blockSize/4)}, nil
}

func (w *runWriter) name() string { return w.f.Name() }

func (w *runWriter) write(row parquet.Row) error {
	w.raw = appendRow(w.raw, row)
	if len(w.raw) >= blockSize {
		return w.flushBlock()
	}
	return nil
}

func (w *runWriter) flushBlock() error {
	if len(w.raw) == 0 {
		return nil
	}
	if need := s2.MaxEncodedLen(len(w.raw)); cap(w.comp) < need {
		w.comp = make([]byte, need)
	}
	comp := s2.Encode(w.comp[:cap(w.comp)], w.raw)
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(comp)))
	if _, err := w.w.Write(hdr[:]); err != nil {
		return fmt.Errorf("extsort: write run: %w", err)
	}
	if _, err := w.w.Write(comp); err != nil {
		return fmt.Errorf("extsort: write run: %w", err)
	}
	w.raw = w.raw[:0]
	if cap(w.raw) > 4*blockSize {
		w.raw = make([]byte, 0, blockSize+blockSize/4) // a huge row passed
	}
	return nil
}

// close finishes the file; abort removes it instead.
func (w *runWriter) close() error {
	if err := w.flushBlock(); err != nil {
		w.abort()
		return err
	}
	if err := w.w.Flush(); err != nil {
		w.abort()
		return fmt.Errorf("extsort: write run: %w", err)
	}
	if err := w.f.Close(); err != nil {
		os.Remove(w.f.Name())
		return fmt.Errorf("extsort: close run: %w", err)
	}
	return nil
}

func (w *runWriter) abort() {
	w.f.Close()
	os.Remove(w.f.Name())
}

// runReader reads one run file a block at a time.
type runReader struct {
	f    *os.File
	comp []byte
	raw  []byte
	pos  int
	row  parquet.Row
	done bool
}

func openRun(path string) (*runReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("extsort: open run: %w", err)
	}
	return &runReader{f: f}, nil
}

// advance moves to the next row; false at the end of the run. The previous
// row (and, at a block boundary, every row before it) is invalid after.
func (r *runReader) advance() (bool, error) {
	if r.done {
		return false, nil
	}
	if r.pos >= len(r.raw) {
		ok, err := r.readBlock()
		if err != nil || !ok {
			r.done = true
			return false, err
		}
	}
	row, n, err := decodeRow(r.row[:0], r.raw[r.pos:])
	if err != nil {
		return false, fmt.Errorf("%w %s", err, r.f.Name())
	}
	r.row, r.pos = row, r.pos+n
	return true, nil
}

func (r *runReader) readBlock() (bool, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r.f, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, fmt.Errorf("extsort: read run: %w", err)
	}
	n := int(binary.LittleEndian.Uint32(hdr[:]))
	if cap(r.comp) < n {
		r.comp = make([]byte, n)
	}
	r.comp = r.comp[:n]
	if _, err := io.ReadFull(r.f, r.comp); err != nil {
		return false, fmt.Errorf("extsort: read run: %w", err)
	}
	size, err := s2.DecodedLen(r.comp)
	if err != nil {
		return false, fmt.Errorf("%w %s: %w", errCorrupt, r.f.Name(), err)
	}
	if cap(r.raw) < size {
		r.raw = make([]byte, size)
	}
	if r.raw, err = s2.Decode(r.raw[:size], r.comp); err != nil {
		return false, fmt.Errorf("%w %s: %w", errCorrupt, r.f.Name(), err)
	}
	r.pos = 0
	return len(r.raw) > 0, nil
}

func (r *runReader) current() parquet.Row { return r.row }

func (r *runReader) close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	r.comp, r.raw, r.row = nil, nil, nil
}
