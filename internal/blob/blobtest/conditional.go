package blobtest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
)

const manifestKey = "_pgcdc/manifest.json"

func readVersion(t *testing.T, c blob.Conditional, key string) ([]byte, blob.Version) {
	t.Helper()
	data, v, err := c.ReadVersion(ctx(t), key)
	if err != nil {
		t.Fatalf("ReadVersion(%q): %v", key, err)
	}
	if v == "" {
		t.Fatalf("ReadVersion(%q) returned the empty version for an existing object", key)
	}
	return data, v
}

func putIf(t *testing.T, c blob.Conditional, key string, data []byte, expected blob.Version) blob.Version {
	t.Helper()
	v, err := c.PutIf(ctx(t), key, data, expected)
	if err != nil {
		t.Fatalf("PutIf(%q, expected %q): %v", key, expected, err)
	}
	if v == "" {
		t.Fatalf("PutIf(%q) returned the empty version", key)
	}
	return v
}

func wantPrecondition(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want blob.ErrPrecondition", what)
	}
	if !errors.Is(err, blob.ErrPrecondition) {
		t.Fatalf("%s = %v, want an error matching blob.ErrPrecondition", what, err)
	}
}

func testReadVersionMissing(t *testing.T, _ blob.Store, c blob.Conditional) {
	for _, key := range []string{manifestKey, "missing"} {
		if _, _, err := c.ReadVersion(ctx(t), key); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("ReadVersion(%q) = %v, want blob.ErrNotFound", key, err)
		}
	}
}

func testPutIfCreate(t *testing.T, s blob.Store, c blob.Conditional) {
	v1 := putIf(t, c, manifestKey, []byte("first"), "")
	data, v := readVersion(t, c, manifestKey)
	if v != v1 || string(data) != "first" {
		t.Fatalf("ReadVersion = %q, %q; want %q, %q", data, v, "first", v1)
	}
	wantContent(t, s, manifestKey, []byte("first"))

	_, err := c.PutIf(ctx(t), manifestKey, []byte("second"), "")
	wantPrecondition(t, err, "a second create")
	wantContent(t, s, manifestKey, []byte("first"))

	// An object written by a plain Put exists too, and has a version.
	put(t, s, "plain", []byte("p"))
	_, err = c.PutIf(ctx(t), "plain", []byte("q"), "")
	wantPrecondition(t, err, "create over a plain Put")
	_, pv := readVersion(t, c, "plain")
	putIf(t, c, "plain", []byte("q"), pv)
	wantContent(t, s, "plain", []byte("q"))

	// Conditional writes leave no scratch or lock files in listings.
	wantKeys(t, s, "", manifestKey, "plain")
	wantKeys(t, s, "_pgcdc/", manifestKey)
}

func testPutIfCurrent(t *testing.T, s blob.Store, c blob.Conditional) {
	v1 := putIf(t, c, manifestKey, []byte(`{"epoch":1}`), "")
	v2 := putIf(t, c, manifestKey, []byte(`{"epoch":2}`), v1)
	if v2 == v1 {
		t.Fatalf("PutIf of new content returned the old version %q", v1)
	}
	data, v := readVersion(t, c, manifestKey)
	if v != v2 || string(data) != `{"epoch":2}` {
		t.Fatalf("ReadVersion = %q, %q; want %q, %q", data, v, `{"epoch":2}`, v2)
	}
	v3 := putIf(t, c, manifestKey, []byte(`{"epoch":3}`), v2)
	if v3 == v2 || v3 == v1 {
		t.Fatalf("PutIf returned a version already used: %q", v3)
	}
	wantContent(t, s, manifestKey, []byte(`{"epoch":3}`))
}

func testPutIfStale(t *testing.T, s blob.Store, c blob.Conditional) {
	v1 := putIf(t, c, manifestKey, []byte("one"), "")
	v2 := putIf(t, c, manifestKey, []byte("two"), v1)
	_, err := c.PutIf(ctx(t), manifestKey, []byte("three"), v1)
	wantPrecondition(t, err, "PutIf with a stale version")
	data, v := readVersion(t, c, manifestKey)
	if v != v2 || string(data) != "two" {
		t.Fatalf("a failed PutIf changed the object: %q, %q; want %q, %q", data, v, "two", v2)
	}
	// A version that was never handed out fails the same way.
	_, err = c.PutIf(ctx(t), manifestKey, []byte("four"), "no-such-version")
	wantPrecondition(t, err, "PutIf with a made-up version")
	// And so does a plain Put in between: it makes v2 stale.
	put(t, s, manifestKey, []byte("plain"))
	_, err = c.PutIf(ctx(t), manifestKey, []byte("five"), v2)
	wantPrecondition(t, err, "PutIf after an intervening Put")
	wantContent(t, s, manifestKey, []byte("plain"))
}

