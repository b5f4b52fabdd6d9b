package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Socket tunes a client connection.
type Socket struct {
	// RcvLowat sets SO_RCVLOWAT: the kernel wakes the reader only once this
	// many bytes are queued (or a deadline passes). 0 leaves the default (1).
	RcvLowat int
	// RcvBuf sets SO_RCVBUF (the kernel's receive buffer, hence the TCP
	// window) before connecting; 0 leaves the kernel's autotuning.
	RcvBuf int
	// ReadBuffer puts a bufio.Reader of this size between the socket and
	// pgconn's 8 KiB chunk reader, so one read(2) takes up to this much.
	// 0 leaves pgconn's default.
	ReadBuffer int
}

// connect opens a connection with the socket tuning applied. replication
// "database" opens a logical replication connection. With poll > 0 (and
// SO_RCVLOWAT) every read waits at most poll before it takes what has
// arrived, so a tail shorter than the low-water mark is not stuck; such a
// connection ignores deadlines, which suits a client that never cancels.
func connect(ctx context.Context, url, replication string, s Socket, poll time.Duration) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, errors.New("parse connection URL")
	}
	if replication != "" {
		cfg.RuntimeParams["replication"] = replication
	}
	if s.ReadBuffer > 0 {
		size := s.ReadBuffer
		cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
			return pgproto3.NewFrontend(bufio.NewReaderSize(r, size), w)
		}
	}
	if s.RcvBuf > 0 {
		size := s.RcvBuf
		dialer := &net.Dialer{KeepAlive: 5 * time.Minute, Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
			}); err != nil {
				return err
			}
			return serr
		}}
		cfg.DialFunc = dialer.DialContext
	}
	if poll > 0 {
		cfg.AfterNetConnect = func(_ context.Context, _ *pgconn.Config, c net.Conn) (net.Conn, error) {
			return &pollConn{Conn: c, poll: poll}, nil
		}
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	// Set once connected: the start-up exchange is a few small messages.
	if s.RcvLowat > 0 {
		if err := setRcvLowat(conn.Conn(), s.RcvLowat); err != nil {
			conn.Close(context.Background())
			return nil, err
		}
	}
	return conn, nil
}

// pollConn bounds each wait for data, then reads what has arrived.
type pollConn struct {
	net.Conn
	poll time.Duration
}

// SyscallConn reaches the socket (for setRcvLowat).
func (c *pollConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("%T has no file descriptor", c.Conn)
	}
	return sc.SyscallConn()
}

func (c *pollConn) Read(p []byte) (int, error) {
	for {
		if err := c.Conn.SetReadDeadline(time.Now().Add(c.poll)); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(p)
		var ne net.Error
		if n == 0 && errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		return n, err
	}
}

func setRcvLowat(c net.Conn, n int) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return fmt.Errorf("set SO_RCVLOWAT: %T has no file descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return fmt.Errorf("set SO_RCVLOWAT: %w", err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	}); err != nil {
		return fmt.Errorf("set SO_RCVLOWAT: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("set SO_RCVLOWAT: %w", serr)
	}
	return nil
}
