package txn

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Assembler buffers the changes of streamed transactions until they commit
// or abort. See the package documentation for its invariants.
type Assembler struct {
	dir    string
	budget int64

	txns         map[uint32]*txn
	memBytes     int64 // sum of txn.memBytes
	spilledBytes int64 // sum of the sizes of live spill files
	spilledTxns  int   // transactions that have a spill file

	// tables interns the *cdc.Table of spilled changes: a spill record holds
	// an index into it, and replay hands back the same pointer. It is
	// cleared when no spill file is left, so it does not grow over a long
	// run.
	tables   []*cdc.Table
	tableIdx map[*cdc.Table]uint64

	// Reused buffers: the file writer and the record encoding space.
	w       *bufio.Writer
	scratch []byte
}

// txn is one open top-level transaction.
type txn struct {
	xid      uint32
	nextSeq  int64
	mem      []entry // changes not yet spilled, in arrival order
	memBytes int64
	// aborted holds the subtransactions aborted so far; their spilled
	// changes are skipped on replay, and changes still arriving for them
	// are dropped.
	aborted map[uint32]struct{}
	spill   *spillFile // nil until the first spill
	// broken is set when a failed spill could not be rolled back: the file
	// no longer matches what was accounted, so Commit must fail.
	broken error
}

type entry struct {
	seq  int64
	sub  uint32
	size int64
	c    *cdc.Change
}

// NewAssembler returns an assembler that spills to dir (created on the first
// spill) when more than memoryBudget bytes of changes are held in memory. It
// starts nothing and touches no file.
func NewAssembler(dir string, memoryBudget int64) *Assembler {
	return &Assembler{dir: dir, budget: memoryBudget, txns: map[uint32]*txn{}}
}

// Add appends a change of subtransaction sub (sub == top for the top-level
// transaction itself) to the streamed transaction top. The change's sequence
// number is its position in top's arrival order.
//
// The assembler takes ownership of c: the caller must not use or modify it
// afterwards (it may be written to disk and dropped, or handed back by
// Commit). An error means a spill failed; the change is kept in memory, but
// the caller should stop streaming and Reset.
func (a *Assembler) Add(top, sub uint32, c *cdc.Change) error {
	if c == nil {
		return fmt.Errorf("add change to transaction %d: nil change", top)
	}
	t := a.txns[top]
	if t == nil {
		t = &txn{xid: top}
		a.txns[top] = t
	}
	seq := t.nextSeq
	t.nextSeq++
	if _, dead := t.aborted[sub]; dead {
		// PostgreSQL does not send changes of a subtransaction after its
		// abort; if it did, they would be dropped on replay anyway.
		return nil
	}
	size := int64(c.Size())
	t.mem = append(t.mem, entry{seq: seq, sub: sub, size: size, c: c})
	t.memBytes += size
	a.memBytes += size
	for a.memBytes > a.budget {
		victim := a.largestInMemory()
		if victim == nil {
			break
		}
		if err := a.spill(victim); err != nil {
			return fmt.Errorf("spill transaction %d: %w", victim.xid, err)
		}
	}
	return nil
}

// largestInMemory returns the transaction with the most bytes in memory, or
// nil when nothing is in memory. Ties go to the lower xid, so the choice
// does not depend on map order.
func (a *Assembler) largestInMemory() *txn {
	var best *txn
	for _, t := range a.txns {
		if t.memBytes == 0 || t.broken != nil {
			continue
		}
		if best == nil || t.memBytes > best.memBytes || (t.memBytes == best.memBytes && t.xid < best.xid) {
			best = t
		}
	}
	return best
}

