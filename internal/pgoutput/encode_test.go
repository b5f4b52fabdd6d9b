package pgoutput

import (
	"encoding/binary"
	"time"
)

// Encoders for hand-built payloads, following the protocol's message formats
// (PostgreSQL 15, "Logical Replication Message Formats"). Every function
// takes xid and streamed: inside a stream block, messages that can belong to
// a streamed transaction carry the xid first.

type enc []byte

func (e enc) u8(v byte) enc    { return append(e, v) }
func (e enc) u16(v uint16) enc { return binary.BigEndian.AppendUint16(e, v) }
func (e enc) u32(v uint32) enc { return binary.BigEndian.AppendUint32(e, v) }
func (e enc) u64(v uint64) enc { return binary.BigEndian.AppendUint64(e, v) }
func (e enc) str(s string) enc { return append(append(e, s...), 0) }
func (e enc) ts(t time.Time) enc {
	return e.u64(uint64(t.UnixMicro() - 946684800*1000000))
}

func (e enc) xid(xid uint32, streamed bool) enc {
	if streamed {
		return e.u32(xid)
	}
	return e
}

// col is one tuple column for encoding: kind 'n', 'u', 't' or 'b'.
type col struct {
	kind byte
	data string
}

func txt(s string) col { return col{'t', s} }

var (
	null      = col{kind: 'n'}
	unchanged = col{kind: 'u'}
)

func (e enc) tuple(cols ...col) enc {
	e = e.u16(uint16(len(cols)))
	for _, c := range cols {
		e = e.u8(c.kind)
		if c.kind == 't' || c.kind == 'b' {
			e = append(e.u32(uint32(len(c.data))), c.data...)
		}
	}
	return e
}

func beginMsg(finalLSN uint64, t time.Time, xid uint32) []byte {
	return enc{'B'}.u64(finalLSN).ts(t).u32(xid)
}

func commitMsg(commitLSN, endLSN uint64, t time.Time) []byte {
	return enc{'C'}.u8(0).u64(commitLSN).u64(endLSN).ts(t)
}

func originMsg(lsn uint64, name string) []byte { return enc{'O'}.u64(lsn).str(name) }

type relCol struct {
	key     bool
	name    string
	typeOID uint32
	typeMod int32
}

func relationMsg(xid uint32, streamed bool, relID uint32, ns, name string, ident byte, cols ...relCol) []byte {
	e := enc{'R'}.xid(xid, streamed).u32(relID).str(ns).str(name).u8(ident).u16(uint16(len(cols)))
	for _, c := range cols {
		var flags byte
		if c.key {
			flags = 1
		}
		e = e.u8(flags).str(c.name).u32(c.typeOID).u32(uint32(c.typeMod))
	}
	return e
}

func typeMsg(xid uint32, streamed bool, oid uint32, ns, name string) []byte {
	return enc{'Y'}.xid(xid, streamed).u32(oid).str(ns).str(name)
}

func insertMsg(xid uint32, streamed bool, relID uint32, cols ...col) []byte {
	return enc{'I'}.xid(xid, streamed).u32(relID).u8('N').tuple(cols...)
}

// updateMsg encodes an update; oldKind 0 omits the old tuple.
func updateMsg(xid uint32, streamed bool, relID uint32, oldKind byte, old, new []col) []byte {
	e := enc{'U'}.xid(xid, streamed).u32(relID)
	if oldKind != 0 {
		e = e.u8(oldKind).tuple(old...)
	}
	return e.u8('N').tuple(new...)
}

func deleteMsg(xid uint32, streamed bool, relID uint32, oldKind byte, old ...col) []byte {
	return enc{'D'}.xid(xid, streamed).u32(relID).u8(oldKind).tuple(old...)
}

func truncateMsg(xid uint32, streamed bool, options byte, relIDs ...uint32) []byte {
	e := enc{'T'}.xid(xid, streamed).u32(uint32(len(relIDs))).u8(options)
	for _, id := range relIDs {
		e = e.u32(id)
	}
	return e
}

func logicalMsg(xid uint32, streamed, transactional bool, lsn uint64, prefix string, content []byte) []byte {
	var flags byte
	if transactional {
		flags = 1
	}
	e := enc{'M'}.xid(xid, streamed).u8(flags).u64(lsn).str(prefix).u32(uint32(len(content)))
	return append(e, content...)
}

func streamStartMsg(xid uint32, first bool) []byte {
	var f byte
	if first {
		f = 1
	}
	return enc{'S'}.u32(xid).u8(f)
}

func streamStopMsg() []byte { return []byte{'E'} }

func streamCommitMsg(xid uint32, commitLSN, endLSN uint64, t time.Time) []byte {
	return enc{'c'}.u32(xid).u8(0).u64(commitLSN).u64(endLSN).ts(t)
}

func streamAbortMsg(xid, subXID uint32) []byte { return enc{'A'}.u32(xid).u32(subXID) }
