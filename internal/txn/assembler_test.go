package txn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

var (
	orders = &cdc.Table{ID: cdc.TableID{Schema: "public", Name: "orders"}, OID: 16384}
	items  = &cdc.Table{ID: cdc.TableID{Schema: "public", Name: "items"}, OID: 16390}
)

func text(s string) cdc.Datum { return cdc.Datum{Kind: cdc.DatumText, Text: []byte(s)} }

var (
	null      = cdc.Datum{Kind: cdc.DatumNull}
	unchanged = cdc.Datum{Kind: cdc.DatumUnchanged}
)

func change(t *cdc.Table, op cdc.Op, vals ...cdc.Datum) *cdc.Change {
	return &cdc.Change{Table: t, Op: op, Values: vals}
}

func row(i int) *cdc.Change {
	return change(orders, cdc.OpInsert, text(fmt.Sprint(i)), text("note"), null)
}

// replayed is one change as Commit handed it back.
type replayed struct {
	seq int64
	c   *cdc.Change
}

func commit(t *testing.T, a *Assembler, top uint32) []replayed {
	t.Helper()
	var out []replayed
	if err := a.Commit(top, func(seq int64, c *cdc.Change) error {
		out = append(out, replayed{seq, c})
		return nil
	}); err != nil {
		t.Fatalf("Commit(%d): %v", top, err)
	}
	return out
}

func mustAdd(t testing.TB, a *Assembler, top, sub uint32, c *cdc.Change) {
	t.Helper()
	if err := a.Add(top, sub, c); err != nil {
		t.Fatalf("Add(%d, %d): %v", top, sub, err)
	}
}

func seqs(rs []replayed) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.seq
	}
	return out
}

// budgets runs a test with everything in memory and with a budget so small
// that nearly every change is spilled.
var budgets = []struct {
	name   string
	budget int64
}{{"memory", 1 << 30}, {"spilled", 1}}

func TestInterleavedCommitOrder(t *testing.T) {
	for _, b := range budgets {
		t.Run(b.name, func(t *testing.T) {
			a := NewAssembler(t.TempDir(), b.budget)
			want := map[uint32][]*cdc.Change{}
			for i := range 30 {
				top := uint32(500 + i%3)
				c := row(i)
				want[top] = append(want[top], cloneChange(c))
				mustAdd(t, a, top, top, c)
			}
			// Commit in an order different from the first arrival.
			for _, top := range []uint32{502, 500, 501} {
				got := commit(t, a, top)
				if len(got) != 10 {
					t.Fatalf("transaction %d replayed %d changes, want 10", top, len(got))
				}
				for i, r := range got {
					if r.seq != int64(i) {
						t.Fatalf("transaction %d change %d has seq %d", top, i, r.seq)
					}
					if !reflect.DeepEqual(r.c, want[top][i]) || r.c.Table != orders {
						t.Fatalf("transaction %d change %d:\n got %+v\nwant %+v", top, i, r.c, want[top][i])
					}
				}
			}
			assertEmpty(t, a)
		})
	}
}

func TestAbortWhole(t *testing.T) {
	for _, b := range budgets {
		t.Run(b.name, func(t *testing.T) {
			dir := t.TempDir()
			a := NewAssembler(dir, b.budget)
			for i := range 20 {
				mustAdd(t, a, 700, 700+uint32(i%2), row(i))
			}
			mustAdd(t, a, 800, 800, row(99))
			if err := a.Abort(700, 700); err != nil {
				t.Fatal(err)
			}
			if got := commit(t, a, 700); len(got) != 0 {
				t.Fatalf("aborted transaction replayed %d changes", len(got))
			}
			if _, err := os.Stat(filepath.Join(dir, "txn-700.spill")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("spill file of the aborted transaction: %v", err)
			}
			if !a.Pending() {
				t.Fatal("transaction 800 is open but Pending() is false")
			}
			if got := commit(t, a, 800); len(got) != 1 {
				t.Fatalf("transaction 800 replayed %d changes, want 1", len(got))
			}
			assertEmpty(t, a)
		})
	}
}

