package cdc

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Snapshot is a PostgreSQL MVCC snapshot as pg_current_snapshot() reports it
// ("xmin:xmax:xip,…", 64-bit transaction ids): which transactions had
// committed when it was taken.
type Snapshot struct {
	Xmin XID   // every transaction below it had ended
	Xmax XID   // no transaction at or above it had ended
	Xip  []XID // transactions in [Xmin, Xmax) still in progress, ascending
}

// Visible reports whether the changes of transaction xid are visible in the
// snapshot, assuming xid committed (aborted transactions never reach the
// sink): it is below Xmin, or below Xmax and not in progress. XID 0 marks
// rows of the initial snapshot (design.md §4), older than any snapshot taken
// since, so it is always visible.
func (s Snapshot) Visible(xid XID) bool {
	switch {
	case xid == 0 || xid < s.Xmin:
		return true
	case xid >= s.Xmax:
		return false
	}
	_, inProgress := slices.BinarySearch(s.Xip, xid)
	return !inProgress
}

// String returns the snapshot in pg_current_snapshot()'s text form.
func (s Snapshot) String() string {
	var b strings.Builder
	b.WriteString(strconv.FormatUint(uint64(s.Xmin), 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatUint(uint64(s.Xmax), 10))
	b.WriteByte(':')
	for i, x := range s.Xip {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	}
	return b.String()
}

// ParseSnapshot parses pg_current_snapshot()'s text form. It checks what
// Visible relies on: xmin ≤ xmax, and every in-progress id in [xmin, xmax).
func ParseSnapshot(text string) (Snapshot, error) {
	parts := strings.Split(text, ":")
	if len(parts) != 3 {
		return Snapshot{}, fmt.Errorf("parse snapshot %q: want xmin:xmax:xip", text)
	}
	xmin, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil {
		return Snapshot{}, fmt.Errorf("parse snapshot %q: xmin: %w", text, err)
	}
	xmax, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return Snapshot{}, fmt.Errorf("parse snapshot %q: xmax: %w", text, err)
	}
	if xmin > xmax {
		return Snapshot{}, fmt.Errorf("parse snapshot %q: xmin above xmax", text)
	}
	s := Snapshot{Xmin: XID(xmin), Xmax: XID(xmax)}
	if parts[2] != "" {
		for _, f := range strings.Split(parts[2], ",") {
			x, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return Snapshot{}, fmt.Errorf("parse snapshot %q: xip: %w", text, err)
			}
			if x < xmin || x >= xmax {
				return Snapshot{}, fmt.Errorf("parse snapshot %q: in-progress xid %d outside [xmin, xmax)", text, x)
			}
			s.Xip = append(s.Xip, XID(x))
		}
		slices.Sort(s.Xip)
		s.Xip = slices.Compact(s.Xip)
	}
	return s, nil
}
