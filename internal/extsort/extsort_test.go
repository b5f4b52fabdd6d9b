package extsort

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// sameValue reports whether a and b are the same value: kind, levels,
// column and data, bit for bit.
func sameValue(a, b parquet.Value) bool {
	if a.IsNull() != b.IsNull() || a.RepetitionLevel() != b.RepetitionLevel() ||
		a.DefinitionLevel() != b.DefinitionLevel() || a.Column() != b.Column() {
		return false
	}
	if a.IsNull() {
		return true
	}
	if a.Kind() != b.Kind() {
		return false
	}
	switch a.Kind() {
	case parquet.Boolean:
		return a.Boolean() == b.Boolean()
	case parquet.Int32:
		return a.Int32() == b.Int32()
	case parquet.Int64:
		return a.Int64() == b.Int64()
	case parquet.Float:
		return math.Float32bits(a.Float()) == math.Float32bits(b.Float())
	case parquet.Double:
		return math.Float64bits(a.Double()) == math.Float64bits(b.Double())
	case parquet.Int96:
		return a.Int96() == b.Int96()
	default:
		return bytes.Equal(a.ByteArray(), b.ByteArray())
	}
}

func randomValue(r *rand.Rand, col int) parquet.Value {
	var v parquet.Value
	switch r.IntN(10) {
	case 0:
		v = parquet.NullValue()
	case 1:
		v = parquet.BooleanValue(r.IntN(2) == 0)
	case 2:
		v = parquet.Int32Value([]int32{0, -1, math.MinInt32, math.MaxInt32, r.Int32()}[r.IntN(5)])
	case 3:
		v = parquet.Int64Value([]int64{0, -1, math.MinInt64, math.MaxInt64, r.Int64() - r.Int64()}[r.IntN(5)])
	case 4:
		v = parquet.FloatValue([]float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(-1)), r.Float32()}[r.IntN(5)])
	case 5:
		v = parquet.DoubleValue([]float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), r.NormFloat64()}[r.IntN(5)])
	case 6:
		v = parquet.Int96Value(deprecated.Int96{r.Uint32(), r.Uint32(), r.Uint32()})
	case 7:
		b := make([]byte, r.IntN(3)*r.IntN(300))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		v = parquet.FixedLenByteArrayValue(b)
	default:
		b := make([]byte, r.IntN(4)*r.IntN(100))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		v = parquet.ByteArrayValue(b)
	}
	return v.Level(r.IntN(3), r.IntN(300)%256, col)
}

func TestRowEncodingRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var buf []byte
	var rows []parquet.Row
	for range 2000 {
		var row parquet.Row
		col := 0
		for range r.IntN(20) {
			col += r.IntN(3)
			row = append(row, randomValue(r, col))
		}
		if r.IntN(50) == 0 {
			row = append(row, parquet.Int64Value(1).Level(0, 0, parquet.MaxColumnIndex))
		}
		rows = append(rows, row)
		buf = appendRow(buf, row)
	}
	pos := 0
	var got parquet.Row
	for i, want := range rows {
		var n int
		var err error
		got, n, err = decodeRow(got[:0], buf[pos:])
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		pos += n
		if len(got) != len(want) {
			t.Fatalf("row %d: %d values, want %d", i, len(got), len(want))
		}
		for j := range want {
			if !sameValue(got[j], want[j]) {
				t.Fatalf("row %d value %d: got %v (kind %v), want %v (kind %v)", i, j, got[j], got[j].Kind(), want[j], want[j].Kind())
			}
		}
	}
	if pos != len(buf) {
		t.Fatalf("consumed %d of %d bytes", pos, len(buf))
	}
	// Every truncation fails cleanly instead of panicking or inventing a row.
	one := appendRow(nil, rows[7])
	for cut := range len(one) {
		if _, _, err := decodeRow(nil, one[:cut]); !errors.Is(err, errCorrupt) {
			t.Fatalf("a row cut at %d of %d bytes decoded (err %v)", cut, len(one), err)
		}
	}
}

// testRow is a key (column 0), a payload that makes rows large, and a
// sequence number that tells rows with equal keys apart.
func testRow(key int64, seq int, payload []byte) parquet.Row {
	return parquet.Row{
		parquet.Int64Value(key).Level(0, 0, 0),
		parquet.ByteArrayValue(payload).Level(0, 1, 1),
		parquet.Int64Value(int64(seq)).Level(0, 0, 2),
	}
}

func compareTest(a, b parquet.Row) int {
	if c := cmp.Compare(a[0].Int64(), b[0].Int64()); c != 0 {
		return c
	}
	return cmp.Compare(a[2].Int64(), b[2].Int64())
}

