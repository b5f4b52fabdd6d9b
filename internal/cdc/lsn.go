package cdc

import (
	"fmt"
	"strconv"
	"strings"
)

// LSN is a position in PostgreSQL's write-ahead log. Its text form is
// PostgreSQL's "X/Y" (two hexadecimal halves); in Parquet it is stored as the
// plain integer.
type LSN uint64

// ParseLSN parses PostgreSQL's "X/Y" form.
func ParseLSN(s string) (LSN, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok || hi == "" || lo == "" || len(hi) > 8 || len(lo) > 8 {
		return 0, fmt.Errorf("parse LSN %q: want the form X/Y", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("parse LSN %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("parse LSN %q: %w", s, err)
	}
	return LSN(h<<32 | l), nil
}

// String formats the LSN the way PostgreSQL does ("16/B374D848").
func (l LSN) String() string {
	return fmt.Sprintf("%X/%X", uint32(l>>32), uint32(l))
}

// MarshalText implements encoding.TextMarshaler, so LSNs appear in JSON in
// their PostgreSQL form.
func (l LSN) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *LSN) UnmarshalText(b []byte) error {
	v, err := ParseLSN(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}
