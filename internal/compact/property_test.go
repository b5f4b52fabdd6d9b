package compact_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"testing"

	"pgregory.net/rapid"

	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/compact"
)

var quiet = slog.New(slog.DiscardHandler)

// model is the table as PostgreSQL holds it, with the sink's one permitted
// loss: a key change that leaves big unchanged, whose value the stream could
// not read back, is NULL and flagged.
type model map[int64]stateRow

// TestCompactionMatchesModel: random inserts, updates (some leaving big
// unchanged), deletes, key changes and truncates, written as deltas with
// replayed duplicates, compacted in random groupings with random sort
// budgets: the merged state always equals the model, and compaction never
// changes what the sink means.
func TestCompactionMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		store := memory.New()
		newManifest(t, store)
		scratch := t.TempDir()
		want := model{}
		lsn := int64(1000)
		var written [][]change // every delta written so far, for replays

		txns := rapid.IntRange(1, 40).Draw(rt, "txns")
		var pending []change
		for range txns {
			lsn += 10
			seq := int64(0)
			for range rapid.IntRange(1, 4).Draw(rt, "ops") {
				seq++
				pending = append(pending, drawChange(rt, want, lsn, seq)...)
				seq += 2 // room for a key change's two rows
			}
			if rapid.Bool().Draw(rt, "cut") {
				written = append(written, flushDelta(t, rt, store, pending, written))
				pending = nil
			}
			if rapid.IntRange(0, 3).Draw(rt, "compact") == 0 {
				runCompaction(t, rt, store, scratch)
			}
		}
		if len(pending) > 0 {
			flushDelta(t, rt, store, pending, written)
		}
		if rapid.Bool().Draw(rt, "final compact") {
			runCompaction(t, rt, store, scratch)
		}
		got := mergedState(t, store, scratch)
		if !maps.Equal(got, map[int64]stateRow(want)) {
			rt.Fatalf("merged state differs from the model\n got %v\nwant %v", got, want)
		}
	})
}

// flushDelta writes pending as one delta, sometimes with an earlier delta's
// rows replayed into it (a transaction that landed twice).
func flushDelta(t *testing.T, rt *rapid.T, store *memory.Store, pending []change, written [][]change) []change {
	rows := append([]change(nil), pending...)
	if len(written) > 0 && rapid.IntRange(0, 3).Draw(rt, "replay") == 0 {
		rows = append(rows, written[rapid.IntRange(0, len(written)-1).Draw(rt, "replayed")]...)
	}
	if len(rows) > 0 && rapid.IntRange(0, 4).Draw(rt, "dup") == 0 {
		rows = append(rows, rows[rapid.IntRange(0, len(rows)-1).Draw(rt, "dup row")])
	}
	writeDelta(t, store, rows)
	return pending
}

func runCompaction(t *testing.T, rt *rapid.T, store *memory.Store, scratch string) {
	ctx := context.Background()
	mc, err := compact.NewCommitter(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	before := mergedState(t, store, scratch)
	res, err := compact.Table(ctx, store, mc, testTable.ID, compact.Options{
		ScratchDir:      scratch,
		Log:             quiet,
		MemoryBytes:     int64(rapid.IntRange(1, 4).Draw(rt, "budget MiB")) << 20,
		TargetFileBytes: int64(rapid.SampledFrom([]int{1 << 10, 1 << 30}).Draw(rt, "target")),
	})
	if err != nil {
		rt.Fatalf("compact: %v", err)
	}
	m := mc.Current().Tables[testTable.ID.String()]
	if res.Skipped == "" && (len(m.Deltas) != 0 || m.Base == nil || m.Base.Epoch != res.Epoch) {
		rt.Fatalf("after compaction: %d deltas left, base %+v", len(m.Deltas), m.Base)
	}
	if after := mergedState(t, store, scratch); !maps.Equal(before, after) {
		rt.Fatalf("compaction changed the merged state\nbefore %v\n after %v", before, after)
	}
}

// drawChange draws one statement against the model, applies it there, and
// returns the rows the stream would write for it.
func drawChange(rt *rapid.T, m model, lsn, seq int64) []change {
	id := rapid.Int64Range(0, 4).Draw(rt, "id")
	a := rapid.Int64Range(0, 1000).Draw(rt, "a")
	big := fmt.Sprintf("big-%d-%d", lsn, seq)
	_, exists := m[id]
	switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
	case op == 0:
		clear(m)
		return []change{{op: cdc.OpTruncate, lsn: lsn, seq: seq}}
	case !exists:
		m[id] = stateRow{a: a, big: big}
		return []change{{op: cdc.OpInsert, lsn: lsn, seq: seq, id: id, a: a, big: big}}
	case op <= 2:
		delete(m, id)
		return []change{{op: cdc.OpDelete, lsn: lsn, seq: seq, id: id, keyOnly: true}}
	case op == 3:
		// UPDATE … SET id = to: a D for the old key, a U for the new one,
		// big unchanged and not recoverable.
		to := rapid.Int64Range(0, 4).Draw(rt, "to")
		if _, taken := m[to]; taken {
			return nil // PostgreSQL would refuse the duplicate key
		}
		delete(m, id)
		m[to] = stateRow{a: a, bigNull: true, bigUnset: true}
		return []change{
			{op: cdc.OpDelete, lsn: lsn, seq: seq, id: id, keyOnly: true},
			{op: cdc.OpUpdate, lsn: lsn, seq: seq + 1, id: to, a: a, bigUnset: true},
		}
	case op <= 6:
		r := m[id]
		r.a = a
		m[id] = r
		return []change{{op: cdc.OpUpdate, lsn: lsn, seq: seq, id: id, a: a, bigUnset: true}}
	default:
		m[id] = stateRow{a: a, big: big}
		return []change{{op: cdc.OpUpdate, lsn: lsn, seq: seq, id: id, a: a, big: big}}
	}
}
