// Package gcstest runs fake-gcs-server in process, on a free loopback
// port, for tests of the GCS sink and for end-to-end tests that run the
// pg-cdc binary against it.
//
// An in-process test opens the sink with
//
//	gcs.New(ctx, gcs.Options{Bucket: bucket, Endpoint: endpoint, NoAuth: true})
//
// and a pg-cdc process is pointed at it with the environment variable
// STORAGE_EMULATOR_HOST=<endpoint> (the storage client's own switch to an
// emulator, without authentication) and storage.bucket set to the bucket.
package gcstest

import (
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// Bucket is the bucket Start creates.
const Bucket = "pgcdc-test"

// Start runs a fake GCS server over plain HTTP on 127.0.0.1 with one empty
// bucket, and stops it when the test ends. The endpoint is the server's
// base URL, "http://127.0.0.1:<port>".
func Start(t testing.TB) (endpoint, bucket string) {
	t.Helper()
	srv := StartServer(t)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: Bucket})
	return srv.URL(), Bucket
}

// StartServer runs a fake GCS server over plain HTTP on a free port of
// 127.0.0.1 with no buckets, for tests that need several or want the
// server's handler; it is stopped when the test ends.
func StartServer(t testing.TB) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		Host:   "127.0.0.1", // Port 0: httptest picks a free loopback port
	})
	if err != nil {
		t.Fatalf("start fake GCS server: %v", err)
	}
	t.Cleanup(srv.Stop)
	return srv
}
