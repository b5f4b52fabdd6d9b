// Package memory is an in-memory blob.Store, blob.Conditional and
// blob.Locker, for tests and for trying pg-cdc without a sink. It passes the
// same conformance suite (blob/blobtest) as every real sink.
//
// Invariants:
//
//   - Every method is safe for concurrent use; one mutex guards the map.
//   - Stored bytes are never shared with a caller: Put and PutIf copy in,
//     Get and ReadVersion copy out, so a caller mutating its buffer cannot
//     change an object (real sinks behave the same way).
//   - Versions come from one counter per Store and are never reused, not
//     even after a Delete, so a stale version can never match again (no ABA).
package memory
