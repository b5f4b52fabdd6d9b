// Package flush decides when buffered transactions are cut into an epoch and
// makes an epoch durable in the order design.md §1 fixes:
//
//  1. every table's delta file of the epoch is uploaded under its
//     deterministic key;
//  2. the manifest that names them is committed with compare-and-swap;
//  3. only then does the caller confirm the epoch's end LSN to PostgreSQL.
//
// A crash between any two steps leaves the previous manifest authoritative;
// files it does not name are invisible and a replayed flush overwrites them.
//
// The planner (Due, IdleAdvance) is pure: it takes sizes and the time as
// inputs. Epoch buffers committed transactions; Committer performs the I/O:
// it uploads the delta files, then commits the manifest edit that
// applyEpoch, a pure function of the manifest, the uploaded files and the
// flush time, makes (tested with golden manifests under testdata/apply).
// An epoch only ever holds whole transactions: the caller adds a
// transaction's rows and then marks its commit, and flushes only between
// transactions.
package flush
