//go:build !linux

package postgres

import (
	"errors"
	"net"
)

// setRcvLowat is Linux-only; elsewhere the stream is read as it comes.
func setRcvLowat(net.Conn, int) error { return errors.New("SO_RCVLOWAT: not supported on this OS") }
