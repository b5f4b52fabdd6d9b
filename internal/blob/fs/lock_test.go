package fs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

// lockChildEnv makes the test binary act as a second pg-cdc process that
// takes the writer lock on the sink root named by its value.
const lockChildEnv = "PG_CDC_BLOBFS_LOCK_CHILD_ROOT"

func TestMain(m *testing.M) {
	if root := os.Getenv(lockChildEnv); root != "" {
		os.Exit(lockChild(root))
	}
	goleak.VerifyTestMain(m)
}

// lockChild takes the lock, says so on stdout and holds it until stdin is
// closed (so it also ends if the parent test dies) or it is killed.
func lockChild(root string) int {
	s, err := New(root)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	release, err := s.LockWriter(context.Background(), fmt.Sprintf("child pid=%d", os.Getpid()))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	release()
	return 0
}

// TestLockAcrossProcesses: a writer lock held by another process makes
// LockWriter fail at once, and kill -9 of that process frees it, because
// the kernel drops flock locks with the process.
func TestLockAcrossProcesses(t *testing.T) {
	s := newStore(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+s.Root())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(l)
	}()
	select {
	case l := <-line:
		if l != "locked" {
			t.Fatalf("child: %q", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child did not take the lock within 30s")
	}

	start := time.Now()
	_, err = s.LockWriter(context.Background(), "parent")
	if !errors.Is(err, blob.ErrLocked) {
		t.Fatalf("LockWriter while the child holds the lock = %v, want blob.ErrLocked", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("LockWriter took %v to fail, want at once", d)
	}
	if want := fmt.Sprintf("child pid=%d", cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Errorf("ErrLocked %q does not name the holder %q", err, want)
	}

	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no release runs in the child
		t.Fatal(err)
	}
	cmd.Wait() // "signal: killed" is expected
	killed = true

	release, err := s.LockWriter(context.Background(), "parent")
	if err != nil {
		t.Fatalf("LockWriter after kill -9 of the holder: %v", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
}
