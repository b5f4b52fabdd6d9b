package manifest

import (
	"context"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob/s3"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3/s3test"
)

// TestHistoryOnS3: the log on an S3-compatible store (versitygw), whose
// create-only puts are If-None-Match: past a periodic checkpoint, across a
// writer killed between its manifest write and its log write, every
// version is rebuilt exactly, and a point resolves.
func TestHistoryOnS3(t *testing.T) {
	srv := s3test.Start(t)
	store, err := s3.New(context.Background(), s3.Options{
		Bucket: srv.Bucket, Prefix: "history", Endpoint: srv.Endpoint, Region: srv.Region, ForcePathStyle: true,
		PartSize: s3.MinPartSize, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, RequestTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, mc := newSim(t, store)
	for i := range 105 {
		if i == 60 {
			s.killedCommit(mc)
			mc = s.open()
		}
		s.commit(mc, "flush", flush(simTables, 3, i%40 == 0, s.clock))
	}
	s.checkAll()
	r, err := NewHistory(store).Resolve(s.ctx, Point{Kind: PointEpoch, Epoch: 50})
	if err != nil || r.Header.Epoch != 50 || r.Version != 51 {
		t.Errorf("epoch:50 = %+v, %v; want version 51", r, err)
	}
}
