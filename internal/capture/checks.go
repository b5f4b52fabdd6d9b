package capture

import (
	"errors"
	"fmt"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/postgres"
)

// CheckIdentity refuses a database that is not the one the manifest was
// built from (design.md §1.2): another cluster behind the same address, a
// promoted standby (another timeline), another database.
func CheckIdentity(m *manifest.Manifest, id postgres.Identity) error {
	src := m.Source
	if src.SystemIdentifier != id.SystemIdentifier || src.Database != id.Database || src.Timeline != id.Timeline {
		return &cdc.Error{
			Class: cdc.ErrUpstreamMismatch,
			Msg: fmt.Sprintf("the source is system %s timeline %d database %q, the manifest was built from system %s timeline %d database %q",
				id.SystemIdentifier, id.Timeline, id.Database, src.SystemIdentifier, src.Timeline, src.Database),
			Hint: "point source.postgres.url at the original database, or use a new storage path for this one",
		}
	}
	return nil
}

// CheckOwner refuses a sink whose manifest was built through another slot
// or publication than the capture names: two streamers on one storage path
// would each write epochs the other never sees. The database itself is
// checked against the manifest once connected (CheckIdentity).
func (c *Capture) CheckOwner(m *manifest.Manifest) error {
	src := m.Source
	if src.Slot == c.Slot && src.Publication == c.Publication {
		return nil
	}
	return &cdc.Error{
		Class: cdc.ErrUpstreamMismatch,
		Msg: fmt.Sprintf("the sink %s belongs to slot %q and publication %q of database %q (system %s), but the config names slot %q and publication %q",
			c.SinkName, src.Slot, src.Publication, src.Database, src.SystemIdentifier, c.Slot, c.Publication),
		Hint: "another pg-cdc owns this storage path: give this one its own storage path (or prefix), or fix replication.slot and replication.publication",
	}
}

// CheckSlot enforces design.md §1.1 rule 5 before streaming: a missing or
// invalidated slot, or one confirmed past the manifest, means changes are
// gone; that is never a restart point. A slot in use is a SlotBusyError,
// which is transient.
func CheckSlot(name string, slot postgres.SlotInfo, m *manifest.Manifest) error {
	rebuild := "the changes since the manifest's end LSN are gone: run '" + RebuildCommand + "' (a new slot, every table copied into a new generation, validated, then switched in one manifest write; readers keep the current data until then), then 'pg-cdc start'"
	switch {
	case !slot.Exists:
		return &cdc.Error{Class: cdc.ErrSlotLost, Msg: fmt.Sprintf("replication slot %q does not exist", name), Hint: rebuild}
	case slot.WALStatus == "lost":
		return &cdc.Error{Class: cdc.ErrSlotLost, Msg: fmt.Sprintf("replication slot %q is invalidated (wal_status lost)", name), Hint: rebuild}
	case slot.ConfirmedFlushLSN > m.EndLSN:
		return &cdc.Error{Class: cdc.ErrSlotAhead,
			Msg:  fmt.Sprintf("replication slot %q is confirmed at %s, past the manifest's end LSN %s", name, slot.ConfirmedFlushLSN, m.EndLSN),
			Hint: "another consumer used the slot or it was advanced by hand; " + rebuild}
	case slot.Active:
		return &SlotBusyError{Slot: name, PID: slot.ActivePID}
	}
	return nil
}

// SlotBusyError: the slot is active for another process. It is transient:
// after a crash PostgreSQL keeps the slot active until it notices the old
// connection is gone (SQLSTATE 55006 on START_REPLICATION).
type SlotBusyError struct {
	Slot string
	PID  int32
}

func (e *SlotBusyError) Error() string {
	return fmt.Sprintf("replication slot %q is in use by PID %d", e.Slot, e.PID)
}

// Transient is true: see SlotBusyError.
func (e *SlotBusyError) Transient() bool { return true }

// IsSlotBusy reports whether err is a SlotBusyError.
func IsSlotBusy(err error) bool { return errors.As(err, new(*SlotBusyError)) }

// SlotState describes a slot a rebuild replaces, for the log and summary.
func SlotState(slot postgres.SlotInfo, m *manifest.Manifest) string {
	switch {
	case !slot.Exists:
		return "missing"
	case slot.WALStatus == "lost":
		return "invalidated (wal_status lost)"
	case slot.ConfirmedFlushLSN > m.EndLSN:
		return fmt.Sprintf("confirmed at %s, past the manifest's end LSN %s", slot.ConfirmedFlushLSN, m.EndLSN)
	default:
		return "healthy (rebuilt on request)"
	}
}

// InvalidationETA is how long, in seconds, until safeSize bytes of WAL are
// written at rate bytes per second: when max_slot_wal_keep_size would
// invalidate a slot nothing confirms. -1 when there is no limit or WAL is
// not growing.
func InvalidationETA(safeSize int64, rate float64) float64 {
	if safeSize < 0 || rate <= 0 {
		return -1
	}
	return float64(safeSize) / rate
}
