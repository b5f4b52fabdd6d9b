// Package txn assembles streamed (in-progress) transactions of pgoutput
// protocol version 2: their changes arrive in chunks, interleaved with other
// transactions, each tagged with the (sub)transaction that made it, and
// become committed only with StreamCommit. Non-streamed transactions arrive
// whole between Begin and Commit and do not pass through here.
//
// Invariants:
//
//   - Order: Commit replays a transaction's surviving changes in the order
//     Add received them, each with its arrival sequence number (0, 1, 2, ...
//     within the top-level transaction). Changes of aborted subtransactions
//     leave gaps in the sequence; the numbers are never reassigned, so a
//     change's __seq does not depend on what was aborted or spilled.
//   - Aborts: Abort(top, top) forgets the whole transaction; Abort(top, sub)
//     drops exactly the changes tagged with sub (PostgreSQL sends one abort
//     per aborted subtransaction, nested ones included). In-memory changes go
//     at once; spilled ones are skipped on replay.
//   - Bounded memory: when the changes held in memory (cdc.Change.Size)
//     exceed the budget, the transaction with the most bytes in memory is
//     appended to its spill file (<dir>/txn-<xid>.spill) until the total is
//     back under the budget. A spilled transaction keeps collecting new
//     changes in memory, which are appended in batches the same way, so the
//     heap stays near the budget whatever the size of a transaction. Replay
//     streams the file; it never loads it whole.
//   - No silent loss: every spill record carries a CRC-32C, and the
//     assembler knows how many records and bytes each file must hold; a
//     short, long or corrupt file fails Commit with an error naming the file
//     and the transaction.
//   - Spill files are scratch, not durable state: they are not fsynced, and
//     after a crash or reconnect PostgreSQL resends every open transaction
//     from the start, so Reset (or a new process calling Reset) deletes them.
//     The spill directory belongs to one Assembler.
//
// An Assembler is not safe for concurrent use; the replication loop owns it.
// It starts no goroutine and reads no clock; its only effects are the files
// in its directory. The failpoint "txn/spill" fires after each batch is
// written, for crash tests.
package txn
