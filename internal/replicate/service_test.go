package replicate

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/pgoutput"
)

// ins is an INSERT of a non-streamed transaction.
func ins(relID uint32, id int, v string) []byte {
	return pgInsert(0, false, relID, txt(fmt.Sprint(id)), txt(v))
}

// sins is an INSERT inside a stream block, made by (sub)transaction xid.
func sins(xid uint32, relID uint32, id int, v string) []byte {
	return pgInsert(xid, true, relID, txt(fmt.Sprint(id)), txt(v))
}

func equalRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

func equalStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

// TestConfirmNeverPassesManifest checks design.md §1 invariant 1 across flushes
// cut by rows and by interval, with keepalives asking for replies while
// transactions are received and buffered: every position sent is at most
// the manifest's end LSN stored at that moment (the harness checks every
// status), and each flush is confirmed once its manifest is written.
func TestConfirmNeverPassesManifest(t *testing.T) {
	h := start(t, options{limits: flush.Limits{Interval: 50 * time.Millisecond, MaxRows: 3}})
	c1, c2, c3 := startLSN+0x100, startLSN+0x200, startLSN+0x300

	// One row: below MaxRows, so only the interval flushes it. A reply
	// request while the epoch is pending must report the manifest's
	// position, not the received one.
	h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
	h.push(keepalive(c1, true))
	h.waitFor("epoch 1 (interval)", func() bool { return h.manifest().Epoch == 1 })
	h.waitFor("epoch 1 confirmed", func() bool { return h.confirmed() == endOf(c1) })

	// Three rows reach MaxRows at commit: that flush is cut before the next
	// transaction is read, so epoch 2 holds txn 502 alone, and txn 503 (one
	// row) waits for the interval in epoch 3.
	h.push(tx(502, c2, ins(itemsOID, 2, "b"), ins(itemsOID, 3, "c"), ins(itemsOID, 4, "d"))...)
	h.push(tx(503, c3, ins(itemsOID, 5, "e"))...)
	h.push(keepalive(endOf(c3), true))
	h.waitFor("epoch 3 (interval)", func() bool { return h.manifest().Epoch == 3 })
	h.waitFor("epoch 3 confirmed", func() bool { return h.confirmed() == endOf(c3) })

	m := h.manifest()
	equalStrings(t, "items deltas", deltaEpochs(m, "public.items"), []string{"1:1", "2:3", "3:1"})
	for i, want := range []cdc.LSN{endOf(c1), endOf(c2), endOf(c3)} {
		if got := m.History[i].EndLSN; got != want {
			t.Errorf("history[%d].end_lsn = %s, want %s", i, got, want)
		}
		// Every epoch's end was confirmed, and only once the manifest held it.
		st, ok := h.sentPosition(want)
		if !ok {
			t.Errorf("end LSN %s of epoch %d was never confirmed", want, i+1)
		} else if st.epoch != uint64(i+1) {
			t.Errorf("end LSN %s first confirmed with the manifest at epoch %d, want %d", want, st.epoch, i+1)
		}
	}
	// The keepalives' positions equal the transactions' ends: no idle
	// advance beyond them may have happened.
	if m.EndLSN != endOf(c3) {
		t.Errorf("manifest end LSN %s, want %s", m.EndLSN, endOf(c3))
	}
	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestWholeTransactionsPerEpoch checks design.md §1 invariant 3: with a tiny
// MaxRows, a transaction larger than it is never split, small transactions
// share an epoch, and a transaction spanning two tables lands in one epoch
// for both.
func TestWholeTransactionsPerEpoch(t *testing.T) {
	h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 2}})
	cA, cB, cC, cD, cE := startLSN+0x100, startLSN+0x200, startLSN+0x300, startLSN+0x400, startLSN+0x500

	h.push(tx(601, cA, itemsRel(0, false), otherRel(0, false),
		ins(itemsOID, 1, "a1"), ins(otherOID, 10, "o10"), ins(itemsOID, 2, "a2"), ins(otherOID, 11, "o11"), ins(itemsOID, 3, "a3"))...)
	// PostgreSQL resends an unchanged Relation after a cache invalidation;
	// that is not a schema change.
	h.push(tx(602, cB, itemsRel(0, false), ins(itemsOID, 4, "b4"), ins(itemsOID, 5, "b5"), ins(itemsOID, 6, "b6"))...)
	h.push(tx(603, cC, ins(itemsOID, 7, "c7"))...)
	h.push(tx(604, cD, ins(otherOID, 12, "d12"))...)
	h.push(tx(605, cE, ins(itemsOID, 8, "e8"))...)
	h.waitIdle()

	m := h.manifest()
	if m.Epoch != 3 {
		t.Fatalf("manifest epoch %d before the stop, want 3 (txn 605 is below MaxRows)", m.Epoch)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	m = h.manifest()
	if m.Epoch != 4 || m.EndLSN != endOf(cE) {
		t.Fatalf("after the stop: epoch %d end LSN %s, want 4 and %s", m.Epoch, m.EndLSN, endOf(cE))
	}
	if got := h.confirmed(); got != endOf(cE) {
		t.Errorf("confirmed %s after the stop, want %s", got, endOf(cE))
	}
	equalStrings(t, "items deltas", deltaEpochs(m, "public.items"), []string{"1:3", "2:3", "3:1", "4:1"})
	equalStrings(t, "other deltas", deltaEpochs(m, "public.other"), []string{"1:2", "3:1"})
	var ends []cdc.LSN
	for _, r := range m.History {
		ends = append(ends, r.EndLSN)
	}
	if want := []cdc.LSN{endOf(cA), endOf(cB), endOf(cD), endOf(cE)}; !slices.Equal(ends, want) {
		t.Errorf("history end LSNs %v, want %v", ends, want)
	}

	equalRows(t, "items epoch 1", h.rows(m, "public.items", 1), []string{
		row("I", "1", "a1", cA, 0, 601), row("I", "2", "a2", cA, 2, 601), row("I", "3", "a3", cA, 4, 601),
	})
	equalRows(t, "other epoch 1", h.rows(m, "public.other", 1), []string{
		row("I", "10", "o10", cA, 1, 601), row("I", "11", "o11", cA, 3, 601),
	})
	equalRows(t, "items epoch 2", h.rows(m, "public.items", 2), []string{
		row("I", "4", "b4", cB, 0, 602), row("I", "5", "b5", cB, 1, 602), row("I", "6", "b6", cB, 2, 602),
	})
	equalRows(t, "items epoch 3", h.rows(m, "public.items", 3), []string{row("I", "7", "c7", cC, 0, 603)})
	equalRows(t, "other epoch 3", h.rows(m, "public.other", 3), []string{row("I", "12", "d12", cD, 0, 604)})
	equalRows(t, "items epoch 4", h.rows(m, "public.items", 4), []string{row("I", "8", "e8", cE, 0, 605)})
}

