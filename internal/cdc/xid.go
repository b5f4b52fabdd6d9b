package cdc

// XID is a transaction id extended to 64 bits with its epoch, as
// pg_current_snapshot() reports it. pgoutput sends only the low 32 bits.
type XID uint64

// ExtendXID returns the 64-bit transaction id whose low 32 bits are x and that
// lies nearest to ref, a recent 64-bit xid of the same cluster (for example the
// xmin of pg_current_snapshot() taken at connect time, advanced as xids go by).
// Transaction ids in flight are always within 2^31 of each other, so the
// nearest candidate is the right one.
func ExtendXID(ref XID, x uint32) XID {
	cand := int64(ref&^0xFFFFFFFF) | int64(x)
	r := int64(ref)
	switch {
	case cand-r > 1<<31:
		cand -= 1 << 32
	case r-cand > 1<<31:
		cand += 1 << 32
	}
	if cand < 0 {
		// Before the first epoch wrap there is nothing below zero.
		cand += 1 << 32
	}
	return XID(cand)
}
