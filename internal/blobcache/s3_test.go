package blobcache

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3/s3test"
)

// TestS3 fills the cache from a real S3-compatible server (versitygw on
// loopback; see s3test for when a missing server skips and when it fails).
func TestS3(t *testing.T) {
	srv := s3test.Start(t)
	store, err := s3.New(context.Background(), s3.Options{
		Bucket:          srv.Bucket,
		Prefix:          "sink",
		Endpoint:        srv.Endpoint,
		Region:          srv.Region,
		ForcePathStyle:  true,
		AccessKeyID:     srv.AccessKey,
		SecretAccessKey: srv.SecretKey,
		RequestTimeout:  30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3<<20+17) // several read buffers, an odd length
	rand.Read(big)
	bigFile := put(t, store, dataKey, string(big))
	small := put(t, store, "public/orders/g0001/base/part-00000.parquet", "small parquet")
	counting := newCounting(store)
	src, err := Open(counting, Options{Dir: filepath.Join(t.TempDir(), "cache"), MaxBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := src.(*Cache)
	t.Cleanup(func() { c.Close() })

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			paths, release, err := c.Acquire(testCtx(t), []File{bigFile, small})
			if err != nil {
				t.Error(err)
				return
			}
			defer release()
			if got, err := os.ReadFile(paths[0]); err != nil || string(got) != string(big) {
				t.Errorf("big file: %d bytes, %v; want the object's %d", len(got), err, len(big))
			}
			if got, err := os.ReadFile(paths[1]); err != nil || string(got) != "small parquet" {
				t.Errorf("small file: %q, %v", got, err)
			}
		})
	}
	wg.Wait()
	if counting.count(bigFile.Key) != 1 || counting.count(small.Key) != 1 {
		t.Errorf("gets %v, want one per key", counting.gets)
	}

	if _, err := c.Path(testCtx(t), "public/orders/g0001/delta/00000099/part-00000.parquet", 10); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("missing object: %v, want blob.ErrNotFound", err)
	}
	var se *SizeError
	if _, err := c.Path(testCtx(t), small.Key, 5); !errors.As(err, &se) || se.Actual != small.Size || se.AtLeast {
		t.Errorf("long body: %v, want a *SizeError with the object's size %d", err, small.Size)
	}
	if _, err := c.Path(testCtx(t), small.Key, 500); !errors.As(err, &se) || se.Actual != small.Size {
		t.Errorf("short body: %v, want a *SizeError with the object's size %d", err, small.Size)
	}
	if got := cached(t, c); !sameKeys(got, bigFile.Key, small.Key) {
		t.Errorf("cached %q", got)
	}
}
