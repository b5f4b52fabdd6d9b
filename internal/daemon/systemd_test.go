package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// notifySocket stands in for systemd: it sets NOTIFY_SOCKET (and, if
// watchdog > 0, WATCHDOG_USEC) and collects the datagrams.
func notifySocket(t *testing.T, watchdog time.Duration) <-chan string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_PID", "")
	t.Setenv("WATCHDOG_USEC", "")
	if watchdog > 0 {
		t.Setenv("WATCHDOG_USEC", strings.TrimSuffix(watchdog.String(), "ms")+"000")
	}
	got := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return got
}

func next(t *testing.T, got <-chan string) string {
	t.Helper()
	select {
	case m := <-got:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no notification within 5s")
		return ""
	}
}

// lockedLog is a log sink the watchdog goroutine writes while the test
// reads it.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestSystemdNotifications(t *testing.T) {
	got := notifySocket(t, 0)
	var logs bytes.Buffer
	sd := newSystemd(slog.New(slog.NewTextHandler(&logs, nil)))
	sd.Ready()
	sd.Status("streaming slot s\nfrom 0/1")
	sd.Stopping()
	for _, want := range []string{"READY=1\n", "STATUS=streaming slot s from 0/1\n", "STOPPING=1\n"} {
		if m := next(t, got); m != want {
			t.Errorf("got %q, want %q", m, want)
		}
	}
	// Without a watchdog, RunWatchdog returns at once.
	returned := make(chan struct{})
	go func() {
		sd.RunWatchdog(context.Background(), func() bool { return true })
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("RunWatchdog without WATCHDOG_USEC did not return")
	}
	if logs.Len() != 0 {
		t.Errorf("unexpected log: %s", logs.String())
	}
}

// TestSystemdWatchdog: pings at half the interval while alive, none while
// not, and RunWatchdog returns with its context.
func TestSystemdWatchdog(t *testing.T) {
	got := notifySocket(t, 200*time.Millisecond)
	var logs lockedLog
	sd := newSystemd(slog.New(slog.NewTextHandler(&logs, nil)))
	var alive atomic.Bool
	alive.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	start := time.Now()
	go func() {
		sd.RunWatchdog(ctx, alive.Load)
		close(returned)
	}()
	for range 3 {
		if m := next(t, got); m != "WATCHDOG=1\n" {
			t.Fatalf("got %q, want WATCHDOG=1", m)
		}
	}
	// The first ping is immediate, then one per 100ms.
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Errorf("3 pings in %v: faster than half the interval", el)
	}
	alive.Store(false)
	time.Sleep(50 * time.Millisecond)
	for len(got) > 0 { // a ping already under way when alive turned false
		<-got
	}
	select {
	case m := <-got:
		t.Fatalf("notification %q while not alive", m)
	case <-time.After(400 * time.Millisecond):
	}
	if !strings.Contains(logs.String(), "watchdog pings withheld") {
		t.Errorf("no warning while not alive: %q", logs.String())
	}
	alive.Store(true)
	if m := next(t, got); m != "WATCHDOG=1\n" {
		t.Fatalf("got %q after alive again", m)
	}
	cancel()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("RunWatchdog did not return after cancel")
	}
}

func TestSystemdOutsideSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "1000000")
	var logs bytes.Buffer
	sd := newSystemd(slog.New(slog.NewTextHandler(&logs, nil)))
	sd.Ready()
	sd.Status("x")
	sd.Stopping()
	if logs.Len() != 0 {
		t.Errorf("logged outside systemd: %s", logs.String())
	}
}

func TestSystemdFailureLoggedOnce(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone.sock"))
	var logs bytes.Buffer
	sd := newSystemd(slog.New(slog.NewTextHandler(&logs, nil)))
	sd.Status("a")
	sd.Status("b")
	if n := strings.Count(logs.String(), "systemd notification failed"); n != 1 {
		t.Errorf("%d warnings for two failed notifications, want 1: %s", n, logs.String())
	}
}
