package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// usage is what one child process cost.
type usage struct {
	Wall   time.Duration // start to the measured end (exit, or the harness's own end condition)
	CPU    time.Duration // user + system, whole process life
	MaxRSS int64         // bytes
}

// proc is a running child. Its one goroutine waits for the process; done is
// closed when it has exited.
type proc struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	stdout  bytes.Buffer
	logFile *os.File
	done    chan struct{}
	err     error
	// exitTime is when Wait returned, set before done is closed.
	exitTime time.Time
}

// startProc starts name with args. Output goes to logPath when set
// (stdout is kept in memory either way for the result line).
func startProc(name string, args, env []string, logPath string) (*proc, error) {
	p := &proc{name: name, done: make(chan struct{})}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, and SIGKILL if the harness dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stdout = &p.stdout
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		p.logFile = f
		cmd.Stderr = f
	} else {
		cmd.Stderr = &p.stdout
	}
	p.cmd = cmd
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		if p.logFile != nil {
			p.logFile.Close()
		}
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		p.exitTime = time.Now()
		if p.logFile != nil {
			p.logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the exit (killing the process after timeout) and returns
// its usage, with Wall up to the exit.
func (p *proc) wait(timeout time.Duration) (usage, error) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return usage{}, fmt.Errorf("%s did not finish within %s; killed it", p.name, timeout)
	}
	u := p.usage()
	u.Wall = p.exitTime.Sub(p.started)
	if p.err != nil {
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			return u, fmt.Errorf("%s exited with code %d: %s", p.name, ee.ExitCode(), strings.TrimSpace(tail(p.stdout.String(), 20)))
		}
		return u, fmt.Errorf("%s: %w", p.name, p.err)
	}
	return u, nil
}

// stop sends SIGTERM and waits for the exit.
func (p *proc) stop(timeout time.Duration) (usage, error) {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	return p.wait(timeout)
}

// kill ends the child at once (cleanup after a failure).
func (p *proc) kill() {
	if !p.exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) usage() usage {
	ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return usage{}
	}
	return usage{
		CPU:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		MaxRSS: ru.Maxrss * 1024, // KiB on Linux
	}
}

// runProc runs a child to completion and returns its stdout and usage.
func runProc(timeout time.Duration, name string, args, env []string, logPath string) (string, usage, error) {
	p, err := startProc(name, args, env, logPath)
	if err != nil {
		return "", usage{}, err
	}
	u, err := p.wait(timeout)
	return p.stdout.String(), u, err
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
