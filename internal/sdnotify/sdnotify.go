// Package sdnotify is a small client of systemd's service notification
// protocol (sd_notify(3)), without dependencies: a Type=notify unit learns
// from it that the service is ready, that it is stopping, what it is doing
// (STATUS=), and that it is still alive (WATCHDOG=1).
//
// The protocol is one datagram per notification, "KEY=value" lines, sent
// to the AF_UNIX datagram socket named in $NOTIFY_SOCKET: a path, or an
// abstract socket name written with a leading '@'. Without $NOTIFY_SOCKET
// (not started by systemd, or a unit of another Type=) every call is a
// no-op that returns nil, so callers never need to ask first.
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// sendTimeout bounds one notification: a datagram send blocks only while
// the receiver's queue is full, and a stuck systemd must not stall the
// caller.
const sendTimeout = time.Second

// Notifier sends notifications to the socket named by the environment it
// was built from. The zero value is disabled. It is safe for concurrent
// use: every notification opens its own socket.
type Notifier struct {
	socket string // $NOTIFY_SOCKET; "" disables
	// watchdog is the interval systemd expects WATCHDOG=1 within; zero
	// when the watchdog is off or meant for another process.
	watchdog time.Duration
}

// FromEnv reads $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID of this
// process.
func FromEnv() *Notifier { return New(os.Getenv, os.Getpid()) }

// New builds a Notifier from an environment lookup (os.Getenv) for the
// process pid; tests pass their own.
func New(getenv func(string) string, pid int) *Notifier {
	n := &Notifier{socket: getenv("NOTIFY_SOCKET")}
	usec, err := strconv.ParseUint(getenv("WATCHDOG_USEC"), 10, 63)
	if err != nil || usec == 0 || usec > uint64(time.Duration(1<<63-1)/time.Microsecond) {
		return n
	}
	// systemd sets WATCHDOG_PID to the main process; a child that inherited
	// the variables must not ping on its parent's behalf (sd_watchdog_enabled).
	if p := getenv("WATCHDOG_PID"); p != "" && p != strconv.Itoa(pid) {
		return n
	}
	n.watchdog = time.Duration(usec) * time.Microsecond
	return n
}

// Enabled reports whether notifications go anywhere.
func (n *Notifier) Enabled() bool { return n != nil && n.socket != "" }

// WatchdogInterval is WatchdogSec= of the unit: systemd kills the service
// when no WATCHDOG=1 arrives within it. ok is false when the watchdog is
// off (no $WATCHDOG_USEC, or $WATCHDOG_PID names another process).
// sd_watchdog_enabled(3) advises pinging at half the interval.
func (n *Notifier) WatchdogInterval() (time.Duration, bool) {
	if n == nil || n.watchdog == 0 {
		return 0, false
	}
	return n.watchdog, true
}

// Ready tells systemd that start-up has finished (READY=1): a Type=notify
// unit counts as started from here on.
func (n *Notifier) Ready() error { return n.Notify("READY=1") }

// Stopping tells systemd that the service is shutting down (STOPPING=1).
func (n *Notifier) Stopping() error { return n.Notify("STOPPING=1") }

// Status sets the one-line status `systemctl status` shows (STATUS=).
// Line breaks become spaces: the protocol's value ends at the newline.
func (n *Notifier) Status(status string) error {
	return n.Notify("STATUS=" + strings.Join(strings.Fields(status), " "))
}

// Watchdog is one keep-alive ping (WATCHDOG=1).
func (n *Notifier) Watchdog() error { return n.Notify("WATCHDOG=1") }

// Notify sends the assignments ("KEY=value", no newline in any) as one
// datagram. Without a socket it does nothing and returns nil.
func (n *Notifier) Notify(assignments ...string) error {
	if !n.Enabled() {
		return nil
	}
	for _, a := range assignments {
		if !strings.Contains(a, "=") || strings.Contains(a, "\n") {
			return fmt.Errorf("sd_notify: %q is not one KEY=value line", a)
		}
	}
	addr, err := socketAddr(n.socket)
	if err != nil {
		return err
	}
	conn, err := net.DialUnix("unixgram", nil, addr)
	if err != nil {
		return fmt.Errorf("sd_notify: connect to %s: %w", n.socket, err)
	}
	defer conn.Close()
	if err := conn.SetWriteDeadline(time.Now().Add(sendTimeout)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	if _, err := conn.Write([]byte(strings.Join(assignments, "\n") + "\n")); err != nil {
		return fmt.Errorf("sd_notify: send to %s: %w", n.socket, err)
	}
	return nil
}

// socketAddr parses $NOTIFY_SOCKET: an absolute path, or '@' and an
// abstract name (Go's net package maps a leading '@' to the abstract
// namespace's NUL byte, as systemd does).
func socketAddr(s string) (*net.UnixAddr, error) {
	switch {
	case strings.HasPrefix(s, "/"), strings.HasPrefix(s, "@") && len(s) > 1:
		return &net.UnixAddr{Name: s, Net: "unixgram"}, nil
	default:
		// systemd 256 also offers vsock: addresses, for virtual machines;
		// a service on the host never gets one.
		return nil, errors.New("sd_notify: NOTIFY_SOCKET " + strconv.Quote(s) + " is neither a path nor an abstract socket name")
	}
}
