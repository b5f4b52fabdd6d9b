package replicate

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// spoolFiles lists what the service left in its state directory.
func (h *harness) spoolFiles() []string {
	h.t.Helper()
	var out []string
	err := filepath.WalkDir(h.svc.cfg.StateDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// TestSinkFailureConfirmsNothingNew checks at-least-once (design.md §1
// invariants 1 and 2): when the sink fails, the service stops with the
// error, and the confirmed position stays at the last durable manifest.
func TestSinkFailureConfirmsNothingNew(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(*flakySink)
		// idle: the failing write is an idle advance, not a flush.
		idle bool
	}{
		{name: "delta upload", fail: func(s *flakySink) { s.failPut.Store(true) }},
		{name: "manifest write", fail: func(s *flakySink) { s.failPutIf.Store(true) }},
		{name: "idle manifest write", fail: func(s *flakySink) { s.failPutIf.Store(true) }, idle: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}})
			c1, c2 := startLSN+0x100, startLSN+0x200
			h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
			h.waitFor("epoch 1 confirmed", func() bool { return h.confirmed() == endOf(c1) })
			h.waitIdle()

			tc.fail(h.sink)
			if tc.idle {
				h.push(keepalive(endOf(c1)+0x1000, false))
			} else {
				h.push(tx(502, c2, ins(itemsOID, 2, "b"))...)
			}
			err := h.wait()
			if !errors.Is(err, errSink) {
				t.Fatalf("Run: %v, want the sink error", err)
			}
			m := h.manifest()
			if m.Epoch != 1 || m.EndLSN != endOf(c1) {
				t.Errorf("manifest epoch %d end LSN %s, want 1 and %s", m.Epoch, m.EndLSN, endOf(c1))
			}
			if got := h.confirmed(); got != endOf(c1) {
				t.Errorf("confirmed %s, want %s", got, endOf(c1))
			}
			if files := h.spoolFiles(); len(files) != 0 {
				t.Errorf("spool files left behind: %v", files)
			}
		})
	}
}

// TestReceiveError checks that a broken stream stops the service with the
// error and discards what was not durable (PostgreSQL resends it).
func TestReceiveError(t *testing.T) {
	h := start(t, options{})
	c1 := startLSN + 0x100
	h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
	h.push(data(pgBegin(c1+0x100, commitTime(c1+0x100), 502), ins(itemsOID, 2, "b"))...)
	broken := errors.New("connection reset by peer")
	h.src.fail(broken)
	err := h.wait()
	if !errors.Is(err, broken) {
		t.Fatalf("Run: %v, want the receive error", err)
	}
	if m := h.manifest(); m.Epoch != 0 || m.EndLSN != startLSN {
		t.Errorf("manifest epoch %d end LSN %s, want 0 and %s", m.Epoch, m.EndLSN, startLSN)
	}
	if got := h.confirmed(); got > startLSN {
		t.Errorf("confirmed %s, want at most %s", got, startLSN)
	}
	if files := h.spoolFiles(); len(files) != 0 {
		t.Errorf("spool files left behind: %v", files)
	}
}

// TestDataErrorStops checks that a value its column cannot hold stops the
// service with cdc.ErrData and confirms nothing of its epoch.
func TestDataErrorStops(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int64
		msgs   func(c cdc.LSN) []Message
	}{
		{name: "transaction", budget: 1 << 20, msgs: func(c cdc.LSN) []Message {
			return tx(502, c, pgInsert(0, false, itemsOID, txt("not a number"), txt("x")))
		}},
		{name: "streamed transaction, spilled", budget: 1, msgs: func(c cdc.LSN) []Message {
			return data(
				pgStreamStart(700, true),
				sins(700, itemsOID, 3, "fine"),
				pgInsert(701, true, itemsOID, txt("not a number"), txt("x")),
				pgStreamStop(),
				pgStreamCommit(700, c, endOf(c), commitTime(c)),
			)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 2}, budget: tc.budget})
			c1, c2 := startLSN+0x100, startLSN+0x200
			// Txn 501 is committed but below MaxRows: it shares the epoch
			// that fails, and must not be confirmed either.
			h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
			h.push(tc.msgs(c2)...)
			err := h.wait()
			if !errors.Is(err, cdc.ErrData) {
				t.Fatalf("Run: %v, want an error matching cdc.ErrData", err)
			}
			if m := h.manifest(); m.Epoch != 0 {
				t.Errorf("manifest epoch %d, want 0", m.Epoch)
			}
			if got := h.confirmed(); got > startLSN {
				t.Errorf("confirmed %s, want at most %s", got, startLSN)
			}
			if keys := h.deltaKeys(); len(keys) != 0 {
				t.Errorf("delta files written: %v", keys)
			}
			if files := h.spoolFiles(); len(files) != 0 {
				t.Errorf("spool and spill files left behind: %v", files)
			}
		})
	}
}