// TestAbortSubtransaction: 1005 changes, 500 of them in a savepoint that is
// rolled back, leave 505 with their original sequence numbers.
func TestAbortSubtransaction(t *testing.T) {
	const top, sub = 1000, 1001
	for _, b := range budgets {
		for _, abortAfterCommitData := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/late=%v", b.name, abortAfterCommitData), func(t *testing.T) {
				a := NewAssembler(t.TempDir(), b.budget)
				var wantSeqs []int64
				for i := range 1005 {
					x := uint32(top)
					if i >= 100 && i < 600 {
						x = sub
					} else {
						wantSeqs = append(wantSeqs, int64(i))
					}
					mustAdd(t, a, top, x, row(i))
					if !abortAfterCommitData && i == 600 {
						// ROLLBACK TO SAVEPOINT arrives while the transaction goes on.
						if err := a.Abort(top, sub); err != nil {
							t.Fatal(err)
						}
					}
				}
				if abortAfterCommitData {
					if err := a.Abort(top, sub); err != nil {
						t.Fatal(err)
					}
				}
				got := commit(t, a, top)
				if len(got) != 505 {
					t.Fatalf("replayed %d changes, want 505", len(got))
				}
				if !reflect.DeepEqual(seqs(got), wantSeqs) {
					t.Fatalf("seqs = %v..., want %v...", seqs(got)[:5], wantSeqs[:5])
				}
				for _, r := range got {
					if string(r.c.Values[0].Text) != fmt.Sprint(r.seq) {
						t.Fatalf("seq %d carries row %s", r.seq, r.c.Values[0].Text)
					}
				}
				assertEmpty(t, a)
			})
		}
	}
}

// TestNestedSubtransactionAborts: BEGIN; s1; s2 inside s1; ROLLBACK TO s1
// (PostgreSQL sends an abort for s2 and one for s1); s3; COMMIT.
func TestNestedSubtransactionAborts(t *testing.T) {
	const top, s1, s2, s3 = 100, 101, 102, 103
	for _, b := range budgets {
		t.Run(b.name, func(t *testing.T) {
			a := NewAssembler(t.TempDir(), b.budget)
			plan := []uint32{top, s1, s2, s2, s1, top, s3, s3, top}
			for i, x := range plan {
				if i == 5 {
					for _, sub := range []uint32{s2, s1} {
						if err := a.Abort(top, sub); err != nil {
							t.Fatal(err)
						}
					}
				}
				mustAdd(t, a, top, x, row(i))
			}
			// A change arriving for an aborted subtransaction is dropped too.
			mustAdd(t, a, top, s2, row(9))
			got := commit(t, a, top)
			if want := []int64{0, 5, 6, 7, 8}; !reflect.DeepEqual(seqs(got), want) {
				t.Fatalf("seqs = %v, want %v", seqs(got), want)
			}
		})
	}
}

// TestSpillReplayEquality: many interleaved transactions, two tables, every
// datum kind (empty text, bytes that are not UTF-8, large values), a 1 KiB
// budget; replay must give back exactly what went in.
func TestSpillReplayEquality(t *testing.T) {
	const budget = 1 << 10
	dir := t.TempDir()
	a := NewAssembler(dir, budget)
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[uint32][]*cdc.Change{}
	for range 3000 {
		top := uint32(2000 + rng.IntN(5))
		c := randomChange(rng)
		want[top] = append(want[top], cloneChange(c))
		mustAdd(t, a, top, top, c)
		if a.MemoryBytes() > budget {
			t.Fatalf("MemoryBytes() = %d after Add, budget %d", a.MemoryBytes(), budget)
		}
	}
	if a.SpilledBytes() == 0 {
		t.Fatal("nothing was spilled with a 1 KiB budget")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "txn-*.spill"))
	if len(files) != 5 {
		t.Fatalf("spill files: %v, want one per transaction", files)
	}
	var spilled int64
	for _, f := range files {
		st, _ := os.Stat(f)
		spilled += st.Size()
	}
	if spilled != a.SpilledBytes() {
		t.Fatalf("SpilledBytes() = %d, files hold %d", a.SpilledBytes(), spilled)
	}
	for top := uint32(2000); top < 2005; top++ {
		got := commit(t, a, top)
		if len(got) != len(want[top]) {
			t.Fatalf("transaction %d replayed %d changes, want %d", top, len(got), len(want[top]))
		}
		for i, r := range got {
			if r.seq != int64(i) || !sameChange(r.c, want[top][i]) {
				t.Fatalf("transaction %d change %d (seq %d):\n got %+v\nwant %+v", top, i, r.seq, r.c, want[top][i])
			}
			if r.c.Table != want[top][i].Table {
				t.Fatalf("transaction %d change %d: table pointer not preserved", top, i)
			}
		}
	}
	assertEmpty(t, a)
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		t.Fatalf("files left after every commit: %v", files)
	}
}

