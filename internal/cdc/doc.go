// Package cdc is the domain vocabulary of pg-cdc: positions in the source's
// write-ahead log (LSN), transaction ids (XID), epochs and generations of the
// sink, tables and their columns, and the changes that flow between them.
//
// It imports only the standard library. Every other package speaks these
// types, so that a position is never a bare integer and a value is never an
// untyped interface.
package cdc
