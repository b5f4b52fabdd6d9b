package s3

import (
	"syscall"
	"unsafe"
)

// sendQueue returns the bytes in the connection's send queue that the peer
// has not acknowledged yet (SIOCOUTQ), or -1 if they cannot be read.
func sendQueue(raw syscall.RawConn) int {
	if raw == nil {
		return -1
	}
	n := -1
	err := raw.Control(func(fd uintptr) {
		var v int32
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&v))); errno == 0 {
			n = int(v)
		}
	})
	if err != nil {
		return -1
	}
	return n
}