func randomChange(rng *rand.Rand) *cdc.Change {
	tbl, op := orders, cdc.OpInsert
	if rng.IntN(2) == 0 {
		tbl, op = items, cdc.OpUpdate
	}
	vals := make([]cdc.Datum, rng.IntN(6))
	for i := range vals {
		switch rng.IntN(5) {
		case 0:
			vals[i] = null
		case 1:
			vals[i] = unchanged
		case 2:
			vals[i] = cdc.Datum{Kind: cdc.DatumText, Text: []byte{}}
		case 3:
			b := make([]byte, rng.IntN(2000))
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			vals[i] = cdc.Datum{Kind: cdc.DatumText, Text: b}
		default:
			vals[i] = text(fmt.Sprint(rng.Int64()))
		}
	}
	return change(tbl, op, vals...)
}

func cloneChange(c *cdc.Change) *cdc.Change {
	out := &cdc.Change{Table: c.Table, Op: c.Op, Values: make([]cdc.Datum, len(c.Values))}
	for i, v := range c.Values {
		out.Values[i] = cdc.Datum{Kind: v.Kind}
		if v.Text != nil {
			out.Values[i].Text = append([]byte{}, v.Text...)
		}
	}
	return out
}

// sameChange compares by meaning: a text value's bytes, not whether an empty
// one is nil.
func sameChange(a, b *cdc.Change) bool {
	if a.Table != b.Table || a.Op != b.Op || len(a.Values) != len(b.Values) {
		return false
	}
	for i := range a.Values {
		if a.Values[i].Kind != b.Values[i].Kind || string(a.Values[i].Text) != string(b.Values[i].Text) {
			return false
		}
		if a.Values[i].Kind == cdc.DatumText && a.Values[i].Text == nil {
			return false
		}
	}
	return true
}

func TestCommitUnknownTransaction(t *testing.T) {
	a := NewAssembler(t.TempDir(), 1<<20)
	called := false
	if err := a.Commit(4242, func(int64, *cdc.Change) error { called = true; return nil }); err != nil || called {
		t.Fatalf("Commit of an unknown xid: err %v, fn called %v", err, called)
	}
	if err := a.Abort(4242, 4243); err != nil {
		t.Fatal(err)
	}
	if err := a.Abort(4242, 4242); err != nil {
		t.Fatal(err)
	}
	assertEmpty(t, a)
}

func TestCommitCallbackError(t *testing.T) {
	dir := t.TempDir()
	a := NewAssembler(dir, 1)
	for i := range 10 {
		mustAdd(t, a, 9, 9, row(i))
	}
	boom := errors.New("boom")
	n := 0
	err := a.Commit(9, func(int64, *cdc.Change) error {
		if n++; n == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Commit error = %v, want boom", err)
	}
	assertEmpty(t, a)
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		t.Fatalf("files left after a failed commit: %v", files)
	}
}

func TestReset(t *testing.T) {
	dir := t.TempDir()
	// Left by a crashed process, and a file that is not ours.
	must(t, os.WriteFile(filepath.Join(dir, "txn-42.spill"), []byte("stale"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("x"), 0o600))
	a := NewAssembler(dir, 64)
	for i := range 50 {
		mustAdd(t, a, uint32(10+i%4), uint32(10+i%4), row(i))
	}
	if a.SpilledBytes() == 0 || !a.Pending() {
		t.Fatal("setup did not spill")
	}
	must(t, a.Reset())
	assertEmpty(t, a)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "keep.txt" {
		t.Fatalf("after Reset the directory holds %v, want only keep.txt", entries)
	}
	// Usable again, and Reset of a directory that does not exist is fine.
	mustAdd(t, a, 10, 10, row(1))
	if got := commit(t, a, 10); len(got) != 1 || got[0].seq != 0 {
		t.Fatalf("after Reset: %v", got)
	}
	must(t, NewAssembler(filepath.Join(dir, "missing"), 1).Reset())
}

func TestAddNil(t *testing.T) {
	if err := NewAssembler(t.TempDir(), 1).Add(1, 1, nil); err == nil {
		t.Fatal("Add(nil) succeeded")
	}
}

func assertEmpty(t *testing.T, a *Assembler) {
	t.Helper()
	if a.Pending() || a.MemoryBytes() != 0 || a.SpilledBytes() != 0 {
		t.Fatalf("Pending %v, MemoryBytes %d, SpilledBytes %d; want nothing", a.Pending(), a.MemoryBytes(), a.SpilledBytes())
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
