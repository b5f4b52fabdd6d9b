package capture

import (
	"errors"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// TestCheckSlot: a missing, invalidated or advanced slot is terminal and
// names the slot and rebuild; one in use is transient (the previous
// session's walsender); a healthy one passes, confirmed at or behind the
// manifest.
func TestCheckSlot(t *testing.T) {
	m := &manifest.Manifest{EndLSN: 0x500}
	for _, c := range []struct {
		name      string
		slot      postgres.SlotInfo
		class     error
		transient bool
	}{
		{"missing", postgres.SlotInfo{}, cdc.ErrSlotLost, false},
		{"invalidated", postgres.SlotInfo{Exists: true, WALStatus: "lost", ConfirmedFlushLSN: 0x400}, cdc.ErrSlotLost, false},
		{"ahead of the manifest", postgres.SlotInfo{Exists: true, WALStatus: "reserved", ConfirmedFlushLSN: 0x501}, cdc.ErrSlotAhead, false},
		{"in use", postgres.SlotInfo{Exists: true, WALStatus: "reserved", ConfirmedFlushLSN: 0x500, Active: true, ActivePID: 77}, nil, true},
		{"healthy at the manifest", postgres.SlotInfo{Exists: true, WALStatus: "reserved", ConfirmedFlushLSN: 0x500}, nil, false},
		{"healthy behind it", postgres.SlotInfo{Exists: true, WALStatus: "extended", ConfirmedFlushLSN: 0x100}, nil, false},
	} {
		err := CheckSlot("pg_cdc_slot", c.slot, m)
		switch {
		case c.class != nil:
			if !errors.Is(err, c.class) || !strings.Contains(err.Error(), `"pg_cdc_slot"`) || !strings.Contains(cdc.HintOf(err), RebuildCommand) {
				t.Errorf("%s: %v (hint %q), want %v naming the slot and rebuild", c.name, err, cdc.HintOf(err), c.class)
			}
		case c.transient:
			if !IsSlotBusy(err) || !cdc.IsTransient(err) || !strings.Contains(err.Error(), "PID 77") {
				t.Errorf("%s: %v, want a transient SlotBusyError", c.name, err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		}
		if c.class != nil && cdc.IsTransient(err) {
			t.Errorf("%s is retried", c.name)
		}
	}
}

// TestCheckOwner: a sink belongs to the slot and publication its manifest
// names; another capture's sink is refused (exit 12), naming both.
func TestCheckOwner(t *testing.T) {
	c := &Capture{Slot: "pg_cdc_slot", Publication: "pg_cdc_pub", SinkName: "s3://b/app"}
	mine := &manifest.Manifest{Source: manifest.Source{SystemIdentifier: "7", Database: "app", Slot: "pg_cdc_slot", Publication: "pg_cdc_pub"}}
	if err := c.CheckOwner(mine); err != nil {
		t.Fatalf("its own sink: %v", err)
	}
	for _, src := range []manifest.Source{
		{SystemIdentifier: "7", Database: "app", Slot: "other_slot", Publication: "pg_cdc_pub"},
		{SystemIdentifier: "7", Database: "app", Slot: "pg_cdc_slot", Publication: "other_pub"},
	} {
		err := c.CheckOwner(&manifest.Manifest{Source: src})
		if !errors.Is(err, cdc.ErrUpstreamMismatch) || !strings.Contains(err.Error(), "s3://b/app") ||
			!strings.Contains(err.Error(), src.Slot) || !strings.Contains(err.Error(), src.Publication) || cdc.HintOf(err) == "" {
			t.Errorf("sink of %+v: %v", src, err)
		}
	}
}

// TestCheckIdentity: another cluster, a promoted standby (another
// timeline) and another database are each refused.
func TestCheckIdentity(t *testing.T) {
	m := &manifest.Manifest{Source: manifest.Source{SystemIdentifier: "7440312345678901234", Timeline: 1, Database: "app"}}
	same := postgres.Identity{SystemIdentifier: "7440312345678901234", Timeline: 1, Database: "app"}
	if err := CheckIdentity(m, same); err != nil {
		t.Fatal(err)
	}
	for _, id := range []postgres.Identity{
		{SystemIdentifier: "7440312345678909999", Timeline: 1, Database: "app"},
		{SystemIdentifier: "7440312345678901234", Timeline: 2, Database: "app"},
		{SystemIdentifier: "7440312345678901234", Timeline: 1, Database: "other"},
	} {
		if err := CheckIdentity(m, id); !errors.Is(err, cdc.ErrUpstreamMismatch) || cdc.IsTransient(err) {
			t.Errorf("%+v: %v", id, err)
		}
	}
}
