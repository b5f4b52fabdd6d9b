package parquetfile

import (
	"io"
	"sync"

	"github.com/parquet-go/parquet-go"
)

// A pipelined writer converts rows on the caller's goroutine, as Write
// always does, and hands them in batches to a goroutine of its own that
// runs parquet-go's column writers and the page compression and writes the
// output. Compression is most of a delta's CPU (zstd alone is about three
// quarters of it for rows of 8 KiB texts), and the streaming loop that
// calls Write also receives and decodes the next messages: with the
// encoding on another goroutine, the two overlap on a second core instead
// of taking turns.
const (
	// A batch goes to the encoder at pipeRows rows or pipeBytes bytes of
	// values, whichever comes first: large enough that the hand-over costs
	// nothing per row, small enough that the size check (sizeCheckBytes)
	// keeps its granularity.
	pipeRows  = 256
	pipeBytes = sizeCheckBytes
	// pipeBatches bounds the memory in flight: one batch being filled, one
	// being encoded, one queued between them.
	pipeBatches = 3
)

// pipeline is the hand-over between Write and the encoder goroutine.
type pipeline struct {
	work chan *rowBatch // filled batches, in Write order
	free chan *rowBatch // batches the encoder is done with
	done chan struct{}  // closed when the encoder has returned
	cur  *rowBatch      // being filled by Write; owned by the caller

	// mu guards err and the parquet-go writer between the encoder and the
	// caller's Size; the encoder holds it while it writes a batch.
	mu  sync.Mutex
	err error // the encoder's first failure: every later batch is dropped
}

// rowBatch owns copies of its rows: Write's caller may reuse its buffers as
// soon as Write returns, while the batch waits for the encoder.
type rowBatch struct {
	rows  []parquet.Row
	vals  []parquet.Value
	data  []byte
	bytes int // value bytes, for the size check
}

func (b *rowBatch) reset() {
	clear(b.rows) // drop references to arrays the slabs outgrew
	b.rows, b.vals, b.data, b.bytes = b.rows[:0], b.vals[:0], b.data[:0], 0
	if cap(b.data) > 4*pipeBytes {
		b.data = nil // a huge value must not stay allocated for the file's life
	}
}

// add appends a copy of row, its byte arrays copied into the batch's slab.
func (b *rowBatch) add(row parquet.Row) {
	start := len(b.vals)
	for _, v := range row {
		k := v.Kind()
		if (k == parquet.ByteArray || k == parquet.FixedLenByteArray) && !v.IsNull() && len(v.ByteArray()) > 0 {
			s := len(b.data)
			b.data = append(b.data, v.ByteArray()...)
			data := b.data[s:len(b.data):len(b.data)]
			b.bytes += len(data)
			nv := parquet.ByteArrayValue(data)
			if k == parquet.FixedLenByteArray {
				nv = parquet.FixedLenByteArrayValue(data)
			}
			v = nv.Level(v.RepetitionLevel(), v.DefinitionLevel(), v.Column())
		}
		b.vals = append(b.vals, v)
	}
	b.rows = append(b.rows, b.vals[start:len(b.vals):len(b.vals)])
}

func (b *rowBatch) full() bool { return len(b.rows) >= pipeRows || b.bytes >= pipeBytes }

// NewPipelinedWriter is NewWriter whose encoding and output run on a
// goroutine of the writer's own, overlapping with the caller's next Writes
// (see pipeline). The writer's contract is NewWriter's, except that a
// failure of the output or of parquet-go is returned by a later Write or
// by Close rather than by the Write of the row that met it (the file is
// unusable either way). The goroutine ends in Close or Abort, one of which
// the owner must call.
func NewPipelinedWriter(w io.Writer, s *Schema) *Writer {
	pw := NewWriter(w, s)
	p := &pipeline{
		work: make(chan *rowBatch, 1),
		free: make(chan *rowBatch, pipeBatches),
		done: make(chan struct{}),
	}
	for range pipeBatches - 1 {
		p.free <- &rowBatch{}
	}
	p.cur = &rowBatch{}
	pw.pipe = p
	go pw.encode()
	return pw
}

// encode writes the batches Write hands over until Close or Abort closes
// the work channel.
func (w *Writer) encode() {
	p := w.pipe
	defer close(p.done)
	for b := range p.work {
		p.mu.Lock()
		if p.err == nil {
			p.err = w.writeBatch(b)
		}
		p.mu.Unlock()
		b.reset()
		p.free <- b
	}
}

// writeBatch writes b's rows and ends the row group once it reaches the
// budget (the check Write makes itself when the writer is not pipelined).
func (w *Writer) writeBatch(b *rowBatch) error {
	if _, err := w.pw.WriteRows(b.rows); err != nil {
		return wrapWrite(w, err)
	}
	if w.pw.Size()-w.flushed >= w.budget {
		if err := w.pw.Flush(); err != nil {
			return wrapFlush(w, err)
		}
		w.flushed = w.pw.Size()
	}
	return nil
}

// put queues a converted row for the encoder. It fails only with the
// encoder's error, once it has one.
func (w *Writer) put(row parquet.Row) error {
	p := w.pipe
	p.cur.add(row)
	if !p.cur.full() {
		return nil
	}
	p.work <- p.cur
	p.cur = <-p.free
	return p.failure()
}

func (p *pipeline) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// drain hands over the last rows, stops the encoder and returns its error.
// keep=false drops what is not written yet (Abort).
func (p *pipeline) drain(keep bool) error {
	if keep && len(p.cur.rows) > 0 {
		p.work <- p.cur
	}
	p.cur = nil
	if !keep {
		p.mu.Lock()
		if p.err == nil {
			p.err = errClosed
		}
		p.mu.Unlock()
	}
	close(p.work)
	<-p.done
	if !keep {
		return nil
	}
	return p.failure()
}

// Abort stops a writer without writing the footer, discarding the rows not
// written yet; for a file that is being thrown away. The underlying
// io.Writer is left as it is. Aborting a closed writer does nothing.
func (w *Writer) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	if w.pipe != nil {
		_ = w.pipe.drain(false)
	}
	if w.err == nil {
		w.err = errClosed
	}
}