// TestStreamedTransactions interleaves a streamed transaction with a normal
// one, aborts one of its subtransactions, commits it, and aborts another
// streamed transaction whole. Run with the memory budget large and tiny (so
// every change is spilled).
func TestStreamedTransactions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int64
	}{{"memory", 1 << 20}, {"spilled", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}, budget: tc.budget})
			c702, c700 := startLSN+0x100, startLSN+0x900

			h.push(data(
				pgStreamStart(700, true),
				itemsRel(700, true),
				sins(700, itemsOID, 1, "top"),   // seq 0
				sins(701, itemsOID, 2, "sub-1"), // seq 1, aborted below
				pgStreamStop(),
			)...)
			h.push(tx(702, c702, ins(itemsOID, 100, "plain"))...)
			h.push(data(
				pgStreamStart(700, false),
				sins(701, itemsOID, 3, "sub-2"), // seq 2, aborted below
				sins(700, itemsOID, 4, "top-2"), // seq 3
				pgStreamStop(),
				pgStreamAbort(700, 701),
				pgStreamStart(700, false),
				sins(703, itemsOID, 5, "sub-3"), // seq 4, committed subtransaction
				pgStreamStop(),
			)...)
			h.waitIdle()
			if m := h.manifest(); m.Epoch != 1 || m.EndLSN != endOf(c702) {
				t.Fatalf("before the stream commit: epoch %d end LSN %s, want 1 and %s", m.Epoch, m.EndLSN, endOf(c702))
			}
			h.push(data(pgStreamCommit(700, c700, endOf(c700), commitTime(c700)))...)
			h.waitFor("epoch 2", func() bool { return h.manifest().Epoch == 2 })

			// A streamed transaction aborted whole leaves nothing.
			h.push(data(
				pgStreamStart(800, true),
				sins(800, itemsOID, 200, "gone"),
				sins(801, itemsOID, 201, "gone"),
				pgStreamStop(),
				pgStreamStart(800, false),
				sins(800, itemsOID, 202, "gone"),
				pgStreamStop(),
				pgStreamAbort(800, 800),
			)...)
			h.waitIdle()

			m := h.manifest()
			equalRows(t, "items epoch 1", h.rows(m, "public.items", 1), []string{row("I", "100", "plain", c702, 0, 702)})
			equalRows(t, "items epoch 2", h.rows(m, "public.items", 2), []string{
				row("I", "1", "top", c700, 0, 700),
				row("I", "4", "top-2", c700, 3, 700),
				row("I", "5", "sub-3", c700, 4, 700),
			})
			if m.Epoch != 2 || m.EndLSN != endOf(c700) {
				t.Errorf("after the abort: epoch %d end LSN %s, want 2 and %s", m.Epoch, m.EndLSN, endOf(c700))
			}
			equalStrings(t, "delta files", h.deltaKeys(), []string{
				"public/items/g0001/delta/00000001/part-00000.parquet",
				"public/items/g0001/delta/00000002/part-00000.parquet",
			})

			// Nothing of 800 is pending any more: the idle rule applies again.
			idle := endOf(c700) + 0x1000
			h.push(keepalive(idle, false))
			h.waitFor("idle advance after the abort", func() bool { return h.confirmed() == idle })
			if err := h.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if m := h.manifest(); m.Epoch != 2 {
				t.Errorf("epoch %d after the stop, want 2", m.Epoch)
			}
		})
	}
}