// Abort drops the whole transaction (sub == top) or the changes of one
// subtransaction. Aborting a transaction or subtransaction that has no
// change is not an error.
func (a *Assembler) Abort(top, sub uint32) error {
	t := a.txns[top]
	if t == nil {
		return nil
	}
	if sub == top {
		if err := a.forget(t); err != nil {
			return fmt.Errorf("abort transaction %d: %w", top, err)
		}
		return nil
	}
	if t.aborted == nil {
		t.aborted = map[uint32]struct{}{}
	}
	t.aborted[sub] = struct{}{}
	kept := t.mem[:0]
	for _, e := range t.mem {
		if e.sub == sub {
			t.memBytes -= e.size
			a.memBytes -= e.size
			continue
		}
		kept = append(kept, e)
	}
	clear(t.mem[len(kept):]) // let the dropped changes be collected
	t.mem = kept
	return nil
}

// Commit replays the surviving changes of transaction top in arrival order,
// with their arrival sequence numbers, then forgets the transaction and
// removes its spill file. fn may keep c. A transaction never seen (one that
// changed no published table) replays nothing.
//
// Whatever the outcome, the transaction is forgotten. An error (from fn, or
// a spill file that does not read back) leaves the caller with a partial
// replay, which it must discard: it stops, and PostgreSQL resends the
// transaction after the reconnect.
func (a *Assembler) Commit(top uint32, fn func(seq int64, c *cdc.Change) error) (err error) {
	t := a.txns[top]
	if t == nil {
		return nil
	}
	defer func() {
		if ferr := a.forget(t); ferr != nil && err == nil {
			err = fmt.Errorf("commit transaction %d: %w", top, ferr)
		}
	}()
	if t.broken != nil {
		return fmt.Errorf("commit transaction %d: %w", top, t.broken)
	}
	if t.spill != nil {
		if err := a.replaySpill(t, fn); err != nil {
			return err
		}
	}
	// Spilled changes all precede the in-memory ones: a spill moves every
	// in-memory change of the transaction to the end of its file.
	for i := range t.mem {
		e := &t.mem[i]
		if err := fn(e.seq, e.c); err != nil {
			return err
		}
	}
	return nil
}

// forget drops a transaction from memory and removes its spill file.
func (a *Assembler) forget(t *txn) error {
	delete(a.txns, t.xid)
	a.memBytes -= t.memBytes
	clear(t.mem)
	t.mem, t.memBytes = nil, 0
	if t.spill == nil {
		return nil
	}
	a.spilledBytes -= t.spill.bytes
	a.spilledTxns--
	if a.spilledTxns == 0 {
		a.tables, a.tableIdx = nil, nil
	}
	err := os.Remove(t.spill.path)
	t.spill = nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove spill file: %w", err)
	}
	return nil
}

// Pending reports whether any transaction is open, in memory or spilled.
func (a *Assembler) Pending() bool { return len(a.txns) > 0 }

// MemoryBytes is the size (cdc.Change.Size) of the changes held in memory.
func (a *Assembler) MemoryBytes() int64 { return a.memBytes }

// SpilledBytes is the size of the spill files of open transactions.
func (a *Assembler) SpilledBytes() int64 { return a.spilledBytes }

// Reset forgets every transaction and deletes every spill file in the
// directory, including those left by an earlier process. It is used after a
// reconnect, when PostgreSQL will resend open transactions from their start.
func (a *Assembler) Reset() error {
	var errs []error
	for _, t := range a.txns {
		if err := a.forget(t); err != nil {
			errs = append(errs, err)
		}
	}
	a.txns = map[uint32]*txn{}
	a.memBytes, a.spilledBytes, a.spilledTxns = 0, 0, 0
	a.tables, a.tableIdx = nil, nil
	entries, err := os.ReadDir(a.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if name := e.Name(); isSpillName(name) {
			if err := os.Remove(filepath.Join(a.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("reset spill directory %s: %w", a.dir, err)
	}
	return nil
}

func spillName(xid uint32) string { return fmt.Sprintf("txn-%d.spill", xid) }

func isSpillName(name string) bool {
	return strings.HasPrefix(name, "txn-") && strings.HasSuffix(name, ".spill")
}