func testPutIfMissing(t *testing.T, s blob.Store, c blob.Conditional) {
	_, err := c.PutIf(ctx(t), manifestKey, []byte("x"), "some-version")
	wantPrecondition(t, err, "PutIf with a version on a missing key")
	if _, err := s.Get(ctx(t), manifestKey); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("a failed PutIf created the object: Get = %v", err)
	}
}

func testPutIfAfterDelete(t *testing.T, s blob.Store, c blob.Conditional) {
	v1 := putIf(t, c, manifestKey, []byte("x"), "")
	if err := s.Delete(ctx(t), manifestKey); err != nil {
		t.Fatal(err)
	}
	_, err := c.PutIf(ctx(t), manifestKey, []byte("y"), v1)
	wantPrecondition(t, err, "PutIf with the version of a deleted object")
	putIf(t, c, manifestKey, []byte("z"), "")
	wantContent(t, s, manifestKey, []byte("z"))
}

const racers = 16

// race runs racers PutIf calls on key, all with the same expected version,
// and checks that exactly one wins, the rest fail with ErrPrecondition, and
// the object holds the winner's data.
func race(t *testing.T, s blob.Store, c blob.Conditional, key string, expected blob.Version, round int) blob.Version {
	t.Helper()
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		winners []int
		version blob.Version
		errs    []error
	)
	payload := func(i int) []byte { return []byte(fmt.Sprintf(`{"round":%d,"writer":%d}`, round, i)) }
	for i := range racers {
		wg.Go(func() {
			<-start
			v, err := c.PutIf(ctx(t), key, payload(i), expected)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, i)
				version = v
			case !errors.Is(err, blob.ErrPrecondition):
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("round %d: a losing PutIf failed with %v, want blob.ErrPrecondition", round, err)
	}
	if len(winners) != 1 {
		t.Fatalf("round %d: %d PutIf calls with the same expected version won (%v), want exactly 1", round, len(winners), winners)
	}
	data, v := readVersion(t, c, key)
	if v != version || !bytes.Equal(data, payload(winners[0])) {
		t.Fatalf("round %d: object is %q version %q, want the winner's %q version %q", round, data, v, payload(winners[0]), version)
	}
	return version
}

func testPutIfRaceCreate(t *testing.T, s blob.Store, c blob.Conditional) {
	for round := range 5 {
		race(t, s, c, fmt.Sprintf("_pgcdc/generations/g%04d.json", round), "", round)
	}
	wantKeys(t, s, "_pgcdc/generations/",
		"_pgcdc/generations/g0000.json", "_pgcdc/generations/g0001.json", "_pgcdc/generations/g0002.json",
		"_pgcdc/generations/g0003.json", "_pgcdc/generations/g0004.json")
}

func testPutIfRaceUpdate(t *testing.T, s blob.Store, c blob.Conditional) {
	v := putIf(t, c, manifestKey, []byte("start"), "")
	for round := range 5 {
		v = race(t, s, c, manifestKey, v, round)
	}
	wantKeys(t, s, "", manifestKey)
}

func testPutIfInvalidKeys(t *testing.T, s blob.Store, c blob.Conditional) {
	for _, key := range invalidKeys {
		if _, err := c.PutIf(ctx(t), key, []byte("x"), ""); err == nil {
			t.Errorf("PutIf(%q) succeeded", key)
		} else if errors.Is(err, blob.ErrPrecondition) {
			t.Errorf("PutIf(%q) = %v: an invalid key is not a failed precondition", key, err)
		}
		if _, _, err := c.ReadVersion(ctx(t), key); err == nil {
			t.Errorf("ReadVersion(%q) succeeded", key)
		} else if errors.Is(err, blob.ErrNotFound) {
			t.Errorf("ReadVersion(%q) = %v: an invalid key is not a missing object", key, err)
		}
	}
	wantKeys(t, s, "")
}

func testLockWriter(t *testing.T, s blob.Store, l blob.Locker) {
	release, err := l.LockWriter(ctx(t), "first pid=1")
	if err != nil {
		t.Fatalf("LockWriter: %v", err)
	}
	start := time.Now()
	release2, err := l.LockWriter(ctx(t), "second pid=2")
	if err == nil {
		release2()
		release()
		t.Fatal("a second LockWriter succeeded while the first is held")
	}
	if !errors.Is(err, blob.ErrLocked) {
		release()
		t.Fatalf("second LockWriter = %v, want blob.ErrLocked", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second LockWriter took %v, want it to fail at once", d)
	}
	if !strings.Contains(err.Error(), "first pid=1") {
		t.Errorf("ErrLocked %q does not name the holder", err)
	}
	if err := release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	release3, err := l.LockWriter(ctx(t), "third")
	if err != nil {
		t.Fatalf("LockWriter after release: %v", err)
	}
	if err := release3(); err != nil {
		t.Fatalf("release: %v", err)
	}
	// The lock is not an object.
	wantKeys(t, s, "")
}