// TestKeyChangeAndTruncate checks design.md §4: an UPDATE that changes the key
// becomes D (old key) then U; an UPDATE with the full old row and the same
// key is a U only; TRUNCATE writes a T row in each truncated table.
func TestKeyChangeAndTruncate(t *testing.T) {
	h := start(t, options{})
	c := startLSN + 0x100
	h.push(tx(900, c,
		itemsRel(0, false), otherRel(0, false),
		ins(itemsOID, 1, "a"),
		pgUpdate(0, false, itemsOID, 'K', []col{txt("1"), null}, []col{txt("2"), txt("b")}),
		pgUpdate(0, false, itemsOID, 0, nil, []col{txt("2"), txt("c")}),
		pgUpdate(0, false, itemsOID, 'O', []col{txt("2"), txt("c")}, []col{txt("2"), txt("d")}),
		pgDelete(0, false, itemsOID, 'K', txt("2"), null),
		ins(otherOID, 10, "x"),
		pgTruncate(0, false, itemsOID, otherOID),
	)...)
	h.waitIdle()
	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	m := h.manifest()
	equalRows(t, "items", h.rows(m, "public.items", 1), []string{
		row("I", "1", "a", c, 0, 900),
		row("D", "1", "null", c, 1, 900),
		row("U", "2", "b", c, 2, 900),
		row("U", "2", "c", c, 3, 900),
		row("U", "2", "d", c, 4, 900),
		row("D", "2", "null", c, 5, 900),
		row("T", "null", "null", c, 7, 900),
	})
	equalRows(t, "other", h.rows(m, "public.other", 1), []string{
		row("I", "10", "x", c, 6, 900),
		row("T", "null", "null", c, 8, 900),
	})
}