func TestSorterSpillsAndMergesWithinFanIn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rows  int
		fanIn int
	}{
		{"in memory", 500, 0},
		{"fan-in of the budget", 20_000, 0},
		{"fan-in 2", 20_000, 2},
		{"fan-in 3", 30_000, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, uint64(tc.rows)))
			dir := t.TempDir()
			s := New(nil, compareTest, dir, 1<<20)
			s.fanIn = tc.fanIn
			var want []parquet.Row
			payload := make([]byte, 400)
			for i := range tc.rows {
				for j := range payload {
					payload[j] = byte(r.UintN(16)) // compressible, like text
				}
				row := testRow(r.Int64N(int64(tc.rows/3+1)), i, payload[:r.IntN(len(payload))])
				want = append(want, slices.Clone(parquet.Row{row[0], row[1].Clone(), row[2]}))
				if err := s.Add(row); err != nil {
					t.Fatal(err)
				}
			}
			it, err := s.Sorted()
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(want, compareTest)
			for i := 0; ; i++ {
				row, err := it.Next()
				if errors.Is(err, io.EOF) {
					if i != len(want) {
						t.Fatalf("%d rows, want %d", i, len(want))
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if i >= len(want) {
					t.Fatal("more rows than were added")
				}
				for j := range want[i] {
					if !sameValue(row[j], want[i][j]) {
						t.Fatalf("row %d: got %v, want %v", i, row, want[i])
					}
				}
			}
			it.Close()
			if tc.rows > 10_000 && s.Runs() < 3 {
				t.Errorf("%d runs spilled; the test means to spill several", s.Runs())
			}
			if tc.fanIn > 0 && s.Merges() == 0 {
				t.Errorf("no intermediate merge with %d runs and fan-in %d", s.Runs(), tc.fanIn)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			left, _ := os.ReadDir(dir)
			if len(left) != 0 {
				t.Errorf("Close left %d files", len(left))
			}
			t.Logf("%d runs, %d intermediate merges", s.Runs(), s.Merges())
		})
	}
}

func TestArenaReusesSlabs(t *testing.T) {
	var a Arena
	row := testRow(1, 1, bytes.Repeat([]byte("x"), 1000))
	fill := func() {
		for range 5000 {
			a.Clone(row)
		}
	}
	fill()
	nv, nb := len(a.values), len(a.bytes)
	for range 5 {
		a.Reset()
		fill()
	}
	if len(a.values) != nv || len(a.bytes) != nb {
		t.Fatalf("slabs grew from %d+%d to %d+%d across resets", nv, nb, len(a.values), len(a.bytes))
	}
	// A row wider than a slab, and a value larger than a quarter slab.
	wide := make(parquet.Row, arenaChunk/valueSize+10)
	for i := range wide {
		wide[i] = parquet.Int64Value(int64(i)).Level(0, 0, i)
	}
	got := a.Clone(wide)
	if len(got) != len(wide) || got[len(got)-1].Int64() != int64(len(wide)-1) {
		t.Fatal("wide row not cloned")
	}
	big := testRow(2, 2, bytes.Repeat([]byte("y"), arenaChunk))
	if c := a.Clone(big); !bytes.Equal(c[1].ByteArray(), big[1].ByteArray()) {
		t.Fatal("big value not cloned")
	}
	a.Reset()
	if c := a.Clone(row); !bytes.Equal(c[1].ByteArray(), row[1].ByteArray()) {
		t.Fatal(fmt.Sprint("after reset: ", c))
	}
}

// sliceSource returns sorted rows through one reused buffer, as a file
// reader would.
type sliceSource struct {
	rows []parquet.Row
	buf  parquet.Row
}

func (s *sliceSource) Next() (parquet.Row, error) {
	if len(s.rows) == 0 {
		return nil, io.EOF
	}
	s.buf = append(s.buf[:0], s.rows[0]...)
	s.rows = s.rows[1:]
	return s.buf, nil
}

func TestSortedWithSources(t *testing.T) {
	for _, added := range []int{0, 300, 20_000} {
		t.Run(fmt.Sprint(added, " added"), func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, uint64(added)))
			s := New(nil, compareTest, t.TempDir(), 1<<20)
			defer s.Close()
			s.fanIn = 3
			var want []parquet.Row
			payload := bytes.Repeat([]byte("p"), 200)
			for i := range added {
				row := testRow(r.Int64N(5000), i, payload)
				want = append(want, row)
				if err := s.Add(row); err != nil {
					t.Fatal(err)
				}
			}
			var srcs []Source
			for k := range 2 {
				var rows []parquet.Row
				for i := range 7000 {
					rows = append(rows, testRow(int64(i)*int64(k+1), 1_000_000*(k+1)+i, payload))
				}
				want = append(want, rows...)
				srcs = append(srcs, &sliceSource{rows: rows})
			}
			it, err := s.SortedWith(srcs...)
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			slices.SortFunc(want, compareTest)
			for i := 0; ; i++ {
				row, err := it.Next()
				if errors.Is(err, io.EOF) {
					if i != len(want) {
						t.Fatalf("%d rows, want %d", i, len(want))
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if compareTest(row, want[i]) != 0 {
					t.Fatalf("row %d: got %v, want %v", i, row, want[i])
				}
			}
		})
	}
}

// Among equal rows the sources' come first, whether the added rows stayed
// in memory or were spilled.
func TestSortedWithSourcesFirstAmongEquals(t *testing.T) {
	for _, added := range []int{10, 20_000} {
		t.Run(fmt.Sprint(added, " added"), func(t *testing.T) {
			s := New(nil, compareTest, t.TempDir(), 1<<20)
			defer s.Close()
			big := bytes.Repeat([]byte("a"), 300)
			var rows []parquet.Row
			for i := range added {
				if err := s.Add(testRow(int64(i), i, big)); err != nil {
					t.Fatal(err)
				}
				rows = append(rows, testRow(int64(i), i, []byte("source")))
			}
			it, err := s.SortedWith(&sliceSource{rows: rows})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			for i := 0; ; i++ {
				row, err := it.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if fromSource := string(row[1].ByteArray()) == "source"; fromSource != (i%2 == 0) {
					t.Fatalf("row %d (key %d) from the source: %v", i, row[0].Int64(), fromSource)
				}
			}
		})
	}
}
