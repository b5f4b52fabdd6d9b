package sdnotify

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listen opens a datagram socket like systemd's notify socket and returns
// its NOTIFY_SOCKET value and a function that reads one datagram.
func listen(t *testing.T, name string) func() string {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return func() string {
		t.Helper()
		if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("read notification: %v", err)
		}
		return string(buf[:n])
	}
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestNotifications(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	read := listen(t, sock)
	n := New(env(map[string]string{"NOTIFY_SOCKET": sock}), 42)
	if !n.Enabled() {
		t.Fatal("Enabled() = false with NOTIFY_SOCKET set")
	}
	for _, c := range []struct {
		send func() error
		want string
	}{
		{n.Ready, "READY=1\n"},
		{func() error { return n.Status("streaming\nslot s at 0/1") }, "STATUS=streaming slot s at 0/1\n"},
		{n.Watchdog, "WATCHDOG=1\n"},
		{n.Stopping, "STOPPING=1\n"},
		{func() error { return n.Notify("READY=1", "STATUS=up") }, "READY=1\nSTATUS=up\n"},
	} {
		if err := c.send(); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

func TestAbstractSocket(t *testing.T) {
	name := fmt.Sprintf("@pgcdc-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	read := listen(t, name)
	n := New(env(map[string]string{"NOTIFY_SOCKET": name}), 1)
	if err := n.Ready(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "READY=1\n" {
		t.Errorf("got %q", got)
	}
}

func TestDisabledIsNoOp(t *testing.T) {
	for _, n := range []*Notifier{nil, {}, New(env(nil), 1)} {
		if n.Enabled() {
			t.Error("Enabled() = true without NOTIFY_SOCKET")
		}
		for _, f := range []func() error{n.Ready, n.Stopping, n.Watchdog, func() error { return n.Status("x") }} {
			if err := f(); err != nil {
				t.Errorf("disabled notifier: %v", err)
			}
		}
		if d, ok := n.WatchdogInterval(); ok || d != 0 {
			t.Errorf("WatchdogInterval() = %v, %v without WATCHDOG_USEC", d, ok)
		}
	}
}

func TestErrors(t *testing.T) {
	missing := New(env(map[string]string{"NOTIFY_SOCKET": filepath.Join(t.TempDir(), "none")}), 1)
	if err := missing.Ready(); err == nil {
		t.Error("no error for a socket that does not exist")
	}
	for _, s := range []string{"relative.sock", "@", "vsock:2:1234"} {
		if err := New(env(map[string]string{"NOTIFY_SOCKET": s}), 1).Ready(); err == nil {
			t.Errorf("NOTIFY_SOCKET=%q: no error", s)
		}
	}
	sock := filepath.Join(t.TempDir(), "notify.sock")
	listen(t, sock)
	n := New(env(map[string]string{"NOTIFY_SOCKET": sock}), 1)
	for _, a := range []string{"READY", "A=1\nB=2"} {
		if err := n.Notify(a); err == nil || !strings.Contains(err.Error(), "KEY=value") {
			t.Errorf("Notify(%q) = %v, want a KEY=value error", a, err)
		}
	}
}

func TestWatchdogInterval(t *testing.T) {
	for _, c := range []struct {
		usec, pid string
		want      time.Duration
	}{
		{"", "", 0},
		{"0", "", 0},
		{"abc", "", 0},
		{"-5", "", 0},
		{"99999999999999999999", "", 0},
		{"30000000", "", 30 * time.Second},
		{"30000000", "42", 30 * time.Second},
		{"30000000", "43", 0}, // meant for another process
		{"1500", "42", 1500 * time.Microsecond},
	} {
		n := New(env(map[string]string{"WATCHDOG_USEC": c.usec, "WATCHDOG_PID": c.pid}), 42)
		got, ok := n.WatchdogInterval()
		if got != c.want || ok != (c.want > 0) {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: got %v, %v; want %v", c.usec, c.pid, got, ok, c.want)
		}
	}
}