// TestIdleAdvance checks the idle rule of design.md §1 as docs/decisions.md
// refines it: the idle position is committed to the manifest (no new epoch,
// no files) before it is confirmed, and only when nothing is pending.
func TestIdleAdvance(t *testing.T) {
	t.Run("after a flush", func(t *testing.T) {
		h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}})
		c1 := startLSN + 0x100
		h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
		h.waitFor("epoch 1 confirmed", func() bool { return h.confirmed() == endOf(c1) })

		flushed := h.manifest().FreshAsOf
		if want := h.manifest().History[0].MaxCommitTime; flushed.IsZero() || !flushed.Equal(want) {
			t.Errorf("after the flush the manifest is fresh as of %v, want its newest commit time %v", flushed, want)
		}
		// A keepalive behind the durable position changes nothing.
		h.push(keepalive(c1, false))
		idle := endOf(c1) + 0x10000
		// The server reported the idle position at serverAt: with nothing
		// pending, the sink then holds every transaction committed up to it.
		serverAt := flushed.Add(time.Hour)
		ka := keepalive(idle, false)
		ka.ServerTime = serverAt
		h.push(ka)
		h.waitFor("idle position confirmed", func() bool { return h.confirmed() == idle })
		if got := h.manifest().FreshAsOf; !got.Equal(serverAt) {
			t.Errorf("after the idle advance the manifest is fresh as of %v, want the keepalive's server time %v", got, serverAt)
		}

		st, _ := h.sentPosition(idle)
		if st.manifestEnd != idle || st.epoch != 1 {
			t.Errorf("idle position %s confirmed with the manifest at %s epoch %d, want it recorded first (end %s, epoch 1)",
				idle, st.manifestEnd, st.epoch, idle)
		}
		m := h.manifest()
		if m.Epoch != 1 || len(m.History) != 1 || len(m.Tables["public.items"].Deltas) != 1 {
			t.Errorf("idle advance changed more than the end LSN: epoch %d, history %d, deltas %v",
				m.Epoch, len(m.History), deltaEpochs(m, "public.items"))
		}
		// Later transactions still flush as the next epoch.
		c2 := idle + 0x100
		h.push(tx(502, c2, ins(itemsOID, 2, "b"))...)
		h.waitFor("epoch 2 confirmed", func() bool { return h.confirmed() == endOf(c2) })
		if m := h.manifest(); m.Epoch != 2 {
			t.Errorf("epoch %d, want 2", m.Epoch)
		}
		if err := h.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})

	t.Run("open streamed transaction", func(t *testing.T) {
		h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}})
		h.push(data(
			pgStreamStart(700, true),
			itemsRel(700, true),
			sins(700, itemsOID, 1, "open"),
			pgStreamStop(),
		)...)
		idle := startLSN + 0x10000
		h.push(keepalive(idle, true))
		h.waitIdle()
		h.waitTurns(5) // 5 × the 10 ms standby interval: the idle rule ran
		if got := h.confirmed(); got != startLSN {
			t.Fatalf("confirmed %s while a streamed transaction was open, want %s", got, startLSN)
		}
		if m := h.manifest(); m.EndLSN != startLSN {
			t.Fatalf("manifest end LSN %s while a streamed transaction was open, want %s", m.EndLSN, startLSN)
		}
		// Its abort leaves nothing pending: now the position may advance.
		h.push(data(pgStreamAbort(700, 700))...)
		h.waitFor("idle advance after the abort", func() bool { return h.confirmed() == idle })
		if err := h.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})

	t.Run("pending epoch", func(t *testing.T) {
		h := start(t, options{})
		c1 := startLSN + 0x100
		h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
		idle := endOf(c1) + 0x10000
		h.push(keepalive(idle, true))
		h.waitIdle()
		h.waitTurns(5)
		if got := h.confirmed(); got != startLSN {
			t.Fatalf("confirmed %s with an unflushed epoch, want %s", got, startLSN)
		}
		// The drain flushes and confirms the epoch; it does not advance to
		// the idle position.
		if err := h.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := h.confirmed(); got != endOf(c1) {
			t.Errorf("confirmed %s after the stop, want %s", got, endOf(c1))
		}
	})

	t.Run("logical message", func(t *testing.T) {
		h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}})
		// A transactional message inside a transaction is not a position.
		c1 := startLSN + 0x100
		h.push(tx(501, c1, itemsRel(0, false), pgLogical(0, false, true, c1+0x10000, "app", "in txn"), ins(itemsOID, 1, "a"))...)
		h.waitIdle()
		h.waitTurns(5)
		if got := h.confirmed(); got != endOf(c1) {
			t.Fatalf("confirmed %s, want %s (a transactional message is no idle position)", got, endOf(c1))
		}
		// A non-transactional one is.
		marker := endOf(c1) + 0x200
		h.push(data(pgLogical(0, false, false, marker, "pg-cdc", "heartbeat"))...)
		h.waitFor("marker confirmed", func() bool { return h.confirmed() == marker })
		st, _ := h.sentPosition(marker)
		if st.manifestEnd != marker || st.epoch != 1 {
			t.Errorf("marker %s confirmed with the manifest at %s epoch %d, want %s epoch 1", marker, st.manifestEnd, st.epoch, marker)
		}
		if err := h.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// TestGracefulStop checks the drain of design.md §1: a stop inside a
