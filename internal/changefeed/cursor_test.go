package changefeed

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func TestCursorText(t *testing.T) {
	for _, c := range []Cursor{{}, {LSN: 0x16B3748, Seq: 12}, {LSN: 0x16_B374D848, Seq: -3}, {LSN: math.MaxUint64, Seq: math.MaxInt64}, {LSN: 1, Seq: math.MinInt64}} {
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

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0.0.0", "16.B374D848.-7", "FFFFFFFF.FFFFFFFF.9223372036854775807", "1.2", "a.b.c"} {
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
		again, err := ParseCursor(c.String())
		if err != nil || again != c {
			t.Fatalf("round trip of %q: %v, %v", s, again, err)
		}
	})
}
