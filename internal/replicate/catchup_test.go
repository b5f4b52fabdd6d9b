package replicate

import (
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestCatchUpFlushesOnce: a session that starts behind the server flushes
// its epoch as soon as the stream reaches the server's start position
// (Config.CatchUp), without waiting out the interval (an hour here), and
// only once: later transactions are batched by the interval again.
func TestCatchUpFlushesOnce(t *testing.T) {
	c1, c2, c3 := startLSN+0x100, startLSN+0x200, startLSN+0x300
	h := start(t, options{catchUp: endOf(c2)})

	h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
	h.waitIdle()
	h.waitTurns(2)
	if e := h.manifest().Epoch; e != 0 {
		t.Fatalf("epoch %d before the stream reached the catch-up position, want 0", e)
	}
	h.push(tx(502, c2, ins(itemsOID, 2, "b"))...)
	h.waitFor("the caught-up flush", func() bool { return h.manifest().Epoch == 1 })
	h.waitFor("its confirmation", func() bool { return h.confirmed() == endOf(c2) })

	h.push(tx(503, c3, ins(itemsOID, 3, "c"))...)
	h.push(keepalive(endOf(c3), false))
	h.waitIdle()
	h.waitTurns(2)
	if e := h.manifest().Epoch; e != 1 {
		t.Fatalf("epoch %d after catching up, want 1 (the interval decides again)", e)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	equalStrings(t, "items deltas", deltaEpochs(h.manifest(), "public.items"), []string{"1:2", "2:1"})
}

// TestCatchUpByKeepalive: when WAL the slot does not capture (other
// databases, other tables) follows the backlog's last transaction, the
// keepalive that reports the server past the start position triggers the
// flush.
func TestCatchUpByKeepalive(t *testing.T) {
	c1 := startLSN + 0x100
	catchUp := startLSN + 0x10000
	h := start(t, options{catchUp: catchUp})

	h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
	h.push(keepalive(catchUp-1, false))
	h.waitIdle()
	h.waitTurns(2)
	if e := h.manifest().Epoch; e != 0 {
		t.Fatalf("epoch %d before the server reported the catch-up position, want 0", e)
	}
	h.push(keepalive(catchUp, false))
	h.waitFor("the caught-up flush", func() bool { return h.manifest().Epoch == 1 })
	if got := h.manifest().EndLSN; got != endOf(c1) && got != catchUp {
		t.Errorf("manifest end LSN %s, want %s (or the idle position %s)", got, endOf(c1), catchUp)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestNoCatchUpWhenNotBehind: a zero Config.CatchUp (or one the manifest has
// passed) changes nothing.
func TestNoCatchUpWhenNotBehind(t *testing.T) {
	c1 := startLSN + 0x100
	h := start(t, options{catchUp: 0})
	h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
	h.push(keepalive(endOf(c1)+cdc.LSN(0x1000), false))
	h.waitIdle()
	h.waitTurns(2)
	if e := h.manifest().Epoch; e != 0 {
		t.Fatalf("epoch %d without a catch-up position, want 0 (interval of an hour)", e)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestNoCatchUpForLiveTraffic: a session that starts with nothing to catch
// up on (the first transaction it receives committed after the server's
// start position) does not flush that transaction early: it is live
// traffic, batched by the interval, and a crash before the interval loses
// nothing because nothing was confirmed.
func TestNoCatchUpForLiveTraffic(t *testing.T) {
	c1 := startLSN + 0x100
	h := start(t, options{catchUp: startLSN + 0x10})
	h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
	h.push(keepalive(endOf(c1), false))
	h.waitIdle()
	h.waitTurns(2)
	if e := h.manifest().Epoch; e != 0 {
		t.Fatalf("epoch %d: a transaction after the catch-up position was flushed early", e)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