// TestConcurrentManifestWriter checks that a manifest written by another
// writer between two flushes (compaction, reconcile) is merged, not
// overwritten, and the stream goes on.
func TestConcurrentManifestWriter(t *testing.T) {
	h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}})
	c1, c2 := startLSN+0x100, startLSN+0x200
	h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
	h.waitFor("epoch 1 confirmed", func() bool { return h.confirmed() == endOf(c1) })
	h.waitIdle()

	other, err := manifest.Open(context.Background(), h.store, manifest.Breaker{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Commit(context.Background(), func(m *manifest.Manifest) error {
		m.Tables["public.other"].Snapshot.State = "reconciled-by-test"
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	h.push(tx(502, c2, ins(itemsOID, 2, "b"))...)
	h.waitFor("epoch 2 confirmed", func() bool { return h.confirmed() == endOf(c2) })
	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	m := h.manifest()
	if got := m.Tables["public.other"].Snapshot.State; got != "reconciled-by-test" {
		t.Errorf("the other writer's change was lost: snapshot state %q", got)
	}
	equalStrings(t, "items deltas", deltaEpochs(m, "public.items"), []string{"1:1", "2:1"})
}

// TestIdleAdvanceRateLimited checks that idle manifest writes happen at most
// once per standby interval however many keepalives arrive.
func TestIdleAdvanceRateLimited(t *testing.T) {
	const standby = 300 * time.Millisecond
	h := start(t, options{standby: standby})
	h.waitIdle()
	var last cdc.LSN
	for i := 1; i <= 20; i++ {
		last = startLSN + cdc.LSN(i)*0x100
		h.push(keepalive(last, false))
	}
	began := time.Now()
	h.waitFor("the last keepalive confirmed", func() bool { return h.confirmed() == last })
	elapsed := time.Since(began)

	distinct := map[cdc.LSN]bool{}
	for _, st := range h.statuses() {
		if st.pos > startLSN {
			distinct[st.pos] = true
		}
	}
	if limit := 1 + int(elapsed/standby) + 1; len(distinct) > limit {
		t.Errorf("%d idle positions confirmed in %s, want at most %d (one per %s)", len(distinct), elapsed, limit, standby)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestStatusUnsent: a standby status that cannot be sent ends the session;
// with everything received durable (nothing open or buffered) the error
// says so (ErrUnconfirmed), which lets a stop end cleanly; with a
// transaction open it does not.
func TestStatusUnsent(t *testing.T) {
	broken := cdc.NewTransient("write: broken pipe")
	t.Run("quiet", func(t *testing.T) {
		h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}})
		c1 := startLSN + 0x100
		h.push(tx(501, c1, itemsRel(0, false), ins(itemsOID, 1, "a"))...)
		h.waitFor("epoch 1 confirmed", func() bool { return h.confirmed() == endOf(c1) })
		h.src.failStatus(broken)
		h.push(keepalive(endOf(c1), true))
		if err := h.wait(); !errors.Is(err, ErrUnconfirmed) || !errors.Is(err, broken) || !cdc.IsTransient(err) {
			t.Errorf("Run = %v, want ErrUnconfirmed, transient, with its cause", err)
		}
	})
	t.Run("transaction open", func(t *testing.T) {
		h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}})
		c1 := startLSN + 0x100
		h.push(data(pgBegin(c1, commitTime(c1), 502), itemsRel(0, false), ins(itemsOID, 1, "a"))...)
		h.src.failStatus(broken)
		h.push(keepalive(c1, true))
		if err := h.wait(); err == nil || errors.Is(err, ErrUnconfirmed) {
			t.Errorf("Run = %v, want an error that is not ErrUnconfirmed (a transaction is open)", err)
		}
	})
}
