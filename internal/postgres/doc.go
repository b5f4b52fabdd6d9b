// Package postgres is pg-cdc's source adapter: catalog discovery, preflight
// checks, publications, slots, the snapshot COPY and the logical replication
// connection, on top of pgx and pglogrepl. It returns domain types (cdc.LSN,
// cdc.Table, cdc.Datum, Message) and never pgx or pglogrepl types; it does not
// decode pgoutput (package pgoutput does).
//
// Invariants:
//
//   - One text form. Every connection, SQL or replication, sends the same
//     session settings in its startup packet (sessionParams: DateStyle,
//     TimeZone, IntervalStyle, extra_float_digits, bytea_output), so a value
//     copied by the snapshot and the same value sent by pgoutput are the same
//     bytes. Nothing may override them later in the session.
//   - No secrets in errors. Servers are named by host, port, database and
//     user from the parsed configuration, never by the connection URL; a URL
//     that does not parse is not echoed back.
//   - Positions are explicit. SendStatus reports the one position it is
//     given as written, flushed and applied; it never lets pglogrepl derive
//     one from another. Which position is safe to report is the caller's
//     decision (design.md §1), not this package's.
//   - Slot loss is terminal and recognisable: a missing, invalidated or
//     WAL-less slot gives an error matching cdc.ErrSlotLost, whether it
//     surfaces when replication starts or on a later Receive; IsTransient is
//     false for it.
//   - Streams, not tables in memory: CopyTable hands rows to a callback one at
//     a time and never holds more than one row; the values it passes are
//     valid only during the call. Receive's Message.Data is valid only until
//     the next Receive.
//   - Every identifier interpolated into SQL is quoted (pgx.Identifier);
//     slot names, which replication commands take unquoted, are validated
//     against PostgreSQL's own rule instead.
//
// Concurrency: DB is safe for concurrent use (each call takes its own
// connection). ReplConn is not: one goroutine owns it and alternates Receive
// and SendStatus, which keeps the protocol stream in order without locks.
package postgres
