// Package extsort sorts parquet rows that may not fit in memory: rows are
// buffered up to a byte budget, sorted, and spilled as run files to a
// scratch directory; the sorted result is a k-way merge of the runs.
//
// Memory is bounded by the budget in both phases:
//
//   - while rows are added, by the buffered rows (the budget, counted by
//     rowCost) plus the buffer of the run being written (a block);
//   - while the result is read, by one block per open run (runReadBytes,
//     more only for a row larger than a block). At most budget/runReadBytes
//     runs are merged at once; when more were spilled, groups of them are
//     first merged into longer runs, so the bound holds whatever the number
//     of rows.
//
// Run files are scratch: Close removes them, and a crash leaves only files
// in the scratch directory that the caller's next run clears.
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

// Sorter accumulates rows and returns them sorted. It is not safe for
// concurrent use.
type Sorter struct {
	cmp    Compare
	dir    string
	budget int64
	// fanIn caps the runs merged at once (0: budget/runReadBytes).
	fanIn int

	buf     []parquet.Row
	arena   Arena
	used    int64
	runs    []string
	spilled int // runs written from the buffer
	merges  int // runs written by merging runs
	rows    int64
	sorted  bool
	readers []*runReader
}

// New returns a sorter of rows of schema. Runs go to dir, which must exist;
// budget bounds the bytes of buffered rows before a run is spilled, and the
// read buffers of the runs merged at once. The schema is not needed by the
// run format, which keeps each value's kind, levels and column.
func New(_ *parquet.Schema, cmp Compare, dir string, budget int64) *Sorter {
	return &Sorter{cmp: cmp, dir: dir, budget: max(budget, 1<<20)}
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

// Runs returns how many runs were spilled to disk from the buffer.
func (s *Sorter) Runs() int { return s.spilled }

// Merges returns how many intermediate runs were written by merging runs,
// because more were spilled than may be merged at once. Final after Sorted.
func (s *Sorter) Merges() int { return s.merges }

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
	w, err := createRun(s.dir)
	if err != nil {
		return err
	}
	for _, row := range s.buf {
		if err := w.write(row); err != nil {
			w.abort()
			return err
		}
	}
	if err := w.close(); err != nil {
		return err
	}
	s.runs = append(s.runs, w.name())
	s.spilled++
	clear(s.buf)
	s.buf = s.buf[:0]
	s.arena.Reset()
	s.used = 0
	return nil
}

// maxFanIn is how many runs may be merged at once within the budget.
func (s *Sorter) maxFanIn() int {
	if s.fanIn > 0 {
		return max(s.fanIn, 2)
	}
	return max(int(s.budget/runReadBytes), 2)
}

// Sorted ends adding and returns an iterator over every row in order. Rows
// that compare equal come in no particular order.
func (s *Sorter) Sorted() (*Iterator, error) { return s.SortedWith() }

// Source is a sequence of rows already in the sorter's order (a file
// sorted before, say), which SortedWith merges with the added rows without
// buffering or spilling it. Rows out of order make the result out of order:
// checking is the caller's business.
type Source interface {
	// Next returns the next row, or io.EOF after the last. The row must
	// stay valid until the following call.
	Next() (parquet.Row, error)
}

// SortedWith ends adding and returns an iterator over the added rows and
// every source's rows, in order. The caller keeps ownership of the sources
// (and must keep them open until the iterator is done). Among rows that
// compare equal, the sources' come first, in the order the sources are
// given; the added rows' come after them, in no particular order.
func (s *Sorter) SortedWith(srcs ...Source) (*Iterator, error) {
	if s.sorted {
		return nil, errors.New("extsort: Sorted called twice")
	}
	s.sorted = true
	var inputs []input
	for _, src := range srcs {
		inputs = append(inputs, &srcInput{src: src})
	}
	if len(s.runs) == 0 {
		// Everything fits: no file at all.
		slices.SortFunc(s.buf, s.cmp)
		return s.merge(append(inputs, &memInput{rows: s.buf, i: -1}))
	}
	if err := s.spill(); err != nil {
		return nil, err
	}
	// The buffer's memory is the merge's now.
	s.buf, s.arena = nil, Arena{}
	for fan := max(s.maxFanIn()-len(srcs), 2); len(s.runs) > fan; {
		// The oldest runs first; the merged one goes last, so every row
		// is rewritten about log_fan(runs) times.
		merged, err := s.mergeRuns(s.runs[:fan])
		if err != nil {
			return nil, err
		}
		for _, path := range s.runs[:fan] {
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("extsort: remove run: %w", err)
			}
		}
		s.runs = append(slices.Clone(s.runs[fan:]), merged)
		s.merges++
	}
	runs, err := s.openRuns(s.runs)
	if err != nil {
		return nil, err
	}
	return s.merge(append(inputs, runs...))
}

