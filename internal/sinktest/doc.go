// Package sinktest is a test-only oracle for pg-cdc's filesystem sink: it
// reads a table's current state from the sink independently of the code
// under test, and compares it with the source table.
//
// Invariants:
//
//   - MergedRows reads the file list from _pgcdc/manifest.json alone (never a
//     directory listing: a file the manifest does not name does not exist)
//     and reads the files with DuckDB, opened sandboxed on the sink root.
//   - The merge rules of design.md §7 are implemented here in plain Go, on
//     purpose apart from the query package's SQL, so that each checks the
//     other.
//   - Canonical renders values from pgx and from DuckDB's database/sql driver
//     as the same string exactly when they are the same SQL value, so source
//     and sink compare without knowing each other's Go types.
//
// Helpers take a testing.TB and fail the test on errors: they are for tests
// only and never imported by the daemon.
package sinktest
