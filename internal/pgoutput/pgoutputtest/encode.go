// Package pgoutputtest builds pgoutput protocol-version-2 payloads by hand
// (PostgreSQL 15, "Logical Replication Message Formats") for tests of the
// decoder and of the services that consume it. Messages that can belong to a
// streamed transaction carry the (sub)transaction xid first when streamed is
// true. It imports nothing of pg-cdc, so any test package can use it.
package pgoutputtest

import (
	"encoding/binary"
	"time"
)

type enc []byte

func (e enc) u8(v byte) enc    { return append(e, v) }
func (e enc) u16(v uint16) enc { return binary.BigEndian.AppendUint16(e, v) }
func (e enc) u32(v uint32) enc { return binary.BigEndian.AppendUint32(e, v) }
func (e enc) u64(v uint64) enc { return binary.BigEndian.AppendUint64(e, v) }
func (e enc) str(s string) enc { return append(append(e, s...), 0) }

// ts encodes a time as microseconds since 2000-01-01, PostgreSQL's epoch.
func (e enc) ts(t time.Time) enc { return e.u64(uint64(t.UnixMicro() - 946684800*1000000)) }

func (e enc) xid(xid uint32, streamed bool) enc {
	if streamed {
		return e.u32(xid)
	}
	return e
}

// Col is one tuple column: Kind 'n' (null), 'u' (unchanged TOAST), 't'
// (text) or 'b' (binary); Data is the value of 't' and 'b'.
type Col struct {
	Kind byte
	Data string
}

// Text is a text column.
func Text(s string) Col { return Col{'t', s} }

var (
	Null      = Col{Kind: 'n'}
	Unchanged = Col{Kind: 'u'}
)

func (e enc) tuple(cols ...Col) enc {
	e = e.u16(uint16(len(cols)))
	for _, c := range cols {
		e = e.u8(c.Kind)
		if c.Kind == 't' || c.Kind == 'b' {
			e = append(e.u32(uint32(len(c.Data))), c.Data...)
		}
	}
	return e
}

// RelCol is one column of a Relation message.
type RelCol struct {
	Key     bool
	Name    string
	TypeOID uint32
	TypeMod int32
}

func Begin(finalLSN uint64, t time.Time, xid uint32) []byte {
	return enc{'B'}.u64(finalLSN).ts(t).u32(xid)
}

func Commit(commitLSN, endLSN uint64, t time.Time) []byte {
	return enc{'C'}.u8(0).u64(commitLSN).u64(endLSN).ts(t)
}

func Origin(lsn uint64, name string) []byte { return enc{'O'}.u64(lsn).str(name) }

// Relation encodes a Relation message; ident is the replica identity byte
// ('d', 'f', 'i' or 'n').
func Relation(xid uint32, streamed bool, relID uint32, ns, name string, ident byte, cols ...RelCol) []byte {
	e := enc{'R'}.xid(xid, streamed).u32(relID).str(ns).str(name).u8(ident).u16(uint16(len(cols)))
	for _, c := range cols {
		var flags byte
		if c.Key {
			flags = 1
		}
		e = e.u8(flags).str(c.Name).u32(c.TypeOID).u32(uint32(c.TypeMod))
	}
	return e
}

func Type(xid uint32, streamed bool, oid uint32, ns, name string) []byte {
	return enc{'Y'}.xid(xid, streamed).u32(oid).str(ns).str(name)
}

func Insert(xid uint32, streamed bool, relID uint32, cols ...Col) []byte {
	return enc{'I'}.xid(xid, streamed).u32(relID).u8('N').tuple(cols...)
}

// Update encodes an update; oldKind 0 omits the old tuple.
func Update(xid uint32, streamed bool, relID uint32, oldKind byte, old, new []Col) []byte {
	e := enc{'U'}.xid(xid, streamed).u32(relID)
	if oldKind != 0 {
		e = e.u8(oldKind).tuple(old...)
	}
	return e.u8('N').tuple(new...)
}

func Delete(xid uint32, streamed bool, relID uint32, oldKind byte, old ...Col) []byte {
	return enc{'D'}.xid(xid, streamed).u32(relID).u8(oldKind).tuple(old...)
}

func Truncate(xid uint32, streamed bool, options byte, relIDs ...uint32) []byte {
	e := enc{'T'}.xid(xid, streamed).u32(uint32(len(relIDs))).u8(options)
	for _, id := range relIDs {
		e = e.u32(id)
	}
	return e
}

func Logical(xid uint32, streamed, transactional bool, lsn uint64, prefix string, content []byte) []byte {
	var flags byte
	if transactional {
		flags = 1
	}
	e := enc{'M'}.xid(xid, streamed).u8(flags).u64(lsn).str(prefix).u32(uint32(len(content)))
	return append(e, content...)
}

func StreamStart(xid uint32, first bool) []byte {
	var f byte
	if first {
		f = 1
	}
	return enc{'S'}.u32(xid).u8(f)
}

func StreamStop() []byte { return []byte{'E'} }

func StreamCommit(xid uint32, commitLSN, endLSN uint64, t time.Time) []byte {
	return enc{'c'}.u32(xid).u8(0).u64(commitLSN).u64(endLSN).ts(t)
}

func StreamAbort(xid, subXID uint32) []byte { return enc{'A'}.u32(xid).u32(subXID) }
