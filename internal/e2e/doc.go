// Package e2e holds end-to-end tests: the real pg-cdc binary against a real
// throwaway PostgreSQL, with the sink read back by DuckDB as an independent
// reader. The oracle is the source itself: after a run, every table's merged
// state in the sink must equal the table in PostgreSQL.
//
// Crash scenarios kill the binary with SIGKILL, either from the test or at a
// named step of the flush through failpoints (internal/failpoint). Throughout
// every run a sampler outside the daemon checks that the slot is never
// confirmed past the manifest's end LSN.
package e2e
