// Package daemon owns the `pg-cdc start` process: Run wires the source,
// the sink and the streaming service (internal/replicate) together,
// retries failed sessions, and runs every part that watches the stream or
// works beside it. The command only builds Options from the configuration
// and maps Run's error to an exit code.
//
// # Order of effects
//
// Run does, in this order (each step fails the run before the next one
// touches anything):
//
//  1. Open the run artifacts (state.path/runs/<run_id>/) and bind the
//     metrics and health endpoint, so a taken port fails before the source
//     or the sink is touched; start the endpoint, the systemd watchdog, the
//     stop-request watcher and the state.json writer.
//  2. Open the sink (through the metrics' error counting), take its writer
//     lock, probe it for conditional writes (design.md §2.3), open the
//     manifest committer and check the sink belongs to this capture's slot
//     and publication (capture.Capture.CheckOwner). Publish the manifest to
//     the post-commit seam (manifest.Feed).
//  3. Start the watchers (the source health poller, the heartbeat, the
//     seam's poll of the stored manifest) and the work beside the stream
//     (the compaction loop, the background reconciler, the run-state
//     follower, Options.Followers). None of them can stop the stream: each
//     logs its failures and tries again.
//  4. Tell systemd the service is ready, and run the stream: the retry
//     loop runs sessions (session.run: identity and slot checks, new-table
//     discovery, replication, replicate.Service) until one drains after
//     the stop request, fails with a terminal error, or transient failures
//     exhaust the retry policy (cdc.ErrRetriesExhausted). Before a retried
//     session the manifest is read again from the sink.
//
// # Stop order
//
// A stop request (the context Run was given) reaches the stream first: it
// finishes the transaction it is receiving, flushes, confirms and returns.
// Then the run group (group) stops its stages in this order, each on a
// context of its own that the stop request did not cancel, each bounded by
// its own timeout so that a stuck part is left behind rather than holding
// up the rest:
//
//  1. the stream drains (the retry loop returns);
//  2. background: compaction, the reconciler, the followers of the seam;
//  3. pollers: the source poller, the heartbeat, the seam's poll, the
//     state.json writer, the systemd watchdog and the stop-request watcher;
//  4. http: the metrics and health endpoint, which answered until here;
//  5. the sink's writer lock is released and the run artifacts are closed
//     with the final state and the exit code.
//
// # The post-commit seam
//
// Every manifest version any writer commits reaches manifest.Feed: this
// process's streamer and compaction publish what they write
// (manifest.Observer.Committed), and the seam's poll brings what other
// processes write (pg-cdc compact from cron, rebuild, resnapshot
// requests). A Follower reads the feed on its own goroutine; Publish
// never blocks, and a slow follower sees the newest version, not every one,
// so no follower can slow or stop the stream.
//
// # Errors
//
// Whether a failed session is retried is the error's behaviour
// (cdc.IsTransient): the postgres adapter, the sink (blob.ErrUnavailable),
// the service (replicate.ErrSilent) and the slot check
// (capture.SlotBusyError) say so; every *cdc.Error is terminal, and an error
// that says nothing is terminal too.
package daemon
