// Package changefeed serves a table's change rows to consumers page by
// page, in (__lsn, __seq) order, each committed change once, across
// manifest versions and compactions (design.md §11). It reads through the
// read path's port (Reader, over internal/readpath types) and imports no
// DuckDB; the REST API (internal/api), the MCP server and server-sent
// events use it.
//
// Invariants:
//
//   - A page is read from a version whose change rows are complete after
//     the cursor: one whose table base (a compaction keeps only each key's
//     newest version) ends at or before the cursor, or is a snapshot. Older
//     versions inside history.retention keep the change rows a compaction
//     folded, so a consumer behind a compaction reads from them and moves
//     on to newer versions.
//   - A cursor no retained version serves is a GoneError (ErrGone) naming
//     the oldest cursor served; the REST API answers 410 with it.
//   - Cursors are positions, not versions: a cursor stays valid while new
//     versions and compactions land, and the next page holds exactly the
//     changes after it.
//
// A table's new generation (pg-cdc rebuild, resnapshot) starts with a
// snapshot base at the new consistent point: its rows after the cursor are
// served as inserts, as that base holds them.
package changefeed
