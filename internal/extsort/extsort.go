// Package extsort sorts parquet rows that may not fit in memory: rows are
// buffered up to a byte budget, sorted, and spilled as Parquet run files to a
// scratch directory; the sorted result is a k-way merge of the runs.
//
// Memory is the budget (plus the Go runtime's headroom) while rows are added,
// and one read buffer per run while the result is read. Run files are
// scratch: Close removes them, and a crash leaves only files in the scratch
// directory that the caller's next run clears.
package extsort

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/parquet-go/parquet-go"
)

// Compare orders two rows: negative when a sorts first.
type Compare func(a, b parquet.Row) int

// rowOverhead approximates what a buffered row costs beyond its values and
// byte data (slice header, allocation rounding).
const rowOverhead = 48

// valueSize is the in-memory size of one parquet.Value.
const valueSize = 24

// readBatch is how many rows a run reader decodes at a time.
const readBatch = 64

// Sorter accumulates rows and returns them sorted. It is not safe for
// concurrent use.
type Sorter struct {
	schema *parquet.Schema
	cmp    Compare
	dir    string
	budget int64

	buf     []parquet.Row
	arena   Arena
	used    int64
	runs    []string
	rows    int64
	sorted  bool
	readers []*runReader
}

// New returns a sorter of rows of schema. Runs go to dir, which must exist;
// budget bounds the bytes of buffered rows before a run is spilled.
func New(schema *parquet.Schema, cmp Compare, dir string, budget int64) *Sorter {
	return &Sorter{schema: schema, cmp: cmp, dir: dir, budget: max(budget, 1<<20)}
}

// Add copies row into the sorter.
func (s *Sorter) Add(row parquet.Row) error {
	if s.sorted {
		return errors.New("extsort: Add after Sorted")
	}
	s.buf = append(s.buf, s.arena.Clone(row))
	s.used += rowCost(row)
	s.rows++
	if s.used >= s.budget {
		return s.spill()
	}
	return nil
}

// Rows returns how many rows were added.
func (s *Sorter) Rows() int64 { return s.rows }

// Runs returns how many runs were spilled to disk.
func (s *Sorter) Runs() int { return len(s.runs) }

func rowCost(row parquet.Row) int64 {
	n := int64(rowOverhead + valueSize*len(row))
	for _, v := range row {
		if k := v.Kind(); k == parquet.ByteArray || k == parquet.FixedLenByteArray {
			n += int64(len(v.ByteArray()))
		}
	}
	return n
}

// spill sorts the buffer and writes it as a run file.
func (s *Sorter) spill() error {
	if len(s.buf) == 0 {
		return nil
	}
	slices.SortFunc(s.buf, s.cmp)
	f, err := os.CreateTemp(s.dir, "run-*.parquet")
	if err != nil {
		return fmt.Errorf("extsort: create run: %w", err)
	}
	s.runs = append(s.runs, f.Name())
	// Runs are read once, right away: fast compression, no statistics.
	w := parquet.NewWriter(f, s.schema, parquet.Compression(&parquet.Snappy),
		parquet.DataPageStatistics(false), parquet.PageBufferSize(256<<10))
	for start := 0; start < len(s.buf); start += 1024 {
		if _, err := w.WriteRows(s.buf[start:min(start+1024, len(s.buf))]); err != nil {
			f.Close()
			return fmt.Errorf("extsort: write run: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return fmt.Errorf("extsort: close run: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("extsort: close run: %w", err)
	}
	clear(s.buf)
	s.buf = s.buf[:0]
	s.arena.Reset()
	s.used = 0
	return nil
}

// Sorted ends adding and returns an iterator over every row in order. Rows
// that compare equal come in no particular order.
func (s *Sorter) Sorted() (*Iterator, error) {
	if s.sorted {
		return nil, errors.New("extsort: Sorted called twice")
	}
	s.sorted = true
	if len(s.runs) == 0 {
		// Everything fits: no file at all.
		slices.SortFunc(s.buf, s.cmp)
		return &Iterator{mem: s.buf, cmp: s.cmp}, nil
	}
	if err := s.spill(); err != nil {
		return nil, err
	}
	s.buf = nil
	it := &Iterator{cmp: s.cmp}
	for _, path := range s.runs {
		r, err := openRun(path)
		if err != nil {
			it.Close()
			return nil, err
		}
		s.readers = append(s.readers, r)
		it.all = append(it.all, r)
		ok, err := r.advance()
		if err != nil {
			it.Close()
			return nil, err
		}
		if ok {
			it.heap.items = append(it.heap.items, r)
		}
	}
	it.heap.cmp = s.cmp
	heap.Init(&it.heap)
	return it, nil
}

// Close removes the run files. It is safe to call at any time, and again.
func (s *Sorter) Close() error {
	var errs []error
	for _, r := range s.readers {
		r.close()
	}
	s.readers = nil
	for _, path := range s.runs {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("extsort: remove run: %w", err))
		}
	}
	s.runs = nil
	s.buf = nil
	s.arena = Arena{}
	return errors.Join(errs...)
}

