package changefeed

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func TestCursorText(t *testing.T) {
	for _, c := range []Cursor{{}, {LSN: 0x16B3748, Seq: 12}, {LSN: 0x16_B374D848, Seq: -3}, {LSN: MaxLSN - 1, Seq: math.MaxInt64}, {LSN: MaxLSN, Seq: math.MaxInt64 - 1}, {LSN: 1, Seq: math.MinInt64}} {
		s := c.String()
		got, err := ParseCursor(s)
		if err != nil || got != c {
			t.Errorf("ParseCursor(%q) = %v, %v; want %v", s, got, err, c)
		}
	}
	if s := (Cursor{LSN: 0x16_B374D848, Seq: 7}).String(); s != "16.B374D848.7" {
		t.Errorf("String = %q", s)
	}
	if c, err := ParseCursor(""); err != nil || !c.IsZero() {
		t.Errorf(`ParseCursor("") = %v, %v`, c, err)
	}
	if c, _ := ParseCursor("0.16b3748.12"); c.LSN != cdc.LSN(0x16B3748) {
		t.Errorf("lower-case hex: %v", c)
	}
	for _, bad := range []string{"x", "0.0", "0.0.0.0", "..", "0..1", "g.0.0", "0.0.1x", "0.0.+1", "0.0.-", "123456789.0.0", "0.0.99999999999999999999",
		" 0.0.0", "0.0.0 ", "0/16B3748.1", "0x1.0.0", strings.Repeat("0", 65), "0.0.1' OR 1=1"} {
		if c, err := ParseCursor(bad); !errors.Is(err, ErrCursor) {
			t.Errorf("ParseCursor(%q) = %v, %v; want ErrCursor", bad, c, err)
		}
	}
}

// TestCursorRefused: positions that would wrap the feed's query or its
// next position are refused whole, naming the cursor and what is wrong.
func TestCursorRefused(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		// 2^63: int64(LSN) would be math.MinInt64, every row after it.
		{"80000000.0.9223372036854775807", "2^63 or more"},
		{"80000000.0.0", "2^63 or more"},
		{"FFFFFFFF.FFFFFFFF.-1", "2^63 or more"},
		// The last position there is: nothing follows it.
		{"7FFFFFFF.FFFFFFFF.9223372036854775807", "last position"},
		{"0.0.9223372036854775808", "sequence: out of range"},
		{"0.0.-9223372036854775809", "sequence: out of range"},
		{"0.100000000.0", "LSN low part"},
	} {
		_, err := ParseCursor(c.text)
		if !errors.Is(err, ErrCursor) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), strconv.Quote(c.text)) {
			t.Errorf("ParseCursor(%q) = %v; want ErrCursor naming the cursor and %q", c.text, err, c.want)
		}
	}
	// A cursor built in code is checked as well (Feed.Page does).
	for _, c := range []Cursor{{LSN: MaxLSN + 1}, {LSN: MaxLSN, Seq: math.MaxInt64}} {
		if err := c.Check(); !errors.Is(err, ErrCursor) || !strings.Contains(err.Error(), c.String()) {
			t.Errorf("%v.Check() = %v", c, err)
		}
	}
	// The end of an LSN (endOf's form, the feed's oldest_cursor and
	// changes_cursor) is a position: the next is the following LSN's first.
	if next, ok := endOf(0x400).Next(); !ok || next != (Cursor{LSN: 0x401, Seq: math.MinInt64}) {
		t.Errorf("endOf(0/400).Next() = %v, %v", next, ok)
	}
}

// FuzzCursorCodec: parsing never panics; what parses is a position to read
// after and re-encodes to the same cursor; the next position after it
// exists, follows it, and nothing lies between them (no wrap, no skip).
func FuzzCursorCodec(f *testing.F) {
	for _, s := range []string{"", "0.0.0", "16.B374D848.-7", "FFFFFFFF.FFFFFFFF.9223372036854775807", "1.2", "a.b.c",
		"80000000.0.9223372036854775807", "7FFFFFFF.FFFFFFFF.9223372036854775807", "7FFFFFFF.FFFFFFFF.9223372036854775806",
		"0.0.-9223372036854775808", "7fffffff.0.9223372036854775807", "0.00000001.-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			if !errors.Is(err, ErrCursor) {
				t.Fatalf("ParseCursor(%q): %v, not ErrCursor", s, err)
			}
			return
		}
		if err := c.Check(); err != nil {
			t.Fatalf("ParseCursor(%q) = %v, which Check refuses: %v", s, c, err)
		}
		if c.LSN > MaxLSN {
			t.Fatalf("ParseCursor(%q) = %v: LSN past MaxLSN", s, c)
		}
		again, err := ParseCursor(c.String())
		if err != nil || again != c || again.String() != c.String() {
			t.Fatalf("round trip of %q: %v, %v", s, again, err)
		}
		next, ok := c.Next()
		if !ok {
			t.Fatalf("%v (from %q) has no next position", c, s)
		}
		if !c.Less(next) {
			t.Fatalf("%v.Next() = %v, not after it (a wrap)", c, next)
		}
		if next.Seq != math.MinInt64 && (next.LSN != c.LSN || next.Seq != c.Seq+1) ||
			next.Seq == math.MinInt64 && (c.Seq != math.MaxInt64 || next.LSN != c.LSN+1) {
			t.Fatalf("%v.Next() = %v: not the position right after it", c, next)
		}
	})
}

// FuzzCursorPosition: a cursor built in code is valid exactly when its
// LSN is at most MaxLSN and a position follows it; a valid one survives
// its text form, and its next position never wraps.
func FuzzCursorPosition(f *testing.F) {
	f.Add(uint64(0), int64(0))
	f.Add(uint64(MaxLSN), int64(math.MaxInt64))
	f.Add(uint64(MaxLSN)+1, int64(0))
	f.Add(uint64(0x400), int64(math.MaxInt64))
	f.Add(uint64(math.MaxUint64), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, lsn uint64, seq int64) {
		c := Cursor{LSN: cdc.LSN(lsn), Seq: seq}
		err := c.Check()
		valid := c.LSN <= MaxLSN && !(c.LSN == MaxLSN && c.Seq == math.MaxInt64)
		if (err == nil) != valid || err != nil && !errors.Is(err, ErrCursor) {
			t.Fatalf("%v.Check() = %v, want valid %v", c, err, valid)
		}
		next, ok := c.Next()
		if ok != valid {
			t.Fatalf("%v.Next() ok %v, want %v", c, ok, valid)
		}
		if !valid {
			if _, err := ParseCursor(c.String()); !errors.Is(err, ErrCursor) {
				t.Fatalf("ParseCursor(%q) = %v, want ErrCursor", c.String(), err)
			}
			return
		}
		if !c.Less(next) || next.LSN > MaxLSN || int64(next.LSN) < int64(c.LSN) {
			t.Fatalf("%v.Next() = %v: wrapped", c, next)
		}
		if got, err := ParseCursor(c.String()); err != nil || got != c {
			t.Fatalf("ParseCursor(%q) = %v, %v", c.String(), got, err)
		}
	})
}
