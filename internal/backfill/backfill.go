package backfill

import (
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Position is a row's order token (__lsn, __seq).
type Position struct {
	LSN cdc.LSN
	Seq int64
}

// change is one recorded change: its transaction and its commit LSN (all
// changes of one transaction share the LSN, with seq ≥ 0).
type change struct {
	xid cdc.XID
	lsn cdc.LSN
}

// Tracker records, for one table being backfilled, the changes the stream
// delivered per primary key (in a normalised form the caller builds from the
// typed key values, so the stream's and the chunk's texts agree), and the
// TRUNCATEs of the table. Not safe for concurrent use: the loop owns it.
type Tracker struct {
	byKey     map[string][]change
	truncates []change
	n         int
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{byKey: map[string][]change{}} }

// Change records that transaction xid, committed at lsn, changed key (an
// insert, update or delete of it; a key-changing update records both keys).
func (t *Tracker) Change(key string, xid cdc.XID, lsn cdc.LSN) {
	t.byKey[key] = append(t.byKey[key], change{xid: xid, lsn: lsn})
	t.n++
}

// Truncate records a TRUNCATE of the table by transaction xid at lsn.
func (t *Tracker) Truncate(xid cdc.XID, lsn cdc.LSN) {
	t.truncates = append(t.truncates, change{xid: xid, lsn: lsn})
	t.n++
}

// Len is how many changes the tracker holds (a gauge of its memory).
func (t *Tracker) Len() int { return t.n }

// Chunk places the rows of one chunk read under snap, whose marker the stream
// delivered at marker. It must be called when the marker is delivered, before
// any change after it is recorded.
type Chunk struct {
	t        *Tracker
	snap     cdc.Snapshot
	marker   cdc.LSN
	truncate cdc.LSN // earliest invisible truncate, or 0
}

// Chunk starts the placement of a chunk.
func (t *Tracker) Chunk(snap cdc.Snapshot, marker cdc.LSN) *Chunk {
	c := &Chunk{t: t, snap: snap, marker: marker}
	for _, ch := range t.truncates {
		if !snap.Visible(ch.xid) && (c.truncate == 0 || ch.lsn < c.truncate) {
			c.truncate = ch.lsn
		}
	}
	return c
}

// Place returns the position of the chunk's row number i (from 0) of n, whose
// key is key. Seqs are negative and unique within the chunk (i - n), so the
// rows order before any real change at the same LSN and never share a
// position with one another.
func (c *Chunk) Place(key string, i, n int) Position {
	lsn := c.marker
	if c.truncate != 0 && c.truncate < lsn {
		lsn = c.truncate
	}
	for _, ch := range c.t.byKey[key] {
		if !c.snap.Visible(ch.xid) && ch.lsn < lsn {
			lsn = ch.lsn
		}
	}
	return Position{LSN: lsn, Seq: int64(i - n)}
}

// Prune forgets every change whose transaction snap sees: every later chunk
// snapshot sees it too, so it can never move a chunk row again. Call it once
// a chunk read under snap has been placed (for every tracker, so that tables
// waiting for their turn hold only one window of changes too).
func (t *Tracker) Prune(snap cdc.Snapshot) {
	for key, list := range t.byKey {
		kept := list[:0]
		for _, ch := range list {
			if !snap.Visible(ch.xid) {
				kept = append(kept, ch)
			}
		}
		t.n -= len(list) - len(kept)
		if len(kept) == 0 {
			delete(t.byKey, key)
		} else {
			t.byKey[key] = kept
		}
	}
	kept := t.truncates[:0]
	for _, ch := range t.truncates {
		if !snap.Visible(ch.xid) {
			kept = append(kept, ch)
		}
	}
	t.n -= len(t.truncates) - len(kept)
	t.truncates = kept
}
