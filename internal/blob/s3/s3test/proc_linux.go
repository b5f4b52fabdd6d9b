package s3test

import "syscall"

// sysProcAttr has the kernel SIGKILL the server when the thread that
// started it dies. Go does not end threads under running code (only a
// goroutine that exits while locked to its thread takes the thread along,
// and no test helper does that), so in practice this fires when the test
// binary dies, for example killed by go test's -timeout.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
