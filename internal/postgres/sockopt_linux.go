package postgres

import (
	"errors"
	"net"
	"syscall"
)

// setRcvLowat sets SO_RCVLOWAT on the TCP socket under c (under TLS too).
func setRcvLowat(c net.Conn, n int) error {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return errors.New("set SO_RCVLOWAT: no socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}
