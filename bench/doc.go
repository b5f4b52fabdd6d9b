// Package bench holds the reference clients pg-cdc is measured against
// (issue 3) and the small statistics the harness reports. The harness itself
// is bench/cmd/pgcdc-bench, which `make bench` runs.
//
// The reference clients are the protocol's own limits, not products:
//
//   - Drain is a bare pglogrepl client. It asks for exactly what pg-cdc asks
//     for (pgoutput proto_version 2, messages, streaming), parses every
//     message with pglogrepl.ParseV2 (tracking inStream as the protocol
//     requires), discards it, and confirms the end LSN of each transaction as
//     it goes. Whatever pg-cdc adds on top (typed conversion, Parquet, zstd,
//     files, manifest) is measured against this.
//   - Copy runs COPY … TO STDOUT on one connection into a counter: binary
//     format is the snapshot ceiling; text format (what pg-cdc reads today)
//     is context.
//
// Both take the socket tuning pg-cdc can use (SO_RCVLOWAT and a large read
// buffer), so the bar is the best a client of this protocol can do here.
package bench
