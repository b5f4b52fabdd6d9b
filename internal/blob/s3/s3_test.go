package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/goleak"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/blobtest"
	"github.com/pg-cdc/pg-cdc/internal/blob/s3/s3test"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Idle keep-alive connections of the SDK's HTTP clients, which
		// offer no way to close them; the transfer manager's own
		// goroutines are still checked.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// openStore returns a Store on srv with the smallest part size, so that
// blobtest's large objects take the multipart path.
func openStore(t *testing.T, srv *s3test.Server, bucket, prefix string, edit ...func(*Options)) *Store {
	t.Helper()
	opts := Options{
		Bucket:          bucket,
		Prefix:          prefix,
		Endpoint:        srv.Endpoint,
		Region:          srv.Region,
		ForcePathStyle:  true,
		PartSize:        MinPartSize,
		AccessKeyID:     srv.AccessKey,
		SecretAccessKey: srv.SecretKey,
		RequestTimeout:  30 * time.Second,
	}
	for _, e := range edit {
		e(&opts)
	}
	s, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// rawClient talks to srv without the Store, to look behind it.
func rawClient(srv *s3test.Server) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(srv.Endpoint),
		UsePathStyle: true,
		Region:       srv.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// TestConformance runs the blob suite on versitygw, each subtest in a
// prefix of its own in one bucket.
func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	var n atomic.Int64
	blobtest.Run(t, func(t *testing.T) blob.Store {
		return openStore(t, srv, srv.Bucket, fmt.Sprintf("sinks/t%03d", n.Add(1)))
	})
}

// TestConformanceBucketRoot runs the suite without a prefix, each subtest
// in a bucket of its own.
func TestConformanceBucketRoot(t *testing.T) {
	srv := s3test.Start(t)
	blobtest.Run(t, func(t *testing.T) blob.Store {
		return openStore(t, srv, srv.NewTestBucket(t), "")
	})
}

