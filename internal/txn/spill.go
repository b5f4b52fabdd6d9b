package txn

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/failpoint"
)

// Spill file format: a sequence of records, nothing else (no header: the
// assembler that wrote the file is the only reader, in the same process).
//
//	record  = uvarint(len(payload)) payload crc32c(payload) as 4 bytes little-endian
//	payload = uvarint(seq) uvarint(sub xid) uvarint(table index) op:byte
//	          uvarint(value count) value*
//	value   = kind:byte [uvarint(len) bytes]   (length and bytes for DatumText only)
//
// The table index points into Assembler.tables, because a *cdc.Table cannot
// be written to disk and replay must hand back the same pointer.

const (
	writeBufferSize = 256 << 10
	readBufferSize  = 64 << 10
	// Scratch buffers that grew beyond this for one huge change are dropped
	// after use rather than kept for the life of the assembler.
	keepScratch = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// spillFile is what the assembler knows a transaction's file must hold.
type spillFile struct {
	path    string
	bytes   int64
	records int64
}

// spill appends every in-memory change of t to its spill file and releases
// them. On failure the file is cut back to its last good size, so the
// transaction stays consistent (its changes are still in memory); if even
// that fails, the transaction is marked broken and its Commit will fail.
func (a *Assembler) spill(t *txn) error {
	var f *os.File
	if t.spill == nil {
		if err := os.MkdirAll(a.dir, 0o700); err != nil {
			return fmt.Errorf("create spill directory: %w", err)
		}
		// O_TRUNC: a file of the same name left by a crashed process (a
		// restart sees the same xids again) must not be appended to.
		path := filepath.Join(a.dir, spillName(t.xid))
		var err error
		if f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			return fmt.Errorf("create spill file: %w", err)
		}
		t.spill = &spillFile{path: path}
		a.spilledTxns++
	} else {
		var err error
		if f, err = os.OpenFile(t.spill.path, os.O_WRONLY|os.O_APPEND, 0); err != nil {
			return fmt.Errorf("open spill file: %w", err)
		}
	}
	if a.w == nil {
		a.w = bufio.NewWriterSize(f, writeBufferSize)
	} else {
		a.w.Reset(f)
	}
	written, err := a.writeBatch(t.mem)
	if err == nil {
		err = a.w.Flush()
	}
	a.w.Reset(nil) // do not keep the closed file reachable
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close spill file: %w", cerr)
	}
	if cap(a.scratch) > keepScratch {
		a.scratch = nil
	}
	if err != nil {
		if terr := os.Truncate(t.spill.path, t.spill.bytes); terr != nil {
			t.broken = fmt.Errorf("spill file %s of transaction %d: a failed write could not be rolled back: %w",
				t.spill.path, t.xid, errors.Join(err, terr))
		}
		return err
	}
	t.spill.bytes += written
	t.spill.records += int64(len(t.mem))
	a.spilledBytes += written
	a.memBytes -= t.memBytes
	clear(t.mem)
	t.mem, t.memBytes = t.mem[:0], 0
	failpoint.Inject("txn/spill")
	return nil
}

// writeBatch encodes entries into a.w and returns the bytes written.
func (a *Assembler) writeBatch(entries []entry) (int64, error) {
	var written int64
	var head [binary.MaxVarintLen64]byte
	var sum [4]byte
	for i := range entries {
		payload, err := a.encode(&entries[i])
		if err != nil {
			return 0, err
		}
		n := binary.PutUvarint(head[:], uint64(len(payload)))
		binary.LittleEndian.PutUint32(sum[:], crc32.Checksum(payload, castagnoli))
		for _, part := range [][]byte{head[:n], payload, sum[:]} {
			if _, err := a.w.Write(part); err != nil {
				return 0, fmt.Errorf("write spill file: %w", err)
			}
		}
		written += int64(n + len(payload) + len(sum))
	}
	return written, nil
}

