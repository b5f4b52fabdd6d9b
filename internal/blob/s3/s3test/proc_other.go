//go:build !linux

package s3test

import "syscall"

// sysProcAttr: only Linux can tie the server's life to the test binary's.
func sysProcAttr() *syscall.SysProcAttr { return nil }
