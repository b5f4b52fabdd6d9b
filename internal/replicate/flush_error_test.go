package replicate

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/flush"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// TestFlushErrorAwaitsUploads: when a flush fails, Run must not return while
// a goroutine of that flush still runs (STYLE rule 9), and the epoch's spool
// files must not be removed under it. A regression test: Flush once returned
// "table is not in the manifest" from inside its upload loop without waiting
// for the uploads it had started, racing them with Epoch.Discard.
//
// The service reaches it when another writer removed a table from the
// manifest and a CAS conflict (here: on an idle advance) refreshed the
// committer's view, and a transaction then touches a table uploaded before
// the missing one.
func TestFlushErrorAwaitsUploads(t *testing.T) {
	h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}})
	c1, c2 := startLSN+0x100, startLSN+0x20000
	h.push(tx(501, c1, itemsRel(0, false), otherRel(0, false), ins(itemsOID, 1, "a"))...)
	h.waitFor("epoch 1 confirmed", func() bool { return h.confirmed() == endOf(c1) })
	h.waitIdle()

	// Another writer drops public.other from the manifest; the idle advance
	// meets the conflict and re-reads it.
	other, err := manifest.Open(context.Background(), h.store, manifest.Breaker{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Commit(context.Background(), func(m *manifest.Manifest) error {
		delete(m.Tables, "public.other")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	idle := endOf(c1) + 0x1000
	h.push(keepalive(idle, false))
	h.waitFor("idle advance", func() bool { return h.confirmed() == idle })

	// Hold the upload of epoch 2 in flight until Run has returned.
	release := make(chan struct{})
	var inFlight atomic.Int32
	hook := func(key string) {
		if strings.Contains(key, "/delta/00000002/") {
			inFlight.Add(1)
			<-release
			inFlight.Add(-1)
		}
	}
	h.sink.onPut.Store(&hook)
	defer close(release)

	h.push(tx(502, c2, ins(itemsOID, 2, "b"), ins(otherOID, 3, "c"))...)
	err = h.wait()
	if err == nil || !strings.Contains(err.Error(), "public.other") {
		t.Fatalf("Run: %v, want an error naming public.other", err)
	}
	if n := inFlight.Load(); n != 0 {
		t.Errorf("Run returned with %d delta upload(s) of its failed flush still running", n)
	}
}
