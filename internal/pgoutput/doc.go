// Package pgoutput turns the payloads of pgoutput logical replication
// messages (protocol version 2, streaming on) into typed messages. It holds
// no connection: the replication loop hands it one XLogData payload at a
// time and gets back one Message.
//
// Parsing is delegated to pglogrepl.ParseV2, which assumes well-formed input
// (it indexes without bounds checks and allocates whatever a length field
// says). Every payload is therefore first walked by a structural check that
// follows the protocol exactly (message formats of PostgreSQL 14-15 with
// proto_version 2), so that ParseV2 only ever sees bytes it can handle.
//
// Invariants:
//
//   - Decode never panics and never allocates more than a small multiple of
//     the payload's size, whatever the bytes (FuzzDecode).
//   - The decoder tracks whether it is inside a stream block (StreamStart ..
//     StreamStop) and inside a non-streamed transaction (Begin .. Commit), and
//     rejects messages that break that nesting: pglogrepl needs the stream
//     flag to know whether an xid precedes the body, and a wrong flag would
//     silently shift every field.
//   - A row change (Insert, Update, Delete, Truncate) names only relations
//     described earlier by a Relation message, and its tuples have exactly
//     the described number of columns; otherwise Decode fails. Nothing is
//     guessed and nothing is mis-aligned.
//   - A later Relation message for the same OID replaces the cached one. It
//     is returned as a message too, so the consumer can compare it with the
//     schema it knows (a Relation inside a stream carries the xid of the
//     streamed transaction, which may still abort).
//   - Column values own their bytes: a Datum stays valid after the next
//     Decode and after the caller reuses the payload buffer.
//   - Binary column values ('b') are an error: pg-cdc never asks for them,
//     and every value downstream is in PostgreSQL's text form.
//
// A Decoder is not safe for concurrent use; the replication loop owns it.
// After a reconnect, use a new Decoder: PostgreSQL resends every Relation
// message on a new walsender.
package pgoutput