// encode builds one record's payload in a.scratch.
func (a *Assembler) encode(e *entry) ([]byte, error) {
	b := a.scratch[:0]
	b = binary.AppendUvarint(b, uint64(e.seq))
	b = binary.AppendUvarint(b, uint64(e.sub))
	b = binary.AppendUvarint(b, a.intern(e.c.Table))
	b = append(b, byte(e.c.Op))
	var flags byte
	if e.c.KeyChanged {
		flags |= flagKeyChanged
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(e.c.Values)))
	for i, v := range e.c.Values {
		switch v.Kind {
		case cdc.DatumNull, cdc.DatumUnchanged:
			b = append(b, byte(v.Kind))
		case cdc.DatumText:
			b = append(b, byte(v.Kind))
			b = binary.AppendUvarint(b, uint64(len(v.Text)))
			b = append(b, v.Text...)
		default:
			return nil, fmt.Errorf("encode change %d: value %d has unknown kind %d", e.seq, i, v.Kind)
		}
	}
	a.scratch = b
	return b, nil
}

func (a *Assembler) intern(t *cdc.Table) uint64 {
	if i, ok := a.tableIdx[t]; ok {
		return i
	}
	if a.tableIdx == nil {
		a.tableIdx = map[*cdc.Table]uint64{}
	}
	i := uint64(len(a.tables))
	a.tables = append(a.tables, t)
	a.tableIdx[t] = i
	return i
}

