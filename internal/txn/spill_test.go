package txn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestStaleFileOverwritten: a spill file with the same xid left by a crashed
// process must be replaced, not appended to.
func TestStaleFileOverwritten(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "txn-77.spill"), []byte("garbage from before the crash"), 0o600))
	a := NewAssembler(dir, 1)
	for i := range 5 {
		mustAdd(t, a, 77, 77, row(i))
	}
	if got := commit(t, a, 77); len(got) != 5 {
		t.Fatalf("replayed %d changes, want 5", len(got))
	}
}

func TestCorruptSpillFile(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(path string)
		want    string
		noCalls bool // detected before anything is replayed
	}{
		{"truncated", func(p string) { must(t, os.Truncate(p, fileSize(t, p)-3)) }, "size is", true},
		{"extended", func(p string) { appendFile(t, p, []byte{0}) }, "size is", true},
		{"missing", func(p string) { must(t, os.Remove(p)) }, "no such file", true},
		{"flipped byte", func(p string) { flipByte(t, p, fileSize(t, p)/2) }, "record", false},
		{"flipped first byte", func(p string) { flipByte(t, p, 0) }, "record 0 of", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			a := NewAssembler(dir, 1)
			for i := range 200 {
				mustAdd(t, a, 31337, 31337, row(i))
			}
			path := filepath.Join(dir, "txn-31337.spill")
			c.damage(path)
			calls := 0
			err := a.Commit(31337, func(int64, *cdc.Change) error { calls++; return nil })
			if err == nil {
				t.Fatalf("Commit of a damaged spill file succeeded after %d changes", calls)
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, "transaction 31337") || !strings.Contains(msg, c.want) {
				t.Fatalf("error %q does not name the file, the xid and %q", msg, c.want)
			}
			if c.noCalls && calls != 0 {
				t.Fatalf("%d changes replayed before the damage was detected", calls)
			}
			if calls >= 200 {
				t.Fatal("every change replayed despite the damage")
			}
			assertEmpty(t, a)
		})
	}
}

// TestSpillFailure: a spill that cannot be written is an error from Add,
// and the changes stay in memory, so nothing is lost.
func TestSpillFailure(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(notADir, nil, 0o600))
	a := NewAssembler(filepath.Join(notADir, "spill"), 1)
	if err := a.Add(5, 5, row(0)); err == nil || !strings.Contains(err.Error(), "spill transaction 5") {
		t.Fatalf("Add with an unusable spill directory: %v", err)
	}
	if got := commit(t, a, 5); len(got) != 1 {
		t.Fatalf("replayed %d changes, want the one kept in memory", len(got))
	}
}

// TestEncodeFailureRollsBack: a change that cannot be encoded fails its
// spill; the file is cut back and earlier spilled changes still replay.
func TestEncodeFailureRollsBack(t *testing.T) {
	a := NewAssembler(t.TempDir(), 1)
	mustAdd(t, a, 6, 6, row(0))
	before := a.SpilledBytes()
	bad := change(orders, cdc.OpInsert, text("ok"), cdc.Datum{Kind: 99})
	if err := a.Add(6, 6, bad); err == nil || !strings.Contains(err.Error(), "unknown kind 99") {
		t.Fatalf("Add of an unencodable change: %v", err)
	}
	if a.SpilledBytes() != before {
		t.Fatalf("SpilledBytes moved from %d to %d on a failed spill", before, a.SpilledBytes())
	}
	got := commit(t, a, 6)
	if len(got) != 2 || got[1].c != bad {
		t.Fatalf("replay after a failed spill: %v", got)
	}
}

func fileSize(t *testing.T, p string) int64 {
	st, err := os.Stat(p)
	must(t, err)
	return st.Size()
}

func appendFile(t *testing.T, p string, b []byte) {
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.Write(b)
	must(t, err)
	must(t, f.Close())
}

func flipByte(t *testing.T, p string, off int64) {
	b, err := os.ReadFile(p)
	must(t, err)
	b[off] ^= 0xFF
	must(t, os.WriteFile(p, b, 0o600))
}

// TestSpillKeepsKeyChanged: the mark of a key-changing UPDATE survives a
// round trip through the spill file.
func TestSpillKeepsKeyChanged(t *testing.T) {
	a := NewAssembler(t.TempDir(), 1) // every change spills
	for i := range 4 {
		c := row(i)
		c.KeyChanged = i%2 == 1
		mustAdd(t, a, 9, 9, c)
	}
	got := commit(t, a, 9)
	if len(got) != 4 {
		t.Fatalf("replayed %d changes", len(got))
	}
	for i, c := range got {
		if c.c.KeyChanged != (i%2 == 1) {
			t.Errorf("change %d: KeyChanged = %v", i, c.c.KeyChanged)
		}
	}
}
