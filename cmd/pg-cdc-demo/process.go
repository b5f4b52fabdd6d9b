package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// childAttrs puts a pg-cdc child in its own process group, so a Ctrl-C in
// the terminal reaches only the demo, which then stops the child in order
// (daemon before PostgreSQL). Pdeathsig makes the kernel send SIGTERM to the
// child if the demo dies without stopping it.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// runCommand runs a short command to completion and returns its combined
// output and exit code. err is set only when the command could not run or
// was killed; a non-zero exit is reported through code. Cancelling ctx sends
// SIGTERM (pg-cdc's graceful stop), then SIGKILL after 30 s.
func runCommand(ctx context.Context, name string, args ...string) (out string, code int, err error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.SysProcAttr = childAttrs()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	err = cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() {
		return buf.String(), exitErr.ExitCode(), nil
	}
	if err != nil {
		return buf.String(), -1, err
	}
	return buf.String(), 0, nil
}

// runStdout is runCommand with the standard output alone in out (the
// standard error is appended to it only when the command fails).
func runStdout(ctx context.Context, name string, args ...string) (out string, code int, err error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = childAttrs()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	err = cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.Exited() {
		return stdout.String() + stderr.String(), exitErr.ExitCode(), nil
	}
	if err != nil {
		return stdout.String() + stderr.String(), -1, err
	}
	return stdout.String(), 0, nil
}

// daemon is a running `pg-cdc start`, its output going to a log file. Its
// one goroutine waits for the process; stop (or the process exiting) ends it.
type daemon struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
	err  error         // cmd.Wait's result, set before done is closed
}

func startDaemon(ctx context.Context, bin, config, logPath string) (*daemon, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create pg-cdc log: %w", err)
	}
	// Not CommandContext: the daemon is stopped explicitly with stop, in
	// order, also when ctx is cancelled.
	cmd := exec.Command(bin, "-c", config, "start")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = childAttrs()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start pg-cdc: %w", err)
	}
	d := &daemon{cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		f.Close()
		close(d.done)
	}()
	return d, nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// exitStatus describes how the process ended, once it has.
func (d *daemon) exitStatus() string {
	<-d.done
	if ws, ok := d.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("was killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exited with code %d (see docs/exit-codes.md)", d.cmd.ProcessState.ExitCode())
}

// stop sends SIGTERM and waits up to timeout for the process to exit, then
// kills it. It returns the exit code; err is set when the process had to be
// killed or died from a signal.
func (d *daemon) stop(timeout time.Duration) (int, error) {
	if !d.exited() {
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return -1, fmt.Errorf("signal pg-cdc: %w", err)
		}
	}
	select {
	case <-d.done:
	case <-time.After(timeout):
		_ = d.cmd.Process.Kill() // the error that matters is the timeout
		<-d.done
		return -1, fmt.Errorf("pg-cdc did not exit within %s of SIGTERM; killed it", timeout)
	}
	code := d.cmd.ProcessState.ExitCode()
	if code < 0 {
		return code, fmt.Errorf("pg-cdc ended abnormally: %v", d.err)
	}
	return code, nil
}