// replaySpill streams t's spill file through fn, skipping changes of aborted
// subtransactions.
func (a *Assembler) replaySpill(t *txn, fn func(seq int64, c *cdc.Change) error) error {
	sp := t.spill
	fail := func(err error) error {
		return fmt.Errorf("spill file %s of transaction %d: %w", sp.path, t.xid, err)
	}
	f, err := os.Open(sp.path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	// A file of the wrong size is caught before anything is replayed.
	if st, err := f.Stat(); err != nil {
		return fail(err)
	} else if st.Size() != sp.bytes {
		return fail(fmt.Errorf("size is %d bytes, %d were written", st.Size(), sp.bytes))
	}
	rd := &recordReader{r: bufio.NewReaderSize(f, readBufferSize), left: sp.bytes, tables: a.tables}
	for i := int64(0); i < sp.records; i++ {
		seq, sub, c, err := rd.next()
		if err != nil {
			return fail(fmt.Errorf("record %d of %d: %w", i, sp.records, err))
		}
		if _, dead := t.aborted[sub]; dead {
			continue
		}
		if err := fn(seq, c); err != nil {
			return err
		}
	}
	if rd.left != 0 {
		return fail(fmt.Errorf("%d bytes after the last of %d records", rd.left, sp.records))
	}
	return nil
}

// recordReader decodes spill records from a stream. It trusts nothing it
// reads: every length is checked against the bytes left in the file and in
// the record before it is used, so a corrupt file yields an error, never a
// panic or a huge allocation.
type recordReader struct {
	r       *bufio.Reader
	left    int64 // bytes of the file not yet consumed
	tables  []*cdc.Table
	payload []byte // reused read buffer
}

var (
	errTruncated = errors.New("truncated record")
	errChecksum  = errors.New("checksum mismatch")
)

func (rd *recordReader) next() (seq int64, sub uint32, c *cdc.Change, err error) {
	cr := countingReader{r: rd.r}
	n, err := binary.ReadUvarint(&cr)
	rd.left -= cr.n
	if err != nil {
		return 0, 0, nil, fmt.Errorf("record length: %w", noEOF(err))
	}
	if rd.left < 4 || n > uint64(rd.left-4) {
		return 0, 0, nil, fmt.Errorf("record length %d exceeds the %d bytes left: %w", n, rd.left, errTruncated)
	}
	if uint64(cap(rd.payload)) < n+4 {
		rd.payload = make([]byte, n+4)
	}
	buf := rd.payload[:n+4]
	if _, err := io.ReadFull(rd.r, buf); err != nil {
		return 0, 0, nil, fmt.Errorf("record body: %w", noEOF(err))
	}
	rd.left -= int64(n + 4)
	payload := buf[:n]
	if binary.LittleEndian.Uint32(buf[n:]) != crc32.Checksum(payload, castagnoli) {
		return 0, 0, nil, errChecksum
	}
	seq, sub, c, err = decodePayload(payload, rd.tables)
	if cap(rd.payload) > keepScratch {
		rd.payload = nil
	}
	return seq, sub, c, err
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// countingReader counts the bytes of a record's length prefix, which
// binary.ReadUvarint consumes without saying how many.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// decodePayload turns a record payload into a change. The change gets its
// own copy of the bytes (one allocation shared by all its text values), so
// the read buffer can be reused.
func decodePayload(p []byte, tables []*cdc.Table) (int64, uint32, *cdc.Change, error) {
	d := payloadDecoder{b: p}
	seq := d.uvarint("sequence")
	sub := d.uvarint("subtransaction")
	table := d.uvarint("table")
	op := d.byte("op")
	flags := d.byte("flags")
	count := d.uvarint("value count")
	if d.err != nil {
		return 0, 0, nil, d.err
	}
	switch {
	case seq > math.MaxInt64:
		return 0, 0, nil, fmt.Errorf("sequence %d out of range", seq)
	case sub > math.MaxUint32:
		return 0, 0, nil, fmt.Errorf("subtransaction %d out of range", sub)
	case table >= uint64(len(tables)):
		return 0, 0, nil, fmt.Errorf("table index %d, only %d tables are known", table, len(tables))
	case flags&^flagKeyChanged != 0:
		return 0, 0, nil, fmt.Errorf("unknown change flags %#x", flags)
	case count > uint64(len(p)-d.off):
		// Every value takes at least one byte.
		return 0, 0, nil, fmt.Errorf("value count %d exceeds the %d bytes left", count, len(p)-d.off)
	}
	owned := append([]byte(nil), p[d.off:]...)
	d = payloadDecoder{b: owned}
	values := make([]cdc.Datum, count)
	for i := range values {
		kind := cdc.DatumKind(d.byte("value kind"))
		switch kind {
		case cdc.DatumNull, cdc.DatumUnchanged:
			values[i] = cdc.Datum{Kind: kind}
		case cdc.DatumText:
			l := d.uvarint("value length")
			if d.err == nil && l > uint64(len(d.b)-d.off) {
				d.err = fmt.Errorf("value %d length %d exceeds the %d bytes left", i, l, len(d.b)-d.off)
			}
			if d.err != nil {
				return 0, 0, nil, d.err
			}
			end := d.off + int(l)
			values[i] = cdc.Datum{Kind: kind, Text: d.b[d.off:end:end]}
			d.off = end
		default:
			if d.err == nil {
				d.err = fmt.Errorf("value %d has unknown kind %d", i, kind)
			}
		}
		if d.err != nil {
			return 0, 0, nil, d.err
		}
	}
	if d.off != len(d.b) {
		return 0, 0, nil, fmt.Errorf("%d bytes after the last value", len(d.b)-d.off)
	}
	return int64(seq), uint32(sub), &cdc.Change{Table: tables[table], Op: cdc.Op(op), Values: values, KeyChanged: flags&flagKeyChanged != 0}, nil
}

// flagKeyChanged marks a change with cdc.Change.KeyChanged set.
const flagKeyChanged byte = 1

type payloadDecoder struct {
	b   []byte
	off int
	err error
}

func (d *payloadDecoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.err = fmt.Errorf("%s: bad varint", what)
		return 0
	}
	d.off += n
	return v
}

func (d *payloadDecoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.err = fmt.Errorf("%s: %w", what, errTruncated)
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}
