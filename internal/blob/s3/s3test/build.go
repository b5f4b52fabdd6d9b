package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Version is the versitygw release the tests run against.
const Version = "v1.8.0"

const module = "github.com/versity/versitygw/cmd/versitygw"

// Environment variables that change where the binary comes from.
const (
	// BinaryEnv names a versitygw binary to use instead of building one.
	BinaryEnv = "PGCDC_VERSITYGW"
	// ToolsDirEnv overrides ToolsDir's default.
	ToolsDirEnv = "PGCDC_TOOLS_DIR"
)

// ErrUnavailable means versitygw could not be built because the Go module
// proxy could not be reached.
var ErrUnavailable = errors.New("versitygw unavailable: go install cannot reach the Go module proxy")

// ToolsDir is where test tools are built: $PGCDC_TOOLS_DIR, or
// <user cache dir>/pg-cdc/tools (~/.cache/pg-cdc/tools on Linux).
func ToolsDir() (string, error) {
	if d := os.Getenv(ToolsDirEnv); d != "" {
		return d, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("tools directory: %w (set %s)", err, ToolsDirEnv)
	}
	return filepath.Join(cache, "pg-cdc", "tools"), nil
}

// BinaryPath is where Binary puts versitygw: $PGCDC_VERSITYGW, or
// <ToolsDir>/versitygw-<Version>/bin/versitygw. scripts/ensure-versitygw.sh
// computes the same path.
func BinaryPath() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		return p, nil
	}
	dir, err := ToolsDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "versitygw-"+Version, "bin", "versitygw"), nil
}

// Binary returns the path of the versitygw binary, building it first when
// it is not there. The first build takes a minute or more.
func Binary(ctx context.Context) (string, error) {
	path, err := BinaryPath()
	if err != nil {
		return "", err
	}
	if os.Getenv(BinaryEnv) != "" {
		if !isExecutable(path) {
			return "", fmt.Errorf("%s=%s is not an executable file", BinaryEnv, path)
		}
		return path, nil
	}
	if isExecutable(path) {
		return path, nil
	}
	binDir := filepath.Dir(path)
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("build versitygw: %w", err)
	}
	// One builder at a time per machine: test binaries of several packages
	// run at once and each may need the server.
	unlock, err := lockFile(ctx, filepath.Join(filepath.Dir(binDir), "build.lock"))
	if err != nil {
		return "", fmt.Errorf("build versitygw: %w", err)
	}
	defer unlock()
	if isExecutable(path) { // built while we waited
		return path, nil
	}
	if err := install(ctx, path); err != nil {
		return "", fmt.Errorf("build versitygw %s: %w", Version, err)
	}
	return path, nil
}

// install runs go install into a scratch GOBIN next to path and renames the
// binary into place, so that path never names a partial file.
func install(ctx context.Context, path string) error {
	goBin, err := goCommand()
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(filepath.Dir(path), ".install-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	cmd := exec.CommandContext(ctx, goBin, "install", module+"@"+Version)
	// Outside any module, so that the caller's go.mod, go.work or -mod flag
	// play no part.
	cmd.Dir = scratch
	cmd.Env = append(os.Environ(), "GOBIN="+scratch, "GOWORK=off", "GOFLAGS=-buildvcs=false")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if unreachable(out) {
			return fmt.Errorf("%w: %s", ErrUnavailable, lastLines(out, 5))
		}
		return fmt.Errorf("go install %s@%s: %w: %s", module, Version, err, lastLines(out, 20))
	}
	built := filepath.Join(scratch, "versitygw")
	if runtime.GOOS == "windows" {
		built += ".exe"
	}
	if err := os.Rename(built, path); err != nil {
		return err
	}
	return nil
}

func goCommand() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // the toolchain running the tests, when go is not on PATH
	if isExecutable(p) {
		return p, nil
	}
	return "", errors.New("no go command on PATH to build versitygw with")
}

// unreachable recognises go's messages for a module proxy it cannot reach.
func unreachable(out []byte) bool {
	s := string(out)
	for _, m := range []string{
		"dial tcp", "no such host", "connection refused", "i/o timeout",
		"network is unreachable", "proxyconnect", "TLS handshake timeout",
		"server misbehaving", "connection reset by peer",
	} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

func lastLines(out []byte, n int) string {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// lockFile takes an exclusive flock on path, polling for it as long as ctx
// allows. The kernel drops it if the process dies.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for lock %s (another build of versitygw): %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
