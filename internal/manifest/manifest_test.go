package manifest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/blob/memory"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func sample() *Manifest {
	return &Manifest{
		Source: Source{SystemIdentifier: "7440312345678901234", Timeline: 1, Database: "app", Slot: "s", Publication: "p"},
		EndLSN: 0x16B3748,
		Tables: map[string]*Table{
			"public.orders": {
				Schema: "public", Name: "orders", OID: 16384, Generation: "g0001",
				PrimaryKey: []string{"id"}, ReplicaIdentity: "default", SchemaVersion: 1,
				Schemas:  []SchemaVersion{{Version: 1, Columns: []Column{{Name: "id", PGType: "bigint", ParquetType: "INT64", FieldID: 1, TypeOID: 20, TypeMod: -1}}}},
				Snapshot: Snapshot{State: SnapshotComplete, LSN: 0x16B3748},
				Base:     &Base{MaxLSN: 0x16B3748, RowCount: 3, Files: []File{{Path: "public/orders/g0001/base/00000000/part-00000.parquet", Rows: 3, Bytes: 100}}},
				Deltas:   []Delta{},
			},
		},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	m := sample()
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"format_version": 0`, `"end_lsn": "0/16B3748"`, `"public.orders": {`, `"primary_key": [`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("encoded manifest lacks %s:\n%s", want, data)
		}
	}
	m.FormatVersion = FormatVersion
	data, _ = m.Encode()
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := back.Encode()
	if string(again) != string(data) {
		t.Fatalf("round trip changed the manifest:\n%s\n---\n%s", data, again)
	}
	st, err := back.Tables["public.orders"].SourceTable()
	if err != nil || st.ID.String() != "public.orders" || st.Columns[0].TypeOID != 20 || !st.Columns[0].NotNull {
		t.Fatalf("SourceTable = %+v, %v", st, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"not json":        `{`,
		"no version":      `{"epoch": 1}`,
		"future version":  `{"format_version": 2}`,
		"null table":      `{"format_version": 1, "tables": {"public.t": null}}`,
		"mismatched name": `{"format_version": 1, "tables": {"public.t": {"schema": "public", "name": "u"}}}`,
		"bad lsn":         `{"format_version": 1, "end_lsn": "zz"}`,
	} {
		if _, err := Decode([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	m := sample()
	m.FormatVersion = 1
	data, _ := m.Encode()
	f.Add(data)
	f.Add([]byte(`{"format_version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			return
		}
		if _, err := m.Encode(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFileKey(t *testing.T) {
	id := cdc.TableID{Schema: "public", Name: "orders"}
	if got := FileKey(id, "g0001", KindDelta, 41, 0); got != "public/orders/g0001/delta/00000041/part-00000.parquet" {
		t.Errorf("FileKey = %s", got)
	}
	odd := cdc.TableID{Schema: "..", Name: "a/b c"}
	got := FileKey(odd, "g0001", KindBase, 0, 2)
	if got != "%2E%2E/a%2Fb%20c/g0001/base/00000000/part-00002.parquet" {
		t.Errorf("FileKey escapes badly: %s", got)
	}
}

func TestCommitterCreatesOnceAndCommits(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	if _, _, err := Load(ctx, store); !errors.Is(err, cdc.ErrNotInitialized) {
		t.Fatalf("Load on an empty store: %v", err)
	}
	c, err := Create(ctx, store, sample(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(ctx, store, sample(), time.Now()); err == nil {
		t.Fatal("a second Create overwrote the manifest")
	}
	m, err := c.Commit(ctx, func(m *Manifest) error { m.Epoch = 1; m.EndLSN = 0x2000000; return nil })
	if err != nil || m.Epoch != 1 {
		t.Fatalf("Commit: %v %v", m, err)
	}
	got, _, _ := Load(ctx, store)
	if got.Epoch != 1 || got.EndLSN != 0x2000000 {
		t.Fatalf("stored manifest: epoch %d end %s", got.Epoch, got.EndLSN)
	}
	// A failed mutation leaves the committer's view untouched.
	if _, err := c.Commit(ctx, func(m *Manifest) error { m.Epoch = 99; return errors.New("no") }); err == nil {
		t.Fatal("mutation error ignored")
	}
	if c.Current().Epoch != 1 {
		t.Fatalf("a failed mutation leaked: epoch %d", c.Current().Epoch)
	}
}

func TestCommitterRetriesConflictsMonotonically(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	a, err := Create(ctx, store, sample(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, store, Breaker{})
	if err != nil {
		t.Fatal(err)
	}
	// b does not move the stream (a compactor retiring a file).
	if _, err := b.Commit(ctx, func(m *Manifest) error {
		m.Garbage = append(m.Garbage, RetiredFile{Path: "x"})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// a's view is stale: its commit conflicts, re-reads, and re-applies.
	m, err := a.Commit(ctx, func(m *Manifest) error { m.EndLSN = max(m.EndLSN, 0x2000000); m.Epoch++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if m.EndLSN != 0x2000000 || m.Epoch != 1 || len(m.Garbage) != 1 || m.Writer != a.Writer() {
		t.Fatalf("merged manifest: end %s epoch %d garbage %d writer %q", m.EndLSN, m.Epoch, len(m.Garbage), m.Writer)
	}
}

// A streamer that finds another writer moved the stream since it last read
// (it was paused and replaced) stops at its next commit instead of adding
// its epoch to the other's lineage.
func TestCommitterSupersededByAnotherStreamer(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	if _, err := Create(ctx, store, sample(), time.Now()); err != nil {
		t.Fatal(err)
	}
	a, _ := Open(ctx, store, Breaker{})
	if _, err := a.Commit(ctx, func(m *Manifest) error { m.Epoch++; m.EndLSN = 0x2000000; return nil }); err != nil {
		t.Fatal(err)
	}
	b, _ := Open(ctx, store, Breaker{}) // the replacement
	won, err := b.Commit(ctx, func(m *Manifest) error { m.Epoch++; m.EndLSN = 0x3000000; return nil })
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Commit(ctx, func(m *Manifest) error { m.Epoch++; m.EndLSN = max(m.EndLSN, 0x2800000); return nil })
	if !errors.Is(err, ErrSuperseded) || !errors.Is(err, cdc.ErrCASBreaker) {
		t.Fatalf("the superseded writer committed or failed otherwise: %v", err)
	}
	if !strings.Contains(err.Error(), b.Writer()) || cdc.HintOf(err) == "" {
		t.Errorf("the error does not name the other writer or has no hint: %v", err)
	}
	m, _, err := Load(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if m.Epoch != won.Epoch || m.Writer != b.Writer() {
		t.Fatalf("the manifest moved after the superseded commit: epoch %d writer %s", m.Epoch, m.Writer)
	}
}

// lossyStore applies a conditional put but reports it as failed, the way a
// lost response (or an SDK retry answered 412 by the write itself) looks.
type lossyStore struct {
	*memory.Store
	lose bool
	err  error
}

func (s *lossyStore) PutIf(ctx context.Context, key string, data []byte, expected blob.Version) (blob.Version, error) {
	v, err := s.Store.PutIf(ctx, key, data, expected)
	if err == nil && s.lose {
		s.lose = false
		return "", s.err
	}
	return v, err
}

// A write whose answer was lost is recognised on re-read by its stamp and
// not applied a second time, whether the answer came back as a conflict or
// as an error.
func TestCommitterRecognisesLostResponse(t *testing.T) {
	for _, lost := range []error{blob.ErrPrecondition, errors.New("connection reset by peer")} {
		ctx := context.Background()
		store := &lossyStore{Store: memory.New(), err: lost}
		if _, err := Create(ctx, store, sample(), time.Now()); err != nil {
			t.Fatal(err)
		}
		c, _ := Open(ctx, store, Breaker{Threshold: 1, Window: time.Hour})
		store.lose = true
		calls := 0
		m, err := c.Commit(ctx, func(m *Manifest) error { calls++; m.Epoch++; m.EndLSN += 0x100; return nil })
		if err != nil {
			t.Fatalf("%v: %v", lost, err)
		}
		if calls != 1 || m.Epoch != 1 {
			t.Fatalf("%v: mutate ran %d times, epoch %d: the write was applied twice", lost, calls, m.Epoch)
		}
		// The committer continues from the stored version.
		if _, err := c.Commit(ctx, func(m *Manifest) error { m.Epoch++; return nil }); err != nil {
			t.Fatal(err)
		}
		stored, _, _ := Load(ctx, store)
		if stored.Epoch != 2 {
			t.Fatalf("%v: stored epoch %d, want 2", lost, stored.Epoch)
		}
	}
}

func TestCommitterBreakerTrips(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	a, err := Create(ctx, store, sample(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Open(ctx, store, Breaker{})
	a.breaker = Breaker{Threshold: 3, Window: time.Hour}
	// Another writer commits between every attempt of a.
	_, err = a.Commit(ctx, func(m *Manifest) error {
		if _, err := b.Commit(ctx, func(m *Manifest) error { m.Epoch++; return nil }); err != nil {
			t.Fatal(err)
		}
		return nil
	})
	if !errors.Is(err, cdc.ErrCASBreaker) {
		t.Fatalf("want the breaker to trip, got %v", err)
	}
	if cdc.HintOf(err) == "" {
		t.Error("the breaker error has no operator hint")
	}
}

// Compaction commits conflict with the streamer as often as compaction runs;
// they do not move the stream position and must not trip its breaker.
func TestCommitterBreakerIgnoresNonRivals(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	a, err := Create(ctx, store, sample(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Open(ctx, store, Breaker{})
	a.breaker = Breaker{Threshold: 3, Window: time.Hour}
	attempts := 0
	m, err := a.Commit(ctx, func(m *Manifest) error {
		attempts++
		if attempts <= 6 { // a compactor commits between a's first six attempts
			if _, err := b.Commit(ctx, func(m *Manifest) error {
				m.Garbage = append(m.Garbage, RetiredFile{Path: fmt.Sprintf("x/%d", attempts)})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		m.Epoch++
		return nil
	})
	if err != nil {
		t.Fatalf("conflicts with a non-rival tripped the committer: %v", err)
	}
	if attempts != 7 || m.Epoch != 1 || len(m.Garbage) != 6 {
		t.Fatalf("attempts %d, epoch %d, garbage %d: want 7, 1, 6", attempts, m.Epoch, len(m.Garbage))
	}
}

// Resync adopts a write of this committer that landed while the store
// failed both its answer and the re-read, and refuses a stream another
// process moved meanwhile.
func TestCommitterResync(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	if _, err := Create(ctx, store, sample(), time.Now()); err != nil {
		t.Fatal(err)
	}
	c, _ := Open(ctx, store, Breaker{})
	// The write lands, but this committer never learns it (as when the
	// store failed both the answer and the re-read).
	landed := c.Current().Clone()
	landed.Epoch, landed.Writer = 1, c.Writer()
	data, _ := landed.Encode()
	_, v, _ := Load(ctx, store)
	if _, err := store.PutIf(ctx, Key, data, v); err != nil {
		t.Fatal(err)
	}
	if err := c.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commit(ctx, func(m *Manifest) error { m.Epoch++; return nil }); err != nil || c.Current().Epoch != 2 {
		t.Fatalf("after resync: epoch %d, %v", c.Current().Epoch, err)
	}
	other, _ := Open(ctx, store, Breaker{})
	if _, err := other.Commit(ctx, func(m *Manifest) error { m.Epoch++; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Resync(ctx); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("resync after another writer moved the stream: %v", err)
	}
}

// TestEncodedBytes: a committed version and a loaded one know the size
// they have in the store (what every flush rewrites), without encoding
// again.
func TestEncodedBytes(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	c, err := Create(ctx, store, sample(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Commit(ctx, func(m *Manifest) error { m.Epoch++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.Get(ctx, Key)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(stored)
	stored.Close()
	if err != nil {
		t.Fatal(err)
	}
	if m.EncodedBytes() != len(data) || m.EncodedBytes() == 0 {
		t.Errorf("committed version: EncodedBytes %d, stored %d bytes", m.EncodedBytes(), len(data))
	}
	loaded, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.EncodedBytes() != len(data) {
		t.Errorf("decoded version: EncodedBytes %d, stored %d bytes", loaded.EncodedBytes(), len(data))
	}
}
