// Package pgtest runs a throwaway PostgreSQL cluster on loopback for tests
// and demos.
//
// Two layers:
//
//   - StartCluster and the Cluster methods (Stop, Start, Restart, Kill,
//     Remove) need no *testing.T, so a demo program can use them too.
//   - Main, Shared, New and Cluster.CreateDatabase are test helpers.
//
// Invariants:
//
//   - A Cluster only ever touches the processes it started: Stop goes through
//     pg_ctl on its own data directory, Kill signals the postmaster named in
//     its own postmaster.pid (and that postmaster's process group).
//   - The cluster listens on 127.0.0.1 only, with trust authentication
//     (except for the roles a test names in Options.HBA); it is never
//     reachable from outside the machine.
//   - PostgreSQL refuses to run as root, so when the test runs as root every
//     PostgreSQL binary runs as the "postgres" OS user and the cluster
//     directory is chowned to it. A directory passed in Options.Dir must then
//     be reachable by that user (os.MkdirTemp's default location is;
//     testing.T.TempDir's 0700 parents are not).
//   - Settings that pg-cdc depends on are fixed here: wal_level=logical,
//     logical_decoding_work_mem=64kB (so that even small transactions are
//     streamed in chunks and the streaming path is always exercised), fsync
//     off (speed; tests do not survive power loss) but synchronous_commit on,
//     so a committed transaction is in the WAL the server has written.
//   - A missing PostgreSQL installation is reported as ErrNoPostgres. Test
//     helpers skip on it, except when CI is set to a true value: a CI machine
//     without PostgreSQL is a broken CI machine, and skipping would hide it.
//
// The package keeps one package-level variable: the cluster shared by all
// tests of one test binary (Shared). It exists because sharing one cluster
// across a package's tests is the point; Main stops it when the tests end,
// and Shared refuses to start one when Main is not running, so it cannot leak
// a server.
package pgtest
