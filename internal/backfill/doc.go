// Package backfill decides where the rows of a backfill chunk go in a
// table's change history (design.md §5): the placement rule, by transaction
// visibility, of a table copied by primary-key chunks while the stream runs.
// It does no I/O, starts no goroutine and reads no clock; the streaming loop
// (replicate) feeds it the changes it delivers and the chunks the reader
// copies, and writes the rows where it says.
//
// The rule. A chunk is read in a REPEATABLE READ transaction whose snapshot S
// is recorded; after it commits, a non-transactional logical message (the
// marker) is written, and the chunk is placed when the stream delivers the
// marker. Every commit record written before the marker has then been
// delivered, and every transaction visible in S committed before the marker.
// Each chunk row becomes an insert of a synthetic position:
//
//   - by default (marker LSN, a negative seq): after every change the stream
//     delivered before the marker, which S either sees (the chunk reflects
//     it, so the chunk row must win) or that was recorded as invisible
//     (below), and before every change delivered after the marker, which S
//     cannot see (the change wins);
//   - when the stream delivered, before the marker, a change of the row's key
//     (or a TRUNCATE of the table) by a transaction S does not see (a
//     straggler: committed after the snapshot was taken but before the
//     marker, or committed before it yet still in progress for S), the row
//     goes just before the earliest such change: (its LSN, a negative seq).
//     Real changes have seq ≥ 0, so that change, and everything after it,
//     applies on top of the chunk row (an UPDATE's unchanged TOAST values
//     come from it, a DELETE removes it, a TRUNCATE drops it).
//
// Memory: a change visible in one chunk's snapshot is visible in every later
// one, so Prune drops it after each chunk; the tracker holds the changes of
// one window between two chunk snapshots, plus stragglers until a snapshot
// sees them.
package backfill