func TestProbeConditional(t *testing.T) {
	srv := s3test.Start(t)
	s := openStore(t, srv, srv.Bucket, "probe")
	if err := blob.ProbeConditional(ctx(t), s, "_pgcdc/probe"); err != nil {
		t.Fatalf("ProbeConditional on versitygw: %v", err)
	}
	infos, err := s.List(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 0 {
		t.Errorf("the probe left %v", infos)
	}
}

func TestPrefix(t *testing.T) {
	srv := s3test.Start(t)
	ab := openStore(t, srv, srv.Bucket, "a/b")
	abc := openStore(t, srv, srv.Bucket, "/a/bc/") // slashes around a prefix are ignored
	root := openStore(t, srv, srv.Bucket, "")
	if err := ab.Put(ctx(t), "k", strings.NewReader("in a/b")); err != nil {
		t.Fatal(err)
	}
	if err := abc.Put(ctx(t), "k", strings.NewReader("in a/bc")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    *Store
		want []string
	}{
		{ab, []string{"k"}},
		{abc, []string{"k"}},
		{root, []string{"a/b/k", "a/bc/k"}},
	} {
		infos, err := tc.s.List(ctx(t), "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, i := range infos {
			got = append(got, i.Key)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%v: List = %q, want %q", tc.s, got, tc.want)
		}
	}
	rc, err := root.Get(ctx(t), "a/b/k")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "in a/b" {
		t.Errorf("object a/b/k = %q", data)
	}
	if got, want := ab.String(), "s3://"+srv.Bucket+"/a/b/"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestListPages(t *testing.T) {
	srv := s3test.Start(t)
	s := openStore(t, srv, srv.Bucket, "pages")
	s.pageSize = 2
	var want []string
	for i := range 7 {
		key := fmt.Sprintf("p/%02d", i)
		want = append(want, key)
		if err := s.Put(ctx(t), key, strings.NewReader(key)); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := s.List(ctx(t), "p/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range infos {
		got = append(got, i.Key)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("List with 2 keys a page = %q, want %q", got, want)
	}
}

// TestChecksums runs small and multipart round trips with the SDK's
// default checksums on, which versitygw accepts too.
func TestChecksums(t *testing.T) {
	srv := s3test.Start(t)
	s := openStore(t, srv, srv.Bucket, "checksums", func(o *Options) { o.Checksums = true })
	for _, size := range []int{0, 1000, 2*MinPartSize + 17} {
		data := bytes.Repeat([]byte{byte(size)}, size)
		copy(data, fmt.Sprintf("size %d", size))
		key := fmt.Sprintf("obj-%d", size)
		if err := s.Put(ctx(t), key, bytes.NewReader(data)); err != nil {
			t.Fatalf("Put %d bytes: %v", size, err)
		}
		rc, err := s.Get(ctx(t), key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("read %d bytes: %v", size, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("round trip of %d bytes returned %d different bytes", size, len(got))
		}
	}
	v, err := s.PutIf(ctx(t), "cas", []byte("one"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIf(ctx(t), "cas", []byte("two"), v); err != nil {
		t.Fatal(err)
	}
}

// cancelAfter is a reader of n bytes that cancels a context once it has
// handed out limit of them, like a daemon shutting down mid-upload.
type cancelAfter struct {
	n, limit int
	cancel   context.CancelFunc
}

func (r *cancelAfter) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	if r.limit <= 0 {
		r.cancel()
	}
	m := min(len(p), r.n)
	clear(p[:m])
	r.n -= m
	r.limit -= m
	return m, nil
}

// TestFailedMultipartAborted checks behind the Store that failed and
// canceled multipart uploads are aborted, not left to collect parts.
func TestFailedMultipartAborted(t *testing.T) {
	srv := s3test.Start(t)
	s := openStore(t, srv, srv.Bucket, "abort")

	boom := errors.New("boom")
	err := s.Put(ctx(t), "failed", io.MultiReader(bytes.NewReader(make([]byte, 2*MinPartSize+1)), iotestErr(boom)))
	if !errors.Is(err, boom) {
		t.Fatalf("Put with a failing reader = %v, want it to wrap %v", err, boom)
	}

	c, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = s.Put(c, "canceled", &cancelAfter{n: 3 * MinPartSize, limit: MinPartSize + 1, cancel: cancel})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put canceled mid-upload = %v, want context.Canceled", err)
	}

	out, err := rawClient(srv).ListMultipartUploads(ctx(t), &s3.ListMultipartUploadsInput{
		Bucket: aws.String(srv.Bucket),
		Prefix: aws.String("abort/"),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range out.Uploads {
		t.Errorf("multipart upload of %s (id %s) was not aborted", aws.ToString(u.Key), aws.ToString(u.UploadId))
	}
	infos, err := s.List(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 0 {
		t.Errorf("failed uploads left objects: %v", infos)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func iotestErr(err error) io.Reader { return errReader{err} }

func TestMissingBucket(t *testing.T) {
	srv := s3test.Start(t)
	s := openStore(t, srv, "no-such-bucket", "")
	if _, err := s.Get(ctx(t), "k"); err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Get in a missing bucket = %v, want an error that is not ErrNotFound", err)
	}
	if err := s.Delete(ctx(t), "k"); err == nil {
		t.Error("Delete in a missing bucket succeeded")
	}
	if _, err := s.PutIf(ctx(t), "k", []byte("x"), "\"etag\""); err == nil || errors.Is(err, blob.ErrPrecondition) {
		t.Errorf("PutIf in a missing bucket = %v, want an error that is not ErrPrecondition", err)
	}
	if _, _, err := s.ReadVersion(ctx(t), "k"); err == nil || errors.Is(err, blob.ErrNotFound) {
		t.Errorf("ReadVersion in a missing bucket = %v, want an error that is not ErrNotFound", err)
	}
}

// TestLargePutIsMultipart checks that blobtest's large objects really take
// the multipart path with the part size the tests use: the ETag of a
// multipart object ends in "-<parts>".
func TestLargePutIsMultipart(t *testing.T) {
	srv := s3test.Start(t)
	s := openStore(t, srv, srv.Bucket, "multipart")
	for _, tc := range []struct {
		size int
		etag string // suffix
	}{
		{MinPartSize, `"`},       // one part: a plain PutObject
		{MinPartSize + 1, `-2"`}, // just past it
		{12<<20 + 12345, `-3"`},  // blobtest's large object
	} {
		key := fmt.Sprintf("obj-%d", tc.size)
		if err := s.Put(ctx(t), key, bytes.NewReader(make([]byte, tc.size))); err != nil {
			t.Fatal(err)
		}
		data, v, err := s.ReadVersion(ctx(t), key)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) != tc.size {
			t.Errorf("%s: read %d bytes", key, len(data))
		}
		if !strings.HasSuffix(string(v), tc.etag) || (tc.etag == `"` && strings.Contains(string(v), "-")) {
			t.Errorf("%s: ETag %s, want one ending in %s", key, v, tc.etag)
		}
	}
}
