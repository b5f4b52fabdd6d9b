package replicate

import (
	"encoding/binary"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Encoders for hand-built pgoutput payloads (protocol version 2, PostgreSQL
// 15 "Logical Replication Message Formats"), after the approach of
// internal/pgoutput/encode_test.go. Messages that can belong to a streamed
// transaction carry the (sub)transaction xid first when streamed is true.

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

// col is one tuple column: kind 'n' (null), 'u' (unchanged TOAST) or 't'.
type col struct {
	kind byte
	data string
}

func txt(s string) col { return col{'t', s} }

var null = col{kind: 'n'}

func (e enc) tuple(cols ...col) enc {
	e = e.u16(uint16(len(cols)))
	for _, c := range cols {
		e = e.u8(c.kind)
		if c.kind == 't' {
			e = append(e.u32(uint32(len(c.data))), c.data...)
		}
	}
	return e
}

func pgBegin(finalLSN cdc.LSN, t time.Time, xid uint32) []byte {
	return enc{'B'}.u64(uint64(finalLSN)).ts(t).u32(xid)
}

func pgCommit(commitLSN, endLSN cdc.LSN, t time.Time) []byte {
	return enc{'C'}.u8(0).u64(uint64(commitLSN)).u64(uint64(endLSN)).ts(t)
}

type relCol struct {
	key     bool
	name    string
	typeOID uint32
	typeMod int32
}

func pgRelation(xid uint32, streamed bool, relID uint32, ns, name string, cols ...relCol) []byte {
	e := enc{'R'}.xid(xid, streamed).u32(relID).str(ns).str(name).u8('d').u16(uint16(len(cols)))
	for _, c := range cols {
		var flags byte
		if c.key {
			flags = 1
		}
		e = e.u8(flags).str(c.name).u32(c.typeOID).u32(uint32(c.typeMod))
	}
	return e
}

func pgInsert(xid uint32, streamed bool, relID uint32, cols ...col) []byte {
	return enc{'I'}.xid(xid, streamed).u32(relID).u8('N').tuple(cols...)
}

// pgUpdate encodes an update; oldKind 0 omits the old tuple.
func pgUpdate(xid uint32, streamed bool, relID uint32, oldKind byte, old, new []col) []byte {
	e := enc{'U'}.xid(xid, streamed).u32(relID)
	if oldKind != 0 {
		e = e.u8(oldKind).tuple(old...)
	}
	return e.u8('N').tuple(new...)
}

func pgDelete(xid uint32, streamed bool, relID uint32, oldKind byte, old ...col) []byte {
	return enc{'D'}.xid(xid, streamed).u32(relID).u8(oldKind).tuple(old...)
}

func pgTruncate(xid uint32, streamed bool, relIDs ...uint32) []byte {
	e := enc{'T'}.xid(xid, streamed).u32(uint32(len(relIDs))).u8(0)
	for _, id := range relIDs {
		e = e.u32(id)
	}
	return e
}

func pgLogical(xid uint32, streamed, transactional bool, lsn cdc.LSN, prefix, content string) []byte {
	var flags byte
	if transactional {
		flags = 1
	}
	e := enc{'M'}.xid(xid, streamed).u8(flags).u64(uint64(lsn)).str(prefix).u32(uint32(len(content)))
	return append(e, content...)
}

func pgStreamStart(xid uint32, first bool) []byte {
	var f byte
	if first {
		f = 1
	}
	return enc{'S'}.u32(xid).u8(f)
}

func pgStreamStop() []byte { return []byte{'E'} }

func pgStreamCommit(xid uint32, commitLSN, endLSN cdc.LSN, t time.Time) []byte {
	return enc{'c'}.u32(xid).u8(0).u64(uint64(commitLSN)).u64(uint64(endLSN)).ts(t)
}

func pgStreamAbort(xid, subXID uint32) []byte { return enc{'A'}.u32(xid).u32(subXID) }

// data wraps pgoutput payloads as stream messages.
func data(payloads ...[]byte) []Message {
	out := make([]Message, len(payloads))
	for i, p := range payloads {
		out[i] = Message{Data: p}
	}
	return out
}

func keepalive(serverWALEnd cdc.LSN, reply bool) Message {
	return Message{Keepalive: true, ServerWALEnd: serverWALEnd, ReplyRequested: reply}
}
