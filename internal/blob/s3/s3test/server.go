package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Credentials and region of every server: throwaway, loopback only.
const (
	AccessKey = "pgcdc-test"
	SecretKey = "pgcdc-test-secret"
	Region    = "us-east-1"
)

// Timeouts of StartServer's steps.
const (
	readyTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
	// buildTimeout bounds the first build of versitygw (about 1.5 min on
	// two cores with a warm module cache, several minutes with a cold one).
	buildTimeout = 15 * time.Minute
)

// Server is a running versitygw.
type Server struct {
	// Endpoint is the server's URL, "http://127.0.0.1:<port>". Clients
	// need path-style addressing.
	Endpoint string
	// Bucket is a bucket created at start, empty.
	Bucket string
	// AccessKey, SecretKey and Region are what clients sign with.
	AccessKey, SecretKey, Region string
	// Dir holds the posix backend's data (one directory per bucket) and
	// the server's log.
	Dir string

	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd.Wait has returned
	waitErr error         // cmd.Wait's result, set before exited closes
	client  *s3.Client
	buckets atomic.Int64
}

// StartServer builds versitygw if needed and starts it on a free loopback
// port with its data in dir, which must exist. It returns once the server
// answers and Bucket exists. Call Stop when done.
func StartServer(ctx context.Context, dir string) (*Server, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	// Another process may take the free port between our probe and the
	// server's bind; then the server exits at once and we try another.
	for attempt := 1; ; attempt++ {
		s, err := start(ctx, bin, dir, data)
		if err == nil {
			return s, nil
		}
		if attempt == 3 || !errors.Is(err, errExitedEarly) {
			return nil, err
		}
	}
}

var errExitedEarly = errors.New("versitygw exited while starting")

func start(ctx context.Context, bin, dir, data string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logPath := filepath.Join(dir, "versitygw.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", data)
	// A fixed environment: VGW_* variables of the caller must not change
	// the server.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"ROOT_ACCESS_KEY=" + AccessKey,
		"ROOT_SECRET_KEY=" + SecretKey,
	}
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	s := &Server{
		Endpoint:  "http://" + addr,
		AccessKey: AccessKey,
		SecretKey: SecretKey,
		Region:    Region,
		Dir:       dir,
		cmd:       cmd,
		exited:    make(chan struct{}),
	}
	// The owner of this goroutine is Stop, which waits for it.
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		stopErr := s.Stop()
		return nil, errors.Join(err, stopErr)
	}
	s.client = s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	})
	bucket, err := s.NewBucket(ctx)
	if err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	s.Bucket = bucket
	return s, nil
}

// waitReady polls until the server answers HTTP (any status will do: an
// unsigned request is refused, but by a running server).
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			client.CloseIdleConnections()
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%w (%v): %s", errExitedEarly, s.waitErr, s.LogTail(20))
		case <-ctx.Done():
			return fmt.Errorf("versitygw on %s did not answer within %v: %s", s.Endpoint, readyTimeout, s.LogTail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// NewBucket creates an empty bucket with a fresh name and returns it.
func (s *Server) NewBucket(ctx context.Context) (string, error) {
	name := fmt.Sprintf("pgcdc-%d", s.buckets.Add(1))
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return "", fmt.Errorf("create bucket %s on versitygw %s: %w", name, s.Endpoint, err)
	}
	return name, nil
}

// Stop ends the server: SIGTERM, then SIGKILL if it is still running after
// a while. It signals only the process it started, by its PID.
func (s *Server) Stop() error {
	select {
	case <-s.exited:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop versitygw (pid %d): %w", s.cmd.Process.Pid, err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill versitygw (pid %d): %w", s.cmd.Process.Pid, err)
	}
	<-s.exited
	return nil
}

// LogTail returns the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "versitygw.log"))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) == 0 {
		return "(empty log)"
	}
	return lastLines(b, n)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts a server for this test alone, stopped when the test ends,
// with its data in a temporary directory. The first call on a machine
// builds versitygw (see Binary).
//
// Outside CI a module proxy that cannot be reached skips the test; every
// other failure, and any failure with CI=true, fails it.
func Start(tb testing.TB) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	s, err := StartServer(ctx, tb.TempDir())
	if err != nil {
		skipOrFatal(tb, err)
		return nil
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("s3test: versitygw log (last lines):\n%s", indent(s.LogTail(30)))
		}
		if err := s.Stop(); err != nil {
			tb.Errorf("s3test: %v", err)
		}
	})
	return s
}

func skipOrFatal(tb testing.TB, err error) {
	tb.Helper()
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); errors.Is(err, ErrUnavailable) && !ci {
		tb.Skipf("s3test: %v", err)
		return
	}
	tb.Fatalf("s3test: %v", err)
}

// NewTestBucket creates a fresh empty bucket on s for this test.
func (s *Server) NewTestBucket(tb testing.TB) string {
	tb.Helper()
	name, err := s.NewBucket(context.Background())
	if err != nil {
		tb.Fatalf("s3test: %v", err)
	}
	return name
}

func indent(s string) string { return "\t" + strings.ReplaceAll(s, "\n", "\n\t") }
