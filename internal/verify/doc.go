// Package verify reconciles the source with the sink independently of the
// stream (design.md §10): pg-cdc verify.
//
// One round, for a set of tables:
//
//  1. read the manifest (before), then open a REPEATABLE READ transaction
//     on the source that locks the tables in ACCESS SHARE mode and only then
//     takes its snapshot, recorded as pg_current_snapshot() reports it
//     (TRUNCATE and table rewrites are not MVCC-safe: one committed after
//     the snapshot would empty the table for it; the locks make them wait
//     for verify, as they wait for pg_dump);
//  2. commit a watermark (a transactional logical decoding message) after
//     the snapshot, and wait until the manifest's end LSN reaches it: every
//     transaction the snapshot sees committed before the watermark, so it
//     is then in the sink, even on an idle source;
//  3. per table, read the source under the snapshot and the sink's merged
//     state as of the snapshot (package merge with Visible: per key, the
//     newest version whose __xid the snapshot sees), both sorted by primary
//     key, and merge-join them.
//
// Invariants:
//
//   - Exact, without quiescing: both sides are the same snapshot, decided by
//     transaction visibility, never by clocks or LSN guesses. Versions
//     written after the snapshot are in the sink but ignored; transactions in
//     progress at the snapshot are ignored on both sides.
//   - One representation: source rows go through the conversion the
//     snapshot and the stream use (parquetfile.Writer, documented type rules
//     included), and values are compared in their Parquet form, bit for bit.
//     A rule that maps distinct source values to one Parquet value (numeric
//     NaN in a DECIMAL column is NULL) makes them compare equal; the report
//     counts such source values per column (TableResult.Adjusted).
//   - A base must hold only what the snapshot sees: Visible can drop a
//     version from a delta, but not restore the older versions compaction
//     folded away. A table whose base folds an epoch newer than the
//     manifest read before the snapshot (compaction ran while verify
//     waited), or whose files were collected meanwhile, is compared again
//     in another round under a new snapshot, up to Options.Rounds.
//   - Bounded memory: both sides go through external sorts (package
//     extsort, spilling under Options.ScratchDir) sharing
//     Options.MemoryBytes; the join holds two rows and one key.
//   - Differences are findings, not errors: Run returns them in the Report;
//     errors mean the comparison could not be made.
//
// Tables without a primary key are insert-only (design.md §4): their rows have
// no identity, so they are compared as multisets of whole rows (both sides
// sorted by every column; a row present n times in the source and m times
// in the sink counts min(n, m) matching and the rest missing or extra).
package verify
