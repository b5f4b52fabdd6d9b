package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

// maxOwnerBytes bounds how much of a holder's owner string is read back.
const maxOwnerBytes = 4096

// LockWriter takes the sink's writer lock, an exclusive flock on
// _pgcdc/.writer.lock, and writes owner into the file so that a second
// writer can say who holds it. It fails at once with blob.ErrLocked (naming
// the holder) when another process, or another Store in this process, holds
// it. The lock lasts until release is called or the process exits.
func (s *Store) LockWriter(ctx context.Context, owner string) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lock sink writer: %w", err)
	}
	p := filepath.Join(s.root, filepath.FromSlash(writerLockKey))
	f, err := s.createIn(filepath.Dir(p), func(dir string) (*os.File, error) {
		return os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o666)
	})
	if err != nil {
		return nil, fmt.Errorf("lock sink writer: open %s: %w", p, err)
	}
	if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := readOwner(f)
		f.Close() // ours is a different open file description: the holder keeps its lock
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock sink writer %s: held by %q: %w", p, holder, blob.ErrLocked)
		}
		return nil, fmt.Errorf("lock sink writer %s: %w", p, err)
	}
	if err := writeNote(f, owner+"\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock sink writer %s: write owner: %w", p, err)
	}
	var once sync.Once
	var releaseErr error
	release := func() error {
		once.Do(func() {
			// Clear the owner first: once the lock is free, the file should
			// not name a process that no longer holds it.
			truncErr := f.Truncate(0)
			releaseErr = errors.Join(truncErr, f.Close())
			if releaseErr != nil {
				releaseErr = fmt.Errorf("release sink writer lock %s: %w", p, releaseErr)
			}
		})
		return releaseErr
	}
	return release, nil
}

// readOwner returns the holder's owner string, or a placeholder when the
// holder has not written it yet (it takes the lock, then writes).
func readOwner(f *os.File) string {
	data, err := io.ReadAll(io.NewSectionReader(f, 0, maxOwnerBytes))
	owner := string(bytes.TrimSpace(data))
	if err != nil || owner == "" {
		return "another process (owner not recorded yet)"
	}
	return owner
}
