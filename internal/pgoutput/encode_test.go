package pgoutput

import (
	"encoding/binary"
	"time"

	pt "github.com/pg-cdc/pg-cdc/internal/pgoutput/pgoutputtest"
)

// Well-formed messages come from pgoutputtest; enc builds the malformed
// payloads the decoder must reject byte by byte.

type enc []byte

func (e enc) u8(v byte) enc    { return append(e, v) }
func (e enc) u16(v uint16) enc { return binary.BigEndian.AppendUint16(e, v) }
func (e enc) u32(v uint32) enc { return binary.BigEndian.AppendUint32(e, v) }
func (e enc) u64(v uint64) enc { return binary.BigEndian.AppendUint64(e, v) }
func (e enc) str(s string) enc { return append(append(e, s...), 0) }

func (e enc) tuple(cols ...col) enc {
	e = e.u16(uint16(len(cols)))
	for _, c := range cols {
		e = e.u8(c.Kind)
		if c.Kind == 't' || c.Kind == 'b' {
			e = append(e.u32(uint32(len(c.Data))), c.Data...)
		}
	}
	return e
}

type (
	col    = pt.Col
	relCol = pt.RelCol
)

func txt(s string) col { return pt.Text(s) }

var (
	null      = pt.Null
	unchanged = pt.Unchanged
)

func beginMsg(finalLSN uint64, t time.Time, xid uint32) []byte { return pt.Begin(finalLSN, t, xid) }

func commitMsg(commitLSN, endLSN uint64, t time.Time) []byte {
	return pt.Commit(commitLSN, endLSN, t)
}

func originMsg(lsn uint64, name string) []byte { return pt.Origin(lsn, name) }

func relationMsg(xid uint32, streamed bool, relID uint32, ns, name string, ident byte, cols ...relCol) []byte {
	return pt.Relation(xid, streamed, relID, ns, name, ident, cols...)
}

func typeMsg(xid uint32, streamed bool, oid uint32, ns, name string) []byte {
	return pt.Type(xid, streamed, oid, ns, name)
}

func insertMsg(xid uint32, streamed bool, relID uint32, cols ...col) []byte {
	return pt.Insert(xid, streamed, relID, cols...)
}

func updateMsg(xid uint32, streamed bool, relID uint32, oldKind byte, old, new []col) []byte {
	return pt.Update(xid, streamed, relID, oldKind, old, new)
}

func deleteMsg(xid uint32, streamed bool, relID uint32, oldKind byte, old ...col) []byte {
	return pt.Delete(xid, streamed, relID, oldKind, old...)
}

func truncateMsg(xid uint32, streamed bool, options byte, relIDs ...uint32) []byte {
	return pt.Truncate(xid, streamed, options, relIDs...)
}

func logicalMsg(xid uint32, streamed, transactional bool, lsn uint64, prefix string, content []byte) []byte {
	return pt.Logical(xid, streamed, transactional, lsn, prefix, content)
}

func streamStartMsg(xid uint32, first bool) []byte { return pt.StreamStart(xid, first) }

func streamStopMsg() []byte { return pt.StreamStop() }

func streamCommitMsg(xid uint32, commitLSN, endLSN uint64, t time.Time) []byte {
	return pt.StreamCommit(xid, commitLSN, endLSN, t)
}

func streamAbortMsg(xid, subXID uint32) []byte { return pt.StreamAbort(xid, subXID) }
