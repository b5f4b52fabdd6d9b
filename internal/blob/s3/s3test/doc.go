// Package s3test runs a throwaway S3-compatible server, versitygw with its
// posix backend, on loopback for tests: the blob conformance suite of the S3
// sink now, end-to-end tests later.
//
// Two layers, as in pgtest:
//
//   - Binary, StartServer and the Server methods (NewBucket, Stop) need no
//     *testing.T.
//   - Start is the test helper: a server for one test, stopped when it ends.
//
// Invariants:
//
//   - The binary is built once per machine from the Go module proxy (`go
//     install github.com/versity/versitygw/cmd/versitygw@` + Version) into
//     a cache directory (ToolsDir) and reused; concurrent builders wait on a
//     lock file and the binary appears by rename, whole or not at all.
//     scripts/ensure-versitygw.sh builds the same file ahead of the tests.
//     PGCDC_VERSITYGW names a binary to use instead.
//   - A Server only ever stops the process it started, by its PID. On Linux
//     the process also gets SIGKILL when the test binary dies, so a killed
//     test run leaves no server behind.
//   - The server listens on 127.0.0.1 only, with throwaway root credentials;
//     its data lives in a directory the caller owns (t.TempDir for Start).
//   - Failure to build or start is a test failure, never a skip, with one
//     exception: outside CI (CI not true), when `go install` cannot reach
//     the module proxy (ErrUnavailable), Start skips and says why.
package s3test
