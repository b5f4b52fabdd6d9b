package replicate

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
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

// TestPartitionsKeylessStops: a partition change that moved the rows of a
// table without a primary key cannot be reconciled while streaming: the
// stream stops with the unsupported-change error instead of going on with
// rows it knows to be wrong, and nothing is recorded.
func TestPartitionsKeylessStops(t *testing.T) {
	h := start(t, options{limits: flush.Limits{Interval: 50 * time.Millisecond, MaxRows: 1000}, manifest: func(m *manifest.Manifest) {
		m.Tables["public.items"].PrimaryKey = []string{}
		m.Tables["public.items"].Partitions = []uint32{101}
	}})
	h.push(partitionsMsg(t, startLSN+0x200, true, 101, 102)...)
	err := h.wait()
	var ce *cdc.Error
	if !errors.As(err, &ce) || !errors.Is(err, cdc.ErrSchemaChanged) || !strings.Contains(err.Error(), "public.items") {
		t.Fatalf("Run: %v, want the unsupported-change error naming the table", err)
	}
	if got := h.manifest().Tables["public.items"].Partitions; !slices.Equal(got, []uint32{101}) {
		t.Errorf("partitions recorded %v after the refusal, want the old record", got)
	}
}
