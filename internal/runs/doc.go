// Package runs writes the artifacts of one run of `pg-cdc start` under
// state.path/runs/<run_id>/ (docs/operations.md#run-artifacts):
//
//   - run.json: who ran what and when, the redacted configuration; written
//     at the start and rewritten at the stop with the exit code and error.
//   - events.ndjson: one JSON object per line, the versioned schema of
//     docs/event-schema.md (Schema).
//   - state.json: a snapshot of the stream (positions, lag, buffer, tables,
//     last error), replaced atomically whenever the caller refreshes it.
//   - summary.md: a human-readable summary, written at the stop.
//
// Invariants:
//
//   - Every file is written whole or not at all (temporary file, then
//     rename), except events.ndjson, which is appended one line per write.
//   - Every byte written passes through Options.Redact first.
//   - events.ndjson is bounded (Options.MaxEventsBytes): past it, it moves
//     to events.ndjson.1 and a new file starts.
//   - At most Options.Keep run directories stay under the root: the oldest
//     (by run ID, which starts with the UTC time) are removed at Start.
//     Anything else in the root is left alone.
//   - A Run is safe for concurrent use. It starts no goroutine and reads the
//     clock only through Options.Now.
package runs
