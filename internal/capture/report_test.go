package capture

import (
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// An init on a capture that exists says so, and names the tables the
// configuration covers that start will backfill.
func TestInitResultPending(t *testing.T) {
	m := &manifest.Manifest{Tables: map[string]*manifest.Table{"public.a": {}}}
	var b strings.Builder
	(&InitResult{Already: m}).WriteText(&b, "slot", "/sink")
	if !strings.Contains(b.String(), "nothing changed") || strings.Contains(b.String(), "not captured yet") {
		t.Errorf("already initialized, nothing pending:\n%s", b.String())
	}
	b.Reset()
	(&InitResult{Already: m, Pending: []cdc.TableID{{Schema: "public", Name: "b"}, {Schema: "public", Name: "Order Items"}}}).WriteText(&b, "slot", "/sink")
	if !strings.Contains(b.String(), `not captured yet: public.b, public."Order Items"; pg-cdc start adds each to the publication and backfills it`) {
		t.Errorf("already initialized, two tables pending:\n%s", b.String())
	}
}