// transaction finishes reading it, flushes, confirms and returns nil.
func TestGracefulStop(t *testing.T) {
	t.Run("inside a transaction", func(t *testing.T) {
		h := start(t, options{})
		c := startLSN + 0x100
		h.push(data(pgBegin(c, commitTime(c), 501), itemsRel(0, false), ins(itemsOID, 1, "a"))...)
		h.waitIdle()
		h.cancel()
		h.waitTurns(3)
		if !h.running() {
			t.Fatalf("Run returned %v inside a transaction, before its COMMIT", h.result)
		}
		h.push(data(ins(itemsOID, 2, "b"), pgCommit(c, endOf(c), commitTime(c)))...)
		// The stop takes effect at that COMMIT: the next transaction, already
		// sent, stays unread (PostgreSQL resends it after the restart).
		next := tx(502, c+0x100, ins(itemsOID, 3, "c"))
		h.push(next...)
		if err := h.wait(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		h.src.mu.Lock()
		unread := len(h.src.queue)
		h.src.mu.Unlock()
		if unread != len(next) {
			t.Errorf("%d messages left unread after the stop, want %d (the next transaction)", unread, len(next))
		}
		m := h.manifest()
		if m.Epoch != 1 || m.EndLSN != endOf(c) {
			t.Fatalf("epoch %d end LSN %s, want 1 and %s", m.Epoch, m.EndLSN, endOf(c))
		}
		equalRows(t, "items", h.rows(m, "public.items", 1), []string{row("I", "1", "a", c, 0, 501), row("I", "2", "b", c, 1, 501)})
		st := h.statuses()
		if last := st[len(st)-1]; last.pos != endOf(c) {
			t.Errorf("final status %s, want %s", last.pos, endOf(c))
		}
	})

	t.Run("nothing pending", func(t *testing.T) {
		h := start(t, options{})
		h.waitIdle()
		began := time.Now()
		if err := h.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if d := time.Since(began); d > time.Second {
			t.Errorf("stop took %s", d)
		}
		if m := h.manifest(); m.Epoch != 0 || m.EndLSN != startLSN {
			t.Errorf("epoch %d end LSN %s, want 0 and %s", m.Epoch, m.EndLSN, startLSN)
		}
		st := h.statuses()
		if len(st) == 0 || st[len(st)-1].pos != startLSN {
			t.Errorf("final status %v, want %s", st, startLSN)
		}
	})

	t.Run("streamed transaction open", func(t *testing.T) {
		// A streamed transaction that has not committed is PostgreSQL's to
		// resend: the stop does not wait for it, and keeps what committed.
		h := start(t, options{})
		c := startLSN + 0x100
		h.push(tx(501, c, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
		h.push(data(pgStreamStart(700, true), sins(700, itemsOID, 2, "open"), pgStreamStop())...)
		h.waitIdle()
		if err := h.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		m := h.manifest()
		if m.Epoch != 1 || m.EndLSN != endOf(c) {
			t.Fatalf("epoch %d end LSN %s, want 1 and %s", m.Epoch, m.EndLSN, endOf(c))
		}
		equalRows(t, "items", h.rows(m, "public.items", 1), []string{row("I", "1", "a", c, 0, 501)})
	})

	t.Run("drain timeout", func(t *testing.T) {
		h := start(t, options{drain: 50 * time.Millisecond})
		c := startLSN + 0x100
		h.push(data(pgBegin(c, commitTime(c), 501), itemsRel(0, false), ins(itemsOID, 1, "a"))...)
		h.waitIdle()
		err := h.stop()
		if err == nil || !strings.Contains(err.Error(), "still open") {
			t.Fatalf("Run: %v, want a drain error naming the open transaction", err)
		}
		if m := h.manifest(); m.Epoch != 0 || m.EndLSN != startLSN {
			t.Errorf("epoch %d end LSN %s, want 0 and %s", m.Epoch, m.EndLSN, startLSN)
		}
		if got := h.confirmed(); got > startLSN {
			t.Errorf("confirmed %s, want at most %s", got, startLSN)
		}
		if keys := h.deltaKeys(); len(keys) != 0 {
			t.Errorf("delta files written: %v", keys)
		}
	})
}

// TestHardErrors checks that schema differences and DML for undescribed
// relations stop the service with an error, and confirm nothing new.
func TestHardErrors(t *testing.T) {
	c := startLSN + 0x100
	begin := pgBegin(c, commitTime(c), 501)
	for _, tc := range []struct {
		name   string
		msgs   []Message
		class  error  // nil: any error
		naming string // the error names this
	}{
		{
			name: "column renamed without a catalog",
			msgs: data(begin, pgRelation(0, false, itemsOID, "public", "items",
				relCol{Key: true, Name: "id", TypeOID: oidInt8, TypeMod: -1},
				relCol{Name: "w", TypeOID: oidText, TypeMod: -1})),
			class: cdc.ErrSchemaChanged, naming: "public.items",
		},
		{
			name: "column added with a volatile default",
			msgs: data(begin, pgRelation(0, false, itemsOID, "public", "items",
				relCol{Key: true, Name: "id", TypeOID: oidInt8, TypeMod: -1},
				relCol{Name: "v", TypeOID: oidText, TypeMod: -1},
				relCol{Name: "r", TypeOID: oidText, TypeMod: -1})),
			class: cdc.ErrSchemaChanged, naming: `column "r" was added with a volatile default`,
		},
		{
			name: "key column renamed",
			msgs: data(begin, pgRelation(0, false, itemsOID, "public", "items",
				relCol{Key: true, Name: "key", TypeOID: oidInt8, TypeMod: -1},
				relCol{Name: "v", TypeOID: oidText, TypeMod: -1})),
			class: cdc.ErrSchemaChanged, naming: `key column "id" was renamed`,
		},
		{
			name: "key column dropped",
			msgs: data(begin, pgRelation(0, false, itemsOID, "public", "items",
				relCol{Name: "v", TypeOID: oidText, TypeMod: -1})),
			class: cdc.ErrSchemaChanged, naming: "public.items",
		},
		{
			name: "column type changed",
			msgs: data(begin, pgRelation(0, false, itemsOID, "public", "items",
				relCol{Key: true, Name: "id", TypeOID: oidInt8, TypeMod: -1},
				relCol{Name: "v", TypeOID: oidInt4, TypeMod: -1})),
			class: cdc.ErrSchemaChanged, naming: "public.items",
		},
		{
			name: "column added without a catalog",
			msgs: data(begin, pgRelation(0, false, itemsOID, "public", "items",
				relCol{Key: true, Name: "id", TypeOID: oidInt8, TypeMod: -1},
				relCol{Name: "v", TypeOID: oidText, TypeMod: -1},
				relCol{Name: "extra", TypeOID: oidText, TypeMod: -1})),
			class: cdc.ErrSchemaChanged, naming: "public.items",
		},
		{
			name: "relation OID differs",
			msgs: data(begin, pgRelation(0, false, 99999, "public", "items",
				relCol{Key: true, Name: "id", TypeOID: oidInt8, TypeMod: -1},
				relCol{Name: "v", TypeOID: oidText, TypeMod: -1})),
			class: cdc.ErrSchemaChanged, naming: "public.items",
		},
		{
			// The Relation alone is not the error (a partition is described
			// beside its captured root); a change of the table is.
			name: "table not in the manifest",
			msgs: data(begin, pgRelation(0, false, 17000, "public", "ghost",
				relCol{Key: true, Name: "id", TypeOID: oidInt8, TypeMod: -1}, relCol{Name: "v", TypeOID: oidText, TypeMod: -1}), ins(17000, 1, "a")),
			class: cdc.ErrSchemaChanged, naming: "public.ghost",
		},
		{
			name: "relation differs inside a stream",
			msgs: data(pgStreamStart(700, true), pgRelation(700, true, itemsOID, "public", "items",
				relCol{Key: true, Name: "id", TypeOID: oidInt4, TypeMod: -1},
				relCol{Name: "v", TypeOID: oidText, TypeMod: -1})),
			class: cdc.ErrSchemaChanged, naming: "public.items",
		},
		{
			name:   "DML before any Relation",
			msgs:   data(begin, ins(itemsOID, 1, "a")),
			class:  pgoutput.ErrProtocol,
			naming: fmt.Sprint(itemsOID),
		},
		{
			name:   "streamed DML before any Relation",
			msgs:   data(pgStreamStart(700, true), sins(700, itemsOID, 1, "a")),
			class:  pgoutput.ErrProtocol,
			naming: fmt.Sprint(itemsOID),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}}
			if tc.name == "column added with a volatile default" {
				o.catalog = fakeCatalog{"r": {Name: "r", TypeOID: oidText, TypeMod: -1, PGType: "text", AttNum: 3, VolatileDefault: true}}
			}
			if tc.name == "key column renamed" {
				// The catalog says key has id's attnum (1, its field id).
				o.catalog = fakeCatalog{"key": {Name: "key", TypeOID: oidInt8, TypeMod: -1, PGType: "bigint", AttNum: 1}}
			}
			h := start(t, o)
			// A committed transaction first: its confirmation must survive,
			// and nothing after it may be confirmed.
			c0 := startLSN + 0x10
			if !strings.Contains(tc.name, "before any Relation") {
				h.push(tx(500, c0, itemsRel(0, false), ins(itemsOID, 7, "ok"))...)
				h.waitFor("epoch 1 confirmed", func() bool { return h.confirmed() == endOf(c0) })
			}
			h.push(tc.msgs...)
			err := h.wait()
			if err == nil {
				t.Fatal("Run returned nil, want an error")
			}
			if !errors.Is(err, tc.class) {
				t.Errorf("Run: %v, want an error matching %v", err, tc.class)
			}
			if !strings.Contains(err.Error(), tc.naming) {
				t.Errorf("Run: %v, want it to name %s", err, tc.naming)
			}
			if errors.Is(err, cdc.ErrSchemaChanged) && cdc.HintOf(err) == "" {
				t.Errorf("Run: %v has no operator hint", err)
			}
			if got, m := h.confirmed(), h.manifest(); got > m.EndLSN || m.EndLSN > endOf(c0) {
				t.Errorf("confirmed %s, manifest end LSN %s: want both at most %s", got, m.EndLSN, endOf(c0))
			}
		})
	}
}
