package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// findBinDir returns the directory holding initdb and pg_ctl. pg_ctl and
// initdb find the postgres binary next to their own (resolved) location, so
// only these two are looked up.
func findBinDir(explicit string) (string, error) {
	if explicit != "" {
		if hasBinaries(explicit) {
			return explicit, nil
		}
		return "", fmt.Errorf("no initdb and pg_ctl in %s: %w", explicit, ErrNoPostgres)
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if d := filepath.Dir(p); hasBinaries(d) {
			return d, nil
		}
	}
	// Debian and Ubuntu keep server binaries off PATH. 15 is the version
	// the project is developed against; otherwise take the newest.
	candidates := []string{"/usr/lib/postgresql/15/bin"}
	others, _ := filepath.Glob("/usr/lib/postgresql/*/bin") // the pattern is constant: no error
	sort.Slice(others, func(i, j int) bool { return versionOf(others[i]) > versionOf(others[j]) })
	candidates = append(candidates, others...)
	for _, d := range candidates {
		if hasBinaries(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no initdb and pg_ctl on PATH or under /usr/lib/postgresql/*/bin: %w", ErrNoPostgres)
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir))) // non-numeric sorts last
	return v
}

func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// osUser is the account PostgreSQL runs as when we are root; nil otherwise
// (then it runs as ourselves).
type osUser struct {
	uid, gid uint32
}

func lookupRunAs() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, but no postgres OS user to run PostgreSQL as (%w): %w", err, ErrNoPostgres)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres OS user: uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres OS user: gid %q: %w", u.Gid, err)
	}
	return &osUser{uid: uint32(uid), gid: uint32(gid)}, nil
}

func (u *osUser) chown(path string) error {
	if u == nil {
		return nil
	}
	return os.Chown(path, int(u.uid), int(u.gid))
}

// command runs one PostgreSQL program as the cluster's OS user with a small,
// fixed environment: PGDATA, PGPORT and friends from the caller's environment
// must not redirect it to another cluster, and LC_ALL=C keeps messages in
// English for logMentionsBindFailure.
func (c *Cluster) command(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir // the caller's working directory may be unreadable to the postgres user
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "HOME=" + c.Dir}
	if c.runAs != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: c.runAs.uid, Gid: c.runAs.gid}}
	}
	// pg_ctl start redirects the postmaster's stdin/stdout/stderr to the log,
	// so the output pipe closes when pg_ctl itself exits.
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// postmasterPID reads the first line of postmaster.pid.
func (c *Cluster) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("read postmaster.pid: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("postmaster.pid: bad pid %q", first)
	}
	return pid, nil
}

// killGroup SIGKILLs pid, and its process group when pid leads one, and
// waits until none of them runs any more.
func killGroup(pid int) error {
	target := pid
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
		target = -pid // the postmaster and its backends
	}
	if err := syscall.Kill(target, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("send SIGKILL: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for groupAlive(pid, target < 0) {
		if time.Now().After(deadline) {
			return errors.New("processes still running 30s after SIGKILL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// groupAlive reports whether pid (or, with group, any member of process group
// pid) still runs. Zombies do not count: the postmaster is not our child, and
// a container's init may be slow to reap it.
func groupAlive(pid int, group bool) bool {
	if !group {
		return running(pid)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		// No procfs: ask the kernel about the group; zombies count here.
		return syscall.Kill(-pid, 0) == nil
	}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pgrp, state, ok := procStat(p); ok && pgrp == pid && state != 'Z' && state != 'X' {
			return true
		}
	}
	return false
}

func running(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	_, state, ok := procStat(pid)
	return !ok || (state != 'Z' && state != 'X')
}

// procStat reads the state and process group from /proc/<pid>/stat.
func procStat(pid int) (pgrp int, state byte, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The command name is in parentheses and may contain spaces; fields after
	// the last ')' are: state ppid pgrp ...
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err = strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	return pgrp, f[0][0], true
}
