package replicate

import (
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	pt "github.com/pg-cdc/pg-cdc/internal/pgoutput/pgoutputtest"
)

// Short names over pgoutputtest's encoders for the service tests: LSNs are
// cdc.LSN here, relations use replica identity default, truncates carry no
// options, and logical message content is a string.

type (
	col    = pt.Col
	relCol = pt.RelCol
)

func txt(s string) col { return pt.Text(s) }

var null = pt.Null

func pgBegin(finalLSN cdc.LSN, t time.Time, xid uint32) []byte {
	return pt.Begin(uint64(finalLSN), t, xid)
}

func pgCommit(commitLSN, endLSN cdc.LSN, t time.Time) []byte {
	return pt.Commit(uint64(commitLSN), uint64(endLSN), t)
}

func pgRelation(xid uint32, streamed bool, relID uint32, ns, name string, cols ...relCol) []byte {
	return pt.Relation(xid, streamed, relID, ns, name, 'd', cols...)
}

func pgInsert(xid uint32, streamed bool, relID uint32, cols ...col) []byte {
	return pt.Insert(xid, streamed, relID, cols...)
}

// pgUpdate encodes an update; oldKind 0 omits the old tuple.
func pgUpdate(xid uint32, streamed bool, relID uint32, oldKind byte, old, new []col) []byte {
	return pt.Update(xid, streamed, relID, oldKind, old, new)
}

func pgDelete(xid uint32, streamed bool, relID uint32, oldKind byte, old ...col) []byte {
	return pt.Delete(xid, streamed, relID, oldKind, old...)
}

func pgTruncate(xid uint32, streamed bool, relIDs ...uint32) []byte {
	return pt.Truncate(xid, streamed, 0, relIDs...)
}

func pgLogical(xid uint32, streamed, transactional bool, lsn cdc.LSN, prefix, content string) []byte {
	return pt.Logical(xid, streamed, transactional, uint64(lsn), prefix, []byte(content))
}

func pgStreamStart(xid uint32, first bool) []byte { return pt.StreamStart(xid, first) }

func pgStreamStop() []byte { return pt.StreamStop() }

func pgStreamCommit(xid uint32, commitLSN, endLSN cdc.LSN, t time.Time) []byte {
	return pt.StreamCommit(xid, uint64(commitLSN), uint64(endLSN), t)
}

func pgStreamAbort(xid, subXID uint32) []byte { return pt.StreamAbort(xid, subXID) }

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
