package s3test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// recordTB records Skipf and Fatalf instead of ending the goroutine.
type recordTB struct {
	testing.TB
	skipped, failed bool
}

func (r *recordTB) Helper()               {}
func (r *recordTB) Skipf(string, ...any)  { r.skipped = true }
func (r *recordTB) Fatalf(string, ...any) { r.failed = true }

func TestSkipOrFatal(t *testing.T) {
	offline := fmt.Errorf("build versitygw: %w", ErrUnavailable)
	for _, tt := range []struct {
		ci           string
		err          error
		skip, failed bool
	}{
		{"", offline, true, false},
		{"false", offline, true, false},
		{"true", offline, false, true},
		{"1", offline, false, true},
		{"", errors.New("go install: exit status 1: compile error"), false, true},
		{"", errors.New("versitygw did not answer"), false, true},
	} {
		t.Setenv("CI", tt.ci)
		r := &recordTB{TB: t}
		skipOrFatal(r, tt.err)
		if r.skipped != tt.skip || r.failed != tt.failed {
			t.Errorf("CI=%q err=%v: skipped %t failed %t", tt.ci, tt.err, r.skipped, r.failed)
		}
	}
}

func TestUnreachable(t *testing.T) {
	for out, want := range map[string]bool{
		`go: github.com/versity/versitygw/cmd/versitygw@v1.8.0: module github.com/versity/versitygw/cmd/versitygw: Get "https://proxy.golang.org/github.com/versity/versitygw/cmd/versitygw/@v/v1.8.0.info": dial tcp: lookup proxy.golang.org: no such host`: true,
		`Get "https://proxy.golang.org/...": proxyconnect tcp: dial tcp 10.0.0.1:3128: connect: connection refused`:                                                                                                                                           true,
		`go: github.com/versity/versitygw/cmd/versitygw@v1.8.0: reading https://proxy.golang.org/...: 404 Not Found`:                                                                                                                                          false,
		`# github.com/versity/versitygw/backend/posix
backend/posix/posix.go:12:2: undefined: x`: false,
	} {
		if got := unreachable([]byte(out)); got != want {
			t.Errorf("unreachable(%q) = %t, want %t", out, got, want)
		}
	}
}

func TestBinaryEnv(t *testing.T) {
	t.Setenv(BinaryEnv, filepath.Join(t.TempDir(), "missing"))
	if _, err := Binary(context.Background()); err == nil {
		t.Fatalf("Binary with %s naming a missing file succeeded", BinaryEnv)
	}
}

// TestStartStop starts a server, uses its bucket, and checks that Stop
// ends the process.
func TestStartStop(t *testing.T) {
	srv, err := StartServer(context.Background(), t.TempDir())
	if err != nil {
		skipOrFatal(t, err)
		return
	}
	client := s3.New(s3.Options{
		BaseEndpoint: aws.String(srv.Endpoint),
		UsePathStyle: true,
		Region:       srv.Region,
		Credentials:  srv.client.Options().Credentials,
	})
	if _, err := client.HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String(srv.Bucket)}); err != nil {
		t.Errorf("HeadBucket(%s): %v", srv.Bucket, err)
	}
	if st, err := os.Stat(filepath.Join(srv.Dir, "data", srv.Bucket)); err != nil || !st.IsDir() {
		t.Errorf("bucket %s is not a directory of the posix backend: %v", srv.Bucket, err)
	}
	pid := srv.cmd.Process.Pid
	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("versitygw pid %d still exists after Stop (kill -0: %v)", pid, err)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
