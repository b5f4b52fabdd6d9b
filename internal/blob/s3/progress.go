package s3

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// writeChunk is the largest piece of a request body written under one
// write deadline (progressConn).
const writeChunk = 16 << 10

// progressTimeouts bounds an upload's attempt by its progress rather than
// its length, so that a slow link that keeps moving never fails a part,
// while a store that stops reading or answering fails it within timeout:
// the connection must be made within timeout, and after that the attempt
// fails once, for timeout, no byte of the body was written, none was
// acknowledged by the store and none of the answer arrived (progressConn).
func progressTimeouts(timeout time.Duration) func(*http.Transport) {
	return func(tr *http.Transport) {
		dial := tr.DialContext
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return newProgressConn(c, timeout), nil
		}
	}
}

// progressConn fails a connection that makes no progress for timeout.
//
// Writes: each piece of at most writeChunk bytes must be taken within
// timeout. Once the store stops reading (a hung store, a blackholed
// network), the socket buffers fill and the next piece waits until its
// deadline; a slow store that keeps reading never makes one wait so long.
//
// Reads (the answer, which the HTTP transport waits for from the moment
// the request goes out): a read fails once the connection has made no
// progress for timeout: no write, no byte read, and no byte of the send
// queue acknowledged by the store. The last megabytes of a body can sit in
// the socket buffers long after the last write returned; on Linux the
// bytes still unacknowledged (SIOCOUTQ) are looked at every quarter of the
// timeout while a read waits, so the store taking them counts, seen at
// most a quarter of the timeout late. Elsewhere only writes and reads
// count, so the answer must begin within timeout of the last write.
//
// The HTTP transport reads on a pooled connection while it is idle too;
// such a connection is closed after timeout, which only costs a new
// connection for the next request.
type progressConn struct {
	net.Conn
	timeout time.Duration
	raw     syscall.RawConn // nil: the send queue cannot be read
	// progress is when the connection last moved (unix nanoseconds): a
	// piece of a write started or ended, a read got bytes, or the send
	// queue was seen shorter. unacked is the send queue's length at the
	// last look (-1: unknown). Writes and reads run on different
	// goroutines.
	progress atomic.Int64
	unacked  atomic.Int64
}

func newProgressConn(c net.Conn, timeout time.Duration) *progressConn {
	pc := &progressConn{Conn: c, timeout: timeout}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			pc.raw = raw
		}
	}
	pc.progress.Store(time.Now().UnixNano())
	pc.unacked.Store(-1)
	return pc
}

func (c *progressConn) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		piece := p[:min(len(p), writeChunk)]
		c.progress.Store(time.Now().UnixNano())
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(piece)
		written += n
		c.progress.Store(time.Now().UnixNano())
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	c.unacked.Store(int64(sendQueue(c.raw)))
	return written, nil
}

func (c *progressConn) Read(p []byte) (int, error) {
	for {
		// Wake at the end of the progress window, or earlier to look at
		// the send queue.
		last := time.Unix(0, c.progress.Load())
		deadline := last.Add(c.timeout)
		if look := time.Now().Add(c.timeout / 4); c.raw != nil && look.Before(deadline) {
			deadline = look
		}
		if err := c.Conn.SetReadDeadline(deadline); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(p)
		if n > 0 {
			c.progress.Store(time.Now().UnixNano())
		}
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if c.acknowledged() {
			c.progress.Store(time.Now().UnixNano())
			continue
		}
		if time.Since(time.Unix(0, c.progress.Load())) >= c.timeout {
			return n, err
		}
	}
}

// acknowledged reports whether the send queue is shorter than at the last
// look: the store took bytes of the request.
func (c *progressConn) acknowledged() bool {
	now := int64(sendQueue(c.raw))
	before := c.unacked.Swap(now)
	return now >= 0 && before >= 0 && now < before
}
