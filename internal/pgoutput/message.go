package pgoutput

import (
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Message is one decoded pgoutput message. The concrete types are the
// pointer types below (*Begin, *Insert, ...).
type Message interface{ isMessage() }

// Begin starts a non-streamed transaction. Its changes follow until Commit.
type Begin struct {
	XID uint32
	// FinalLSN is the LSN of the transaction's commit record (the same value
	// as Commit.CommitLSN); it is written to __lsn.
	FinalLSN   cdc.LSN
	CommitTime time.Time
}

// Commit ends a non-streamed transaction.
type Commit struct {
	// CommitLSN is the LSN of the commit record.
	CommitLSN cdc.LSN
	// EndLSN is the end of the commit record: the position that may be
	// confirmed once the transaction is durable in the sink.
	EndLSN     cdc.LSN
	CommitTime time.Time
}

// Relation describes a table. PostgreSQL sends it before the first change
// of a table in a session, and again after the table's definition (or the
// walsender's cache) changed.
type Relation struct {
	RelID uint32
	// XID is the (sub)transaction of a Relation sent inside a stream block;
	// 0 outside streams.
	XID       uint32
	Namespace string
	Name      string
	// ReplicaIdentity is PostgreSQL's relreplident: 'd' default, 'n'
	// nothing, 'f' full, 'i' index.
	ReplicaIdentity byte
	Columns         []RelationColumn
}

// RelationColumn is one column of a Relation, in the table's column order
// (the order of every tuple of that relation).
type RelationColumn struct {
	Name    string
	TypeOID uint32
	TypeMod int32
	// Key is true for columns of the replica identity.
	Key bool
}

// TypeMsg describes a non-builtin data type used by a following Relation.
type TypeMsg struct {
	XID       uint32 // 0 outside streams
	TypeOID   uint32
	Namespace string
	Name      string
}

// Insert is a new row.
type Insert struct {
	RelID uint32
	// XID is the (sub)transaction that made the change, sent only inside a
	// stream block; 0 otherwise.
	XID uint32
	New []cdc.Datum
}

// Update is a changed row.
type Update struct {
	RelID uint32
	XID   uint32 // 0 outside streams
	// OldKind is 0 when no old tuple was sent, 'K' when Old holds the old
	// replica identity key (the key changed; non-key columns are null), 'O'
	// when Old is the full old row (REPLICA IDENTITY FULL).
	OldKind byte
	Old     []cdc.Datum
	// New is the new row; columns that were not changed and are TOASTed are
	// DatumUnchanged.
	New []cdc.Datum
}

// Delete is a removed row.
type Delete struct {
	RelID   uint32
	XID     uint32 // 0 outside streams
	OldKind byte   // 'K' (key columns; others null) or 'O' (full row)
	Old     []cdc.Datum
}

// Truncate empties one or more tables.
type Truncate struct {
	XID             uint32 // 0 outside streams
	RelIDs          []uint32
	Cascade         bool
	RestartIdentity bool
}

// LogicalMessage is a message written with pg_logical_emit_message.
type LogicalMessage struct {
	XID           uint32 // 0 outside streams
	Transactional bool
	LSN           cdc.LSN
	Prefix        string
	// Content is owned by the message (copied from the payload).
	Content []byte
}

// Origin names the replication origin of the current transaction, when the
// change was itself replicated into the source.
type Origin struct {
	// CommitLSN is the commit LSN on the origin server.
	CommitLSN cdc.LSN
	Name      string
}

// StreamStart opens a block of changes of an in-progress transaction.
type StreamStart struct {
	// XID is the top-level transaction of the block.
	XID uint32
	// First is true for the first block of that transaction.
	First bool
}

// StreamStop closes the current stream block.
type StreamStop struct{}

// StreamCommit commits a streamed transaction: its changes (except those of
// aborted subtransactions) become committed.
type StreamCommit struct {
	XID        uint32
	CommitLSN  cdc.LSN
	EndLSN     cdc.LSN
	CommitTime time.Time
}

// StreamAbort aborts a streamed transaction (SubXID == XID) or one of its
// subtransactions (SubXID != XID: only changes made by SubXID are dropped).
type StreamAbort struct {
	XID    uint32
	SubXID uint32
}

func (*Begin) isMessage()          {}
func (*Commit) isMessage()         {}
func (*Relation) isMessage()       {}
func (*TypeMsg) isMessage()        {}
func (*Insert) isMessage()         {}
func (*Update) isMessage()         {}
func (*Delete) isMessage()         {}
func (*Truncate) isMessage()       {}
func (*LogicalMessage) isMessage() {}
func (*Origin) isMessage()         {}
func (*StreamStart) isMessage()    {}
func (*StreamStop) isMessage()     {}
func (*StreamCommit) isMessage()   {}
func (*StreamAbort) isMessage()    {}