// mergeRuns merges the runs at paths into a new run file and returns its
// path.
func (s *Sorter) mergeRuns(paths []string) (string, error) {
	runs, err := s.openRuns(paths)
	if err != nil {
		return "", err
	}
	it, err := s.merge(runs)
	if err != nil {
		return "", err
	}
	defer it.Close()
	w, err := createRun(s.dir)
	if err != nil {
		return "", err
	}
	for {
		row, err := it.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			w.abort()
			return "", err
		}
		if err := w.write(row); err != nil {
			w.abort()
			return "", err
		}
	}
	if err := w.close(); err != nil {
		return "", err
	}
	return w.name(), nil
}

// openRuns opens the run files at paths.
func (s *Sorter) openRuns(paths []string) ([]input, error) {
	var out []input
	for _, path := range paths {
		r, err := openRun(path)
		if err != nil {
			for _, in := range out {
				in.close()
			}
			return nil, err
		}
		s.readers = append(s.readers, r)
		out = append(out, r)
	}
	return out, nil
}

// merge returns an iterator over the inputs' rows.
func (s *Sorter) merge(inputs []input) (*Iterator, error) {
	it := &Iterator{all: inputs}
	for _, in := range inputs {
		ok, err := in.advance()
		if err != nil {
			it.Close()
			return nil, err
		}
		if ok {
			it.heap.items = append(it.heap.items, in)
		} else {
			in.close()
		}
	}
	it.heap.cmp = s.cmp
	it.heap.rank = make(map[input]int, len(inputs))
	for i, in := range inputs {
		it.heap.rank[in] = i
	}
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
	heap inputHeap
	all  []input
	last input // the input whose row was returned last; advanced lazily
}

// Next returns the next row, or io.EOF after the last. The row is valid only
// until the next call to Next.
func (it *Iterator) Next() (parquet.Row, error) {
	// The previous row may live in its input's read buffer: only now, after
	// the caller is done with it, may that input move on.
	if it.last != nil {
		ok, err := it.last.advance()
		if err != nil {
			return nil, err
		}
		if ok {
			heap.Fix(&it.heap, 0)
		} else {
			heap.Pop(&it.heap)
			it.last.close() // its buffers are free for the others
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
	for _, in := range it.all {
		in.close()
	}
	it.all, it.heap.items, it.last = nil, nil, nil
}

// input is one sorted sequence the iterator merges.
type input interface {
	// advance moves to the next row; false at the end. The previous row
	// is invalid after.
	advance() (bool, error)
	current() parquet.Row
	// close releases the input's buffers; it may be called again.
	close()
}

// memInput is the buffer, when nothing was spilled.
type memInput struct {
	rows []parquet.Row
	i    int
}

func (m *memInput) advance() (bool, error) {
	m.i++
	return m.i < len(m.rows), nil
}
func (m *memInput) current() parquet.Row { return m.rows[m.i] }
func (m *memInput) close()               {}

// srcInput is a caller's Source.
type srcInput struct {
	src Source
	row parquet.Row
}

func (in *srcInput) advance() (bool, error) {
	row, err := in.src.Next()
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	in.row = row
	return true, nil
}
func (in *srcInput) current() parquet.Row { return in.row }
func (in *srcInput) close()               { in.row = nil }

// inputHeap orders inputs by their current row, and equal rows by the
// inputs' order (rank).
type inputHeap struct {
	items []input
	cmp   Compare
	rank  map[input]int
}

func (h *inputHeap) Len() int { return len(h.items) }
func (h *inputHeap) Less(i, j int) bool {
	if c := h.cmp(h.items[i].current(), h.items[j].current()); c != 0 {
		return c < 0
	}
	return h.rank[h.items[i]] < h.rank[h.items[j]]
}
func (h *inputHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *inputHeap) Push(x any)    { h.items = append(h.items, x.(input)) }
func (h *inputHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