// Iterator returns sorted rows.
type Iterator struct {
	cmp  Compare
	mem  []parquet.Row // everything fitted in memory
	next int

	heap runHeap
	all  []*runReader
	last *runReader // the run whose row was returned last; advanced lazily
}

// Next returns the next row, or io.EOF after the last. The row is valid only
// until the next call to Next.
func (it *Iterator) Next() (parquet.Row, error) {
	if it.mem != nil || it.all == nil {
		if it.next >= len(it.mem) {
			return nil, io.EOF
		}
		it.next++
		return it.mem[it.next-1], nil
	}
	// The previous row may live in its run's read buffer: only now, after
	// the caller is done with it, may that run move on.
	if it.last != nil {
		ok, err := it.last.advance()
		if err != nil {
			return nil, err
		}
		if ok {
			heap.Fix(&it.heap, 0)
		} else {
			heap.Pop(&it.heap)
		}
		it.last = nil
	}
	if len(it.heap.items) == 0 {
		return nil, io.EOF
	}
	top := it.heap.items[0]
	it.last = top
	return top.current(), nil
}

// Close releases the run readers; the Sorter's Close removes the files.
func (it *Iterator) Close() {
	for _, r := range it.all {
		r.close()
	}
	it.all, it.heap.items, it.mem = nil, nil, nil
}

// runReader reads one run file in batches.
type runReader struct {
	f     *os.File
	r     *parquet.Reader
	batch []parquet.Row
	n, i  int
	done  bool
}

func openRun(path string) (*runReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("extsort: open run: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("extsort: open run: %w", err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("extsort: open run %s: %w", path, err)
	}
	return &runReader{f: f, r: parquet.NewReader(pf), batch: make([]parquet.Row, readBatch), i: -1}, nil
}

// advance moves to the next row; false at the end of the run.
func (r *runReader) advance() (bool, error) {
	if r.done {
		return false, nil
	}
	r.i++
	if r.i < r.n {
		return true, nil
	}
	n, err := r.r.ReadRows(r.batch)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("extsort: read run: %w", err)
	}
	r.n, r.i = n, 0
	if n == 0 {
		r.done = true
		return false, nil
	}
	return true, nil
}

func (r *runReader) current() parquet.Row { return r.batch[r.i] }

func (r *runReader) close() {
	if r.f != nil {
		r.r.Close()
		r.f.Close()
		r.f = nil
	}
}

// runHeap orders run readers by their current row.
type runHeap struct {
	items []*runReader
	cmp   Compare
}

func (h *runHeap) Len() int           { return len(h.items) }
func (h *runHeap) Less(i, j int) bool { return h.cmp(h.items[i].current(), h.items[j].current()) < 0 }
func (h *runHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *runHeap) Push(x any)         { h.items = append(h.items, x.(*runReader)) }
func (h *runHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
