package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/blobtest"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := New(filepath.Join(t.TempDir(), "sink", "root"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store { return newStore(t) })
}

func readKey(t *testing.T, s *Store, key string) string {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func listed(t *testing.T, s *Store, prefix string) []string {
	t.Helper()
	infos, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, i := range infos {
		keys = append(keys, i.Key)
	}
	return keys
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	s, err := New(filepath.Join(dir, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(s.Root()); err != nil || !fi.IsDir() || !filepath.IsAbs(s.Root()) {
		t.Fatalf("root %q not created as an absolute directory: %v", s.Root(), err)
	}
	// A symlinked root works like the directory it points to.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(s.Root(), link); err != nil {
		t.Fatal(err)
	}
	viaLink, err := New(link)
	if err != nil {
		t.Fatal(err)
	}
	if err := viaLink.Put(context.Background(), "k/v", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, viaLink, ""); len(got) != 1 || got[0] != "k/v" {
		t.Fatalf("List through a symlinked root = %q, want [k/v]", got)
	}
	if got := listed(t, s, "k/"); len(got) != 1 {
		t.Fatalf("List of the real root = %q, want [k/v]", got)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(file); err == nil {
		t.Error("New on a regular file succeeded")
	}
	if _, err := New(""); err == nil {
		t.Error(`New("") succeeded`)
	}
}

// TestCrashBeforeRename simulates a crash between writing the temporary
// file and renaming it: the temp file stays behind, half written. The old
// object must still be served, and the temp file never listed.
func TestCrashBeforeRename(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	key := "public/orders/g0001/delta/00000001/part-00000.parquet"
	if err := s.Put(ctx, key, strings.NewReader("old content")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(filepath.Join(s.Root(), filepath.FromSlash(key)))
	tmp := filepath.Join(dir, tmpPrefix+"deadbeef")
	if err := os.WriteFile(tmp, []byte("new cont"), 0o666); err != nil {
		t.Fatal(err)
	}
	if got := readKey(t, s, key); got != "old content" {
		t.Fatalf("Get after a crash = %q, want the old content", got)
	}
	if got := listed(t, s, ""); len(got) != 1 || got[0] != key {
		t.Fatalf("List after a crash = %q, want only %q", got, key)
	}
	// A crashed PutIf leaves its lock file behind with no lock held: it
	// must not block the next PutIf, and it is not listed either.
	m := "_pgcdc/manifest.json"
	v, err := s.PutIf(ctx, m, []byte("m1"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Root(), "_pgcdc", lockPrefix+"manifest.json"), []byte("pid 1 (dead)"), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIf(ctx, m, []byte("m2"), v); err != nil {
		t.Fatalf("PutIf after a crashed PutIf: %v", err)
	}
	if got := listed(t, s, ""); len(got) != 2 {
		t.Fatalf("List = %q, want the two objects only", got)
	}
	// The next Put of the key still works beside the leftover.
	if err := s.Put(ctx, key, strings.NewReader("newer")); err != nil {
		t.Fatal(err)
	}
	if got := readKey(t, s, key); got != "newer" {
		t.Fatalf("Get = %q, want %q", got, "newer")
	}
}

func TestReservedKeys(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, key := range []string{"a/.tmp-x", ".tmp-x", "_pgcdc/.lock-manifest.json", ".lock-x/y", writerLockKey} {
		if err := s.Put(ctx, key, strings.NewReader("x")); err == nil {
			t.Errorf("Put(%q) succeeded on a reserved name", key)
		}
		if _, err := s.PutIf(ctx, key, []byte("x"), ""); err == nil || errors.Is(err, blob.ErrPrecondition) {
			t.Errorf("PutIf(%q) = %v, want an invalid key error", key, err)
		}
		if _, err := s.Get(ctx, key); err == nil || errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want an invalid key error", key, err)
		}
	}
	// Names that only look alike are ordinary keys.
	for _, key := range []string{".tmpx", "a/.lock", "a/tmp-.x", "_pgcdc/writer.lock"} {
		if err := s.Put(ctx, key, strings.NewReader("x")); err != nil {
			t.Errorf("Put(%q): %v", key, err)
		}
	}
}

func TestFileWhereDirectoryExpected(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.Put(ctx, "f", strings.NewReader("file")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "f/g", strings.NewReader("x")); err == nil {
		t.Error(`Put("f/g") under the object "f" succeeded`)
	}
	if _, err := s.Get(ctx, "f/g"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf(`Get("f/g") = %v, want blob.ErrNotFound`, err)
	}
	if _, _, err := s.ReadVersion(ctx, "f/g"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf(`ReadVersion("f/g") = %v, want blob.ErrNotFound`, err)
	}
	if err := s.Delete(ctx, "f/g"); err != nil {
		t.Errorf(`Delete("f/g") = %v, want nil`, err)
	}
	if got := readKey(t, s, "f"); got != "file" {
		t.Errorf(`Get("f") = %q`, got)
	}
}

func TestDeletePrunesEmptyDirectories(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, k := range []string{"t/g/delta/1/part-0", "t/g/delta/2/part-0"} {
		if err := s.Put(ctx, k, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "t/g/delta/1/part-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "t", "g", "delta", "1")); !os.IsNotExist(err) {
		t.Errorf("empty directory delta/1 kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "t", "g", "delta", "2")); err != nil {
		t.Errorf("non-empty directory delta/2 removed: %v", err)
	}
	if err := s.Delete(ctx, "t/g/delta/2/part-0"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(s.Root())
	if err != nil {
		t.Fatalf("root removed: %v", err)
	}
	if len(entries) != 0 {
		t.Errorf("root not empty after deleting everything: %v", entries)
	}
	// The cache of durable directories must not believe in removed ones.
	if err := s.Put(ctx, "t/g/delta/1/part-0", strings.NewReader("again")); err != nil {
		t.Fatal(err)
	}
	if got := readKey(t, s, "t/g/delta/1/part-0"); got != "again" {
		t.Fatalf("Get = %q", got)
	}
}

// TestDirectoryRemovedBehindTheCache removes a directory the way another
// process (a compaction beside the streamer) would, then writes into it.
func TestDirectoryRemovedBehindTheCache(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.Put(ctx, "a/b/x", strings.NewReader("1")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(s.Root(), "a")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "a/b/y", strings.NewReader("2")); err != nil {
		t.Fatalf("Put after the directory vanished: %v", err)
	}
	if _, err := s.PutIf(ctx, "a/b/z", []byte("3"), ""); err != nil {
		t.Fatalf("PutIf after the directory vanished: %v", err)
	}
	// A new directory under one the cache remembers and another process
	// removed: a compaction's collection emptied a table's delta/ and
	// pruned it, and the daemon's next flush writes delta/<epoch>/.
	if err := os.RemoveAll(filepath.Join(s.Root(), "a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "a/b/00000009/part-00000.parquet", strings.NewReader("4")); err != nil {
		t.Fatalf("Put into a new directory under a vanished one: %v", err)
	}
	if _, err := s.PutIf(ctx, "a/c/d/z", []byte("5"), ""); err != nil {
		t.Fatalf("PutIf into new directories: %v", err)
	}
}

func TestVersionIsContentHash(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	v, err := s.PutIf(ctx, "m", []byte("abc"), "")
	if err != nil {
		t.Fatal(err)
	}
	// sha256("abc")
	if want := blob.Version("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"); v != want {
		t.Fatalf("version = %q, want %q", v, want)
	}
	// The version survives a copy of the sink: another Store on the same
	// root agrees.
	s2, err := New(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	_, v2, err := s2.ReadVersion(ctx, "m")
	if err != nil || v2 != v {
		t.Fatalf("second store sees %q, %v; want %q", v2, err, v)
	}
	// A replace takes the key's lock, whose file records the expected
	// version for an operator (a create takes none).
	if _, err := s.PutIf(ctx, "m", []byte("def"), v); err != nil {
		t.Fatal(err)
	}
	note, err := os.ReadFile(filepath.Join(s.Root(), lockPrefix+"m"))
	if err != nil || !bytes.Contains(note, []byte(`expects version "`+string(v)+`"`)) {
		t.Fatalf("lock file = %q, %v", note, err)
	}
}

func TestPutIfHonoursContextWhileWaiting(t *testing.T) {
	s := newStore(t)
	// Hold the key's lock through a second open file description. A
	// replace takes it; a create needs none.
	v, err := s.PutIf(context.Background(), "m", []byte("x"), "")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(s.Root(), lockPrefix+"m"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := flock(f, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = s.PutIf(ctx, "m", []byte("y"), v)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("PutIf while locked = %v, want context.DeadlineExceeded", err)
	}
}

func TestTwoStoresExcludeEachOther(t *testing.T) {
	ctx := context.Background()
	a := newStore(t)
	b, err := New(a.Root())
	if err != nil {
		t.Fatal(err)
	}
	release, err := a.LockWriter(ctx, "store a")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.LockWriter(ctx, "store b")
	if !errors.Is(err, blob.ErrLocked) || !strings.Contains(err.Error(), `"store a"`) {
		t.Fatalf("second store's LockWriter = %v, want blob.ErrLocked naming store a", err)
	}
	// A failed attempt closes its own descriptor only: a still holds.
	_, err = b.LockWriter(ctx, "store b")
	if !errors.Is(err, blob.ErrLocked) {
		t.Fatalf("third attempt = %v, want blob.ErrLocked", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	releaseB, err := b.LockWriter(ctx, "store b")
	if err != nil {
		t.Fatalf("LockWriter after release: %v", err)
	}
	defer releaseB()
	if got := listed(t, a, ""); len(got) != 0 {
		t.Fatalf("the lock file is listed: %q", got)
	}
}

// A write the operating system refuses for want of permission is a
// configuration error naming the sink and the
// fix, and stays terminal when a caller marks it unavailable; other
// errors pass unchanged.
func TestRefusedWrite(t *testing.T) {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM} {
		cause := fmt.Errorf("put object %q: %w", "a/b", &iofs.PathError{Op: "open", Path: s.Root() + "/a", Err: errno})
		got := s.refused(cause)
		if !errors.Is(got, cdc.ErrUsage) || !errors.Is(got, errno) {
			t.Errorf("%v: %v, want a usage error keeping its cause", errno, got)
		}
		if marked := fmt.Errorf("%w: %w", blob.ErrUnavailable, got); cdc.IsTransient(marked) {
			t.Errorf("%v marked unavailable is transient: %v", errno, marked)
		}
		if !strings.Contains(got.Error(), s.Root()) || !strings.Contains(cdc.HintOf(got), "writable") {
			t.Errorf("%v: message %q, hint %q", errno, got, cdc.HintOf(got))
		}
	}
	// A full disk and a read-only remount pass: they may go away.
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EROFS} {
		other := fmt.Errorf("put object: %w", errno)
		if got := s.refused(other); got != other {
			t.Errorf("%v reclassified: %v", errno, got)
		}
	}
}
