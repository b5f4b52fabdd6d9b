package replicate

import (
	"slices"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/flush"
)

// partitionsMsg is the logical message the chunk worker writes when the
// leaf partitions of public.items are leaves.
func partitionsMsg(t *testing.T, lsn cdc.LSN, resnapshot bool, leaves ...uint32) []Message {
	t.Helper()
	prefix, content, err := control.Encode(control.Partitions{Table: "public.items", Leaves: leaves, Resnapshot: resnapshot})
	if err != nil {
		t.Fatal(err)
	}
	return data(pgLogical(0, false, false, lsn, prefix, content))
}

// TestPartitionsRecorded: the loop records a table's leaf partitions at
// the message's position; a change that moved rows requests a resnapshot
// in the same durable write; a second such change while that resnapshot
// runs is deferred (neither recorded nor requested: the copy under way
// may predate it), and the worker's record stays the committed one, so it
// tells again; a message repeating the record changes nothing.
func TestPartitionsRecorded(t *testing.T) {
	h := start(t, options{limits: flush.Limits{Interval: 50 * time.Millisecond, MaxRows: 1000}})
	c := startLSN + 0x100
	next := func() cdc.LSN { c += 0x100; return c }
	recorded := func() []uint32 {
		leaves, _ := h.svc.bf.h.recordedPartitions(cdc.TableID{Schema: "public", Name: "items"})
		return leaves
	}

	first := next()
	h.push(partitionsMsg(t, first, false, 101, 102)...)
	h.waitFor("the first record durable", func() bool { return h.manifest().EndLSN >= first })
	mt := h.manifest().Tables["public.items"]
	if !slices.Equal(mt.Partitions, []uint32{101, 102}) || mt.Resnapshot != nil || !slices.Equal(recorded(), mt.Partitions) {
		t.Fatalf("after the first record: partitions %v, resnapshot %+v, worker's record %v", mt.Partitions, mt.Resnapshot, recorded())
	}

	attached := next()
	h.push(partitionsMsg(t, attached, true, 101, 102, 103)...)
	h.waitFor("the attach durable", func() bool { return h.manifest().EndLSN >= attached })
	mt = h.manifest().Tables["public.items"]
	if !slices.Equal(mt.Partitions, []uint32{101, 102, 103}) || mt.Resnapshot == nil || mt.Resnapshot.Generation != "g0002" {
		t.Fatalf("after an attach with rows: partitions %v, resnapshot %+v", mt.Partitions, mt.Resnapshot)
	}

	// A detach while the resnapshot runs: deferred.
	detached := next()
	h.push(partitionsMsg(t, detached, true, 101, 103)...)
	after := next()
	h.push(tx(500, after, itemsRel(0, false), pgInsert(0, false, itemsOID, txt("1"), txt("a")))...)
	h.waitFor("the transaction after it durable", func() bool { return h.manifest().EndLSN == endOf(after) })
	mt = h.manifest().Tables["public.items"]
	if !slices.Equal(mt.Partitions, []uint32{101, 102, 103}) || mt.Resnapshot == nil || mt.Resnapshot.Generation != "g0002" ||
		!slices.Equal(recorded(), []uint32{101, 102, 103}) {
		t.Fatalf("a change during the resnapshot was not deferred: partitions %v, resnapshot %+v, worker's record %v", mt.Partitions, mt.Resnapshot, recorded())
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}
