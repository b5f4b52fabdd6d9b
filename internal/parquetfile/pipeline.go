package parquetfile

import (
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// A pipelined writer of wide rows (wideRowBytes) copies each row Write is
// given into a batch and hands
// the batches to a goroutine of its own that converts the values, runs
// parquet-go's column writers and the page compression, and writes the
// output. Conversion and compression are most of a delta's CPU (zstd alone
// is about three quarters of it for rows of 8 KiB texts), and the
// streaming loop that calls Write also receives and decodes the next
// messages, or replays a big transaction's spill file: with the encoding
// on other goroutines, the two overlap on a second core instead of taking
// turns.
//
// When the encoder cannot keep up — the caller waited for it for more than
// stallBeforeStripe in all, as with rows of large texts, where compression
// is nearly all the work — a second encoder starts, writing row groups of
// its own into the same file (parquet-go's concurrent row groups): rows are
// read back by key and (__lsn, __seq), never by their place in a file. The
// encoders share the row-group budget, so the memory stays that of one.
const (
	// A batch goes to the encoders at pipeRows rows or pipeBytes bytes of
	// values, whichever comes first: large enough that the hand-over costs
	// nothing per row, small enough that the size check (sizeCheckBytes)
	// keeps its granularity.
	pipeRows  = 256
	pipeBytes = sizeCheckBytes
	// maxStripes is the most encoders a file gets: the stream's machine is
	// assumed to have two cores for pg-cdc at most (one goes to the
	// walsender when both run on one host).
	maxStripes = 2
	// stallBeforeStripe is how long Write may wait for the encoder in all
	// before a second one starts: well above the scheduling hiccups of a
	// busy machine, well below the seconds a backlog of large rows takes.
	stallBeforeStripe = 100 * time.Millisecond
)

// stripeLimit is maxStripes, lowered by the benchmark that measures what
// the second encoder buys.
var stripeLimit = maxStripes

// pipeline is the hand-over between Write and the encoder goroutines.
type pipeline struct {
	work chan *rowBatch // filled batches, in Write order
	free chan *rowBatch // batches an encoder is done with
	wg   sync.WaitGroup // the encoders
	cur  *rowBatch      // being filled by Write; owned by the caller

	// Caller-side: the encoders started and the time Write waited for them.
	stripes int
	stalled time.Duration
	// running is stripes, for the encoders: each keeps its row group within
	// budget/running, so that a second encoder costs no memory.
	running  atomic.Int64
	encoders []*encoder // read by Adjusted once they have ended

	// commitMu serialises what touches the file itself: committing a row
	// group, starting one, and Size.
	commitMu sync.Mutex

	mu  sync.Mutex
	err error // the first failure: every later batch is dropped
}

// rowBatch owns copies of its rows, unconverted: Write's caller may reuse
// its buffers as soon as Write returns, while the batch waits for an
// encoder.
type rowBatch struct {
	rows   []rawRow
	datums []cdc.Datum
	data   []byte
}

type rawRow struct {
	meta   cdc.RowMeta
	values []cdc.Datum // Text in the batch's data
}

func (b *rowBatch) reset() {
	clear(b.rows)   // drop references to arrays the slabs outgrew
	clear(b.datums) // and to the data
	b.rows, b.datums, b.data = b.rows[:0], b.datums[:0], b.data[:0]
	if cap(b.data) > 4*pipeBytes {
		b.data = nil // a huge value must not stay allocated for the file's life
	}
}

// add appends a copy of one row. A slab that grows leaves the rows already
// added on its old array, which they keep alive until the batch is reset.
func (b *rowBatch) add(meta cdc.RowMeta, values []cdc.Datum) {
	start := len(b.datums)
	for _, v := range values {
		if v.Kind == cdc.DatumText {
			s := len(b.data)
			b.data = append(b.data, v.Text...)
			v.Text = b.data[s:len(b.data):len(b.data)]
		}
		b.datums = append(b.datums, v)
	}
	b.rows = append(b.rows, rawRow{meta: meta, values: b.datums[start:len(b.datums):len(b.datums)]})
}

func (b *rowBatch) full() bool { return len(b.rows) >= pipeRows || len(b.data) >= pipeBytes }

// encoder is one encoding goroutine's state: its row group and the reused
// space it converts a batch into.
type encoder struct {
	rg       *parquet.ConcurrentRowGroupWriter
	vals     []parquet.Value
	rows     []parquet.Row
	buf      []byte
	adj      []adjusted
	adjusted []int64 // per column: values a rule changed (Writer.Adjusted)
}

// NewPipelinedWriter is NewWriter whose conversion, encoding and output run
// on goroutines of the writer's own once its rows are wide (wideRowBytes),
// overlapping with the caller's next Writes (see pipeline). The writer's
// contract is NewWriter's, except that, once pipelining:
//   - a refused value (*ValueError) or a failure of the output is returned
//     by a later Write or by Close rather than by the Write of its row, and
//     the file is then unusable (the stream stops on either);
//   - rows are not in Write order in the file once a second encoder runs;
//   - Adjusted is complete once the writer is closed;
//   - and from the start, WriteRow is not available.
//
// The goroutines end in Close or Abort, one of which the owner must call.
func NewPipelinedWriter(w io.Writer, s *Schema) *Writer {
	pw := newWriter(w, s, maxStripes)
	pw.probe = true
	if wideRowBytes == 0 {
		pw.startPipeline()
	}
	return pw
}

// wideRowBytes is the average size of a row's values from which a
// pipelined writer hands its rows to encoders: until then it encodes on
// the caller, as NewWriter does. Only rows this large make pg-cdc rather
// than the walsender the bottleneck of a stream (compression costs by the
// byte, the walsender and the decoding by the row): with small rows (W1,
// W2) the walsender is, and an encoder goroutine only took CPU from it
// (on 2 cores, W1 drained about 10 % slower, the walsender spending up to
// 17 % more CPU per row). A variable so that tests can pipeline any row.
var wideRowBytes = 1024

// probeWide runs after every row the caller encoded itself: once a window
// of pipeRows rows averages wideRowBytes, the rest of the file is
// pipelined (never back: a file's rows are of one table).
func (w *Writer) probeWide(values []cdc.Datum) error {
	for i := range values {
		w.probeBytes += len(values[i].Text)
	}
	if w.probeRows++; w.probeRows < pipeRows {
		return nil
	}
	wide := w.probeBytes >= wideRowBytes*w.probeRows
	w.probeRows, w.probeBytes = 0, 0
	if !wide {
		return nil
	}
	// The caller's rows so far go out as a row group of their own: the
	// encoders write concurrent row groups from now on.
	if err := w.flush(); err != nil {
		return err
	}
	w.startPipeline()
	return nil
}

func (w *Writer) startPipeline() {
	p := &pipeline{
		work: make(chan *rowBatch, 1),
		free: make(chan *rowBatch, maxStripes+2),
	}
	p.cur = &rowBatch{}
	w.pipe = p
	w.addStripe()
}

// addStripe starts an encoder with a row group of its own and one more
// batch to fill meanwhile.
func (w *Writer) addStripe() {
	p := w.pipe
	p.commitMu.Lock()
	e := &encoder{rg: w.pw.BeginRowGroup()}
	p.commitMu.Unlock()
	p.encoders = append(p.encoders, e)
	p.stripes++
	p.running.Add(1)
	p.free <- &rowBatch{}
	if p.stripes == 1 {
		p.free <- &rowBatch{} // one queued while the other is encoded
	}
	p.wg.Add(1)
	go w.encode(e)
}

// encode writes the batches Write hands over until Close or Abort closes
// the work channel, then commits what its row group holds (unless
// aborted).
func (w *Writer) encode(e *encoder) {
	p := w.pipe
	defer p.wg.Done()
	for b := range p.work {
		if p.failure() == nil {
			if err := w.writeBatch(e, b); err != nil {
				p.fail(err)
			}
		}
		b.reset()
		p.free <- b
	}
	if p.failure() == nil {
		if err := p.commit(e.rg); err != nil {
			p.fail(wrapFlush(w, err))
		}
	}
}

// writeBatch converts b's rows, writes them and commits the row group once
// it reaches its share of the budget (the check Write makes itself when
// the writer is not pipelined).
func (w *Writer) writeBatch(e *encoder, b *rowBatch) error {
	vals, rows, buf := e.vals[:0], e.rows[:0], e.buf[:0]
	defer func() {
		clear(rows) // the next batch's rows must not see this one's
		e.vals, e.rows, e.buf = vals[:0], rows[:0], buf[:0]
		if cap(buf) > maxKeptBuf {
			e.buf = nil // one huge bytea must not stay allocated for the file's life
		}
	}()
	for _, r := range b.rows {
		start := len(vals)
		var err error
		// A slab that grows leaves the rows converted so far on its old
		// array: they stay valid until WriteRows has copied them.
		if vals, buf, err = w.convert(vals, buf, &e.adj, r.meta, r.values); err != nil {
			return err
		}
		rows = append(rows, vals[start:len(vals):len(vals)])
		if len(e.adj) > 0 {
			w.countAdjusted(&e.adjusted, e.adj, r.values)
			e.adj = e.adj[:0]
		}
	}
	if _, err := e.rg.WriteRows(rows); err != nil {
		return wrapWrite(w, err)
	}
	if e.rg.Size() >= w.budget/w.pipe.running.Load() {
		if err := w.pipe.commit(e.rg); err != nil {
			return wrapFlush(w, err)
		}
	}
	return nil
}

func (p *pipeline) commit(rg *parquet.ConcurrentRowGroupWriter) error {
	p.commitMu.Lock()
	defer p.commitMu.Unlock()
	_, err := rg.Commit()
	return err
}

// put queues a copy of a row for the encoders. It fails only with an
// encoder's error, once there is one: a value refused, or the output.
func (w *Writer) put(meta cdc.RowMeta, values []cdc.Datum) error {
	p := w.pipe
	p.cur.add(meta, values)
	if !p.cur.full() {
		return nil
	}
	select {
	case p.work <- p.cur:
		p.cur = <-p.free // at once: with the queue free, so is a batch
	default:
		// A batch is queued already and the encoders are busy: they are
		// the bottleneck. Time is read only here, not per row.
		t := time.Now()
		p.work <- p.cur
		p.cur = <-p.free
		p.stalled += time.Since(t)
		if p.stalled > stallBeforeStripe && p.stripes < stripeLimit && runtime.GOMAXPROCS(0) > 1 {
			w.addStripe()
		}
	}
	return p.failure()
}

func (p *pipeline) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *pipeline) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// drain hands over the last rows, stops the encoders (which commit their
// row groups) and returns their error. keep=false drops what is not written
// yet (Abort).
func (p *pipeline) drain(keep bool) error {
	if keep && len(p.cur.rows) > 0 {
		p.work <- p.cur
	}
	p.cur = nil
	if !keep {
		p.fail(errClosed)
	}
	close(p.work)
	p.wg.Wait()
	if !keep {
		return nil
	}
	return p.failure()
}

// Stalled is how long Write has waited for the encoders so far (a
// pipelined writer's; zero otherwise).
func (w *Writer) Stalled() time.Duration {
	if w.pipe == nil {
		return 0
	}
	return w.pipe.stalled
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
