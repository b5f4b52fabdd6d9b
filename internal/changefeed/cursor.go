package changefeed

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Cursor is a position in a table's change feed: the order token
// (__lsn, __seq) of the last change a consumer has. A page holds the changes
// after it. The zero Cursor is before every change: a feed read from it
// starts at the oldest change available.
type Cursor struct {
	LSN cdc.LSN
	Seq int64
}

// MaxCursorLen bounds the text a cursor is parsed from.
const MaxCursorLen = 64

// MaxLSN is the largest LSN a cursor may hold. Change rows keep __lsn as a
// signed 64-bit integer (BIGINT), so no row has an LSN of 2^63 or more, and
// such a cursor, converted for the feed's query, would wrap to a negative
// number and select the whole feed from its start.
const MaxLSN = cdc.LSN(math.MaxInt64)

// ErrCursor is the class of a cursor's text that is not a cursor.
var ErrCursor = errors.New("bad cursor")

// String is the cursor's text form, "<hi>.<lo>.<seq>": the LSN's high and
// low 32 bits in upper-case hex as PostgreSQL writes them (16/B374D848 is
// "16.B374D848"), and the sequence number in decimal, negative for snapshot
// and backfill rows ("0.16B3748.12", "0.1000000.-3"). The zero cursor is
// "0.0.0". The form is stable: a consumer may store it, and compare two
// cursors by parsing them, but should not need to build one.
func (c Cursor) String() string {
	return fmt.Sprintf("%X.%X.%d", uint32(c.LSN>>32), uint32(c.LSN), c.Seq)
}

// IsZero reports whether c is the start of the feed.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// Less reports whether c is before d in (__lsn, __seq) order.
func (c Cursor) Less(d Cursor) bool {
	return c.LSN < d.LSN || c.LSN == d.LSN && c.Seq < d.Seq
}

// MarshalText implements encoding.TextMarshaler (String).
func (c Cursor) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (ParseCursor).
func (c *Cursor) UnmarshalText(b []byte) error {
	p, err := ParseCursor(string(b))
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// Next is the first position after c in (__lsn, __seq) order: the next
// sequence number at c's LSN or, after the last one (Seq math.MaxInt64, the
// form endOf gives: "after every change at this LSN"), the first sequence
// number at the next LSN. ok is false when no position follows c within
// the positions a change row can have (LSN at most MaxLSN): incrementing
// would wrap to the start of the feed.
func (c Cursor) Next() (next Cursor, ok bool) {
	switch {
	case c.LSN > MaxLSN:
		return Cursor{}, false
	case c.Seq < math.MaxInt64:
		return Cursor{LSN: c.LSN, Seq: c.Seq + 1}, true
	case c.LSN < MaxLSN:
		return Cursor{LSN: c.LSN + 1, Seq: math.MinInt64}, true
	}
	return Cursor{}, false
}

// Check reports whether c is a position the feed can read after: an error
// of class ErrCursor naming the cursor and what is wrong with it, or nil.
// ParseCursor checks what it parses; Feed.Page checks its cursor too, as a
// caller may build one.
func (c Cursor) Check() error {
	if why := c.flaw(); why != "" {
		return fmt.Errorf("%w %s: %s", ErrCursor, c, why)
	}
	return nil
}

// flaw says what makes c no position to read after, or "".
func (c Cursor) flaw() string {
	if c.LSN > MaxLSN {
		return fmt.Sprintf("LSN %s is 2^63 or more; a change's LSN is at most %s (the high part at most 7FFFFFFF)", c.LSN, MaxLSN)
	}
	if _, ok := c.Next(); !ok {
		return fmt.Sprintf("sequence %d at LSN %s is the last position there is: no change can follow it", c.Seq, c.LSN)
	}
	return ""
}

// ParseCursor reads a cursor's text form (Cursor.String). The empty string
// is the zero cursor. Anything else that is not exactly three dot-separated
// parts — hex of at most 8 digits, hex of at most 8 digits, a decimal int64
// — or that is no position to read after (Check) is an error of class
// ErrCursor naming the cursor and saying what is wrong. Whether the cursor
// is past the newest committed change is for Feed.Page to say: only the
// sink knows that.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	if len(s) > MaxCursorLen {
		return Cursor{}, fmt.Errorf("%w: %d characters, a cursor has at most %d", ErrCursor, len(s), MaxCursorLen)
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Cursor{}, fmt.Errorf("%w %q: want <hex>.<hex>.<seq> as a page's next_cursor gives it", ErrCursor, s)
	}
	hi, err := hex32(parts[0])
	if err != nil {
		return Cursor{}, fmt.Errorf("%w %q: LSN high part: %v", ErrCursor, s, err)
	}
	lo, err := hex32(parts[1])
	if err != nil {
		return Cursor{}, fmt.Errorf("%w %q: LSN low part: %v", ErrCursor, s, err)
	}
	seq, err := decimal64(parts[2])
	if err != nil {
		return Cursor{}, fmt.Errorf("%w %q: sequence: %v", ErrCursor, s, err)
	}
	c := Cursor{LSN: cdc.LSN(hi<<32 | lo), Seq: seq}
	if why := c.flaw(); why != "" {
		return Cursor{}, fmt.Errorf("%w %q: %s", ErrCursor, s, why)
	}
	return c, nil
}

func hex32(s string) (uint64, error) {
	if s == "" || len(s) > 8 {
		return 0, errors.New("want 1 to 8 hex digits")
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune("0123456789abcdefABCDEF", rune(s[i])) {
			return 0, errors.New("want hex digits only")
		}
	}
	return strconv.ParseUint(s, 16, 32)
}

func decimal64(s string) (int64, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || len(digits) > 19 {
		return 0, errors.New("want a whole number")
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, errors.New("want decimal digits only")
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("out of range")
	}
	return n, nil
}

// endOf is the cursor after every change at or before lsn.
func endOf(lsn cdc.LSN) Cursor { return Cursor{LSN: lsn, Seq: math.MaxInt64} }
