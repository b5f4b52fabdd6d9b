// Package replicate is the streaming service: it reads pgoutput messages
// from a Source, assembles committed transactions, cuts them into epochs at
// commit boundaries, makes each epoch durable through flush.Committer, and
// only then reports the epoch's end LSN to PostgreSQL.
//
// Invariants (design.md §1):
//   - The position sent to PostgreSQL is always the manifest's end LSN:
//     either the end of the last flushed transaction or an idle position
//     that was recorded in the manifest first. Never a received position.
//   - An epoch holds whole transactions only. A stop request that arrives
//     inside a transaction finishes reading it first (or, past the drain
//     timeout, discards the epoch, which the slot will replay).
//   - DML for a relation that was never described, or whose columns differ
//     from the manifest's schema, is a hard error.
//
// One goroutine (the caller's) runs the loop; nothing here starts another
// except the flush committer's bounded, awaited fan-out.
package replicate
