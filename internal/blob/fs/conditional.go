package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

// versionOf is the version of an object: the hex SHA-256 of its content.
// Content addressing needs no side file and survives copies of the sink;
// its one quirk, that writing identical bytes keeps the version, is
// harmless, because a writer whose expected version matches read exactly
// the bytes that are there.
func versionOf(data []byte) blob.Version {
	sum := sha256.Sum256(data)
	return blob.Version(hex.EncodeToString(sum[:]))
}

// ReadVersion returns the object's content and version.
func (s *Store) ReadVersion(ctx context.Context, key string) ([]byte, blob.Version, error) {
	f, err := s.open(ctx, key)
	if err != nil {
		return nil, "", fmt.Errorf("read object version: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, "", fmt.Errorf("read object version %q: %w", key, err)
	}
	return data, versionOf(data), nil
}

// PutIf replaces the object only if its current version is expected (""
// means it must not exist), so that of many concurrent callers with the
// same expected version exactly one wins: a create is a link(2), which no
// two callers can both make, and a replace holds the key's lock file.
func (s *Store) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (_ blob.Version, err error) {
	defer func() { err = s.refused(err) }()
	p, err := s.path(key)
	if err != nil {
		return "", fmt.Errorf("put object if version: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("put object %q if version %q: %w", key, expected, err)
	}
	var v blob.Version
	if expected == "" {
		v, err = s.create(ctx, p, data)
	} else {
		v, err = s.putIf(ctx, p, data, expected)
	}
	if err != nil {
		return "", fmt.Errorf("put object %q if version %q: %w", key, expected, err)
	}
	return v, nil
}

// create writes the object only if nothing is at p. The content is
// written to a temporary file and fsynced, then linked to p: link(2) fails
// with EEXIST when p exists, atomically across processes, so it needs no
// lock. A lock file would outlive the object (see doc.go: lock files are
// never deleted), and the history log creates one object per manifest
// version. A create cannot race a replace: one needs the object absent,
// the other present, and only a Delete, which neither serialises with,
// turns one state into the other.
func (s *Store) create(ctx context.Context, p string, data []byte) (blob.Version, error) {
	dir := filepath.Dir(p)
	tmp, err := s.writeTemp(dir, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		os.Remove(tmp) // best effort: a leftover temp file is invisible anyway
		return "", err
	}
	err = os.Link(tmp, p)
	// The temporary name goes whatever link did: on success p keeps the
	// file. Best effort, as above.
	os.Remove(tmp)
	if err != nil {
		if !errors.Is(err, iofs.ErrExist) {
			return "", fmt.Errorf("link into place: %w", err)
		}
		current, err := currentVersion(p)
		if err != nil {
			return "", err
		}
		if current == "" {
			// Deleted since the link failed: it existed when we tried.
			return "", fmt.Errorf("object exists: %w", blob.ErrPrecondition)
		}
		return "", fmt.Errorf("current version is %q: %w", current, blob.ErrPrecondition)
	}
	// One fsync makes the new name durable, and the removal of the
	// temporary one with it (which need not be).
	if err := syncDir(dir); err != nil {
		return "", err
	}
	return versionOf(data), nil
}

// putIf replaces an existing object (expected is not "") under the key's
// lock file.
func (s *Store) putIf(ctx context.Context, p string, data []byte, expected blob.Version) (blob.Version, error) {
	lockName := lockPrefix + filepath.Base(p)
	lock, err := s.createIn(filepath.Dir(p), func(dir string) (*os.File, error) {
		return os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o666)
	})
	if err != nil {
		return "", fmt.Errorf("open lock file: %w", err)
	}
	// Closing the file releases the flock (it belongs to this open file
	// description only), on every path out of here.
	defer lock.Close()
	if err := flockWait(ctx, lock); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	// Diagnostics for an operator looking at a stuck or contended sink
	// (design.md §2): who holds the lock and which version it expects. Not
	// fsynced: the lock's state lives in the kernel, not in these bytes.
	if err := writeNote(lock, fmt.Sprintf("pid %d expects version %q since %s\n",
		os.Getpid(), expected, time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
		return "", fmt.Errorf("write lock file %s: %w", lock.Name(), err)
	}

	current, err := currentVersion(p)
	if err != nil {
		return "", err
	}
	if current != expected {
		if current == "" {
			return "", fmt.Errorf("object does not exist: %w", blob.ErrPrecondition)
		}
		return "", fmt.Errorf("current version is %q: %w", current, blob.ErrPrecondition)
	}
	if err := s.writeAtomic(ctx, p, func(w io.Writer) error {
		_, err := io.Copy(w, bytes.NewReader(data))
		return err
	}); err != nil {
		return "", err
	}
	return versionOf(data), nil
}

// currentVersion reads the object at p; a missing object has version "".
func currentVersion(p string) (blob.Version, error) {
	data, err := os.ReadFile(p)
	if notFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read current object: %w", err)
	}
	return versionOf(data), nil
}

// writeNote replaces the content of a lock file.
func writeNote(f *os.File, note string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(note), 0)
	return err
}

// flockWait takes an exclusive flock on f, waiting while another holder
// has it. flock(2) cannot be interrupted by a context, so it polls with
// LOCK_NB and short, growing sleeps and gives up when ctx is done.
func flockWait(ctx context.Context, f *os.File) error {
	delay := time.Millisecond
	for {
		err := flock(f, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// flock retries the call when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
