package postgres

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// copyParser reads PostgreSQL's COPY text format (the default of COPY ... TO
// STDOUT) as an io.Writer and hands each row to emit.
//
// The format: one row per line ending in '\n'; fields separated by '\t'; a
// field that is exactly `\N` is NULL; inside a field a backslash escapes the
// next character: \b \f \n \r \t \v are the control characters, \\ is a
// backslash, \ooo (1 to 3 octal digits) and \xhh (1 or 2 hex digits) are
// bytes, and any other escaped character is itself (so `\N` inside a longer
// field is "N", and an escaped tab is data, not a separator). A line that is
// exactly `\.` marks the end of data. A backslash at the very end of a line is
// an error: PostgreSQL never writes one, and reading it as an escaped newline
// would silently join two rows.
//
// Values handed to emit point into the parser's buffers (or into the slice
// passed to Write) and are valid only during the call. The parser never
// modifies the bytes passed to Write.
type copyParser struct {
	ncols int
	emit  func(values []cdc.Datum) error

	partial []byte      // the start of a line whose end has not arrived yet
	scratch []byte      // decoded fields that contained escapes
	values  []cdc.Datum // reused for every row
	rows    int64       // rows emitted
	ended   bool        // saw the `\.` end-of-data line
}

func newCopyParser(ncols int, emit func([]cdc.Datum) error) *copyParser {
	return &copyParser{ncols: ncols, emit: emit, values: make([]cdc.Datum, 0, ncols)}
}

// errAfterEnd is returned for data after the end-of-data marker.
var errAfterEnd = errors.New("data after the end-of-data marker")

// Write parses every complete line in b and keeps an incomplete last line
// for the next Write. An error (a malformed row, or emit's error) names the
// row number, counting from 1.
func (p *copyParser) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		if p.ended {
			return 0, fmt.Errorf("row %d: %w", p.rows+1, errAfterEnd)
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.partial = append(p.partial, b...)
			break
		}
		line := b[:i]
		if len(p.partial) > 0 {
			p.partial = append(p.partial, line...)
			line = p.partial
		}
		b = b[i+1:]
		if err := p.line(line); err != nil {
			return 0, err
		}
		p.partial = p.partial[:0]
	}
	return n, nil
}

// Close reports a last line without its newline: the stream was cut short.
func (p *copyParser) Close() error {
	if len(p.partial) > 0 {
		return fmt.Errorf("row %d: truncated: no end of line", p.rows+1)
	}
	return nil
}

func (p *copyParser) line(line []byte) error {
	if len(line) == 2 && line[0] == '\\' && line[1] == '.' {
		p.ended = true
		return nil
	}
	row := p.rows + 1
	p.values = p.values[:0]
	if p.ncols == 0 {
		// A table without columns: PostgreSQL writes an empty line per row.
		if len(line) != 0 {
			return fmt.Errorf("row %d: data in a row of a table without columns", row)
		}
	} else if err := p.split(line); err != nil {
		return fmt.Errorf("row %d: %w", row, err)
	}
	if len(p.values) != p.ncols {
		return fmt.Errorf("row %d: %d fields, want %d", row, len(p.values), p.ncols)
	}
	if err := p.emit(p.values); err != nil {
		return fmt.Errorf("row %d: %w", row, err)
	}
	p.rows++
	return nil
}

// split cuts line into fields and decodes them into p.values.
func (p *copyParser) split(line []byte) error {
	// Decoding never lengthens a field, so scratch never reallocates while a
	// row is split and earlier fields' slices stay valid.
	if cap(p.scratch) < len(line) {
		p.scratch = make([]byte, 0, len(line))
	}
	p.scratch = p.scratch[:0]
	start := 0
	for {
		// Most fields hold no backslash: find the tab that ends the field
		// and check the field for a backslash, both with IndexByte (SIMD),
		// and only walk a field that has one byte by byte.
		end := len(line)
		if i := bytes.IndexByte(line[start:], '\t'); i >= 0 {
			end = start + i
		}
		escaped := false
		if bytes.IndexByte(line[start:end], '\\') >= 0 {
			// The escaped character is data, even a tab: find the field's
			// real end.
			escaped = true
			end = len(line)
			for i := start; i < len(line); i++ {
				if line[i] == '\\' {
					if i+1 == len(line) {
						return errors.New("backslash at end of line")
					}
					i++
					continue
				}
				if line[i] == '\t' {
					end = i
					break
				}
			}
		}
		if len(p.values) == p.ncols {
			return fmt.Errorf("more than %d fields", p.ncols)
		}
		field := line[start:end]
		switch {
		case len(field) == 2 && field[0] == '\\' && field[1] == 'N':
			p.values = append(p.values, cdc.Datum{Kind: cdc.DatumNull})
		case escaped:
			from := len(p.scratch)
			p.scratch = unescape(p.scratch, field)
			p.values = append(p.values, cdc.Datum{Kind: cdc.DatumText, Text: p.scratch[from:len(p.scratch):len(p.scratch)]})
		default:
			p.values = append(p.values, cdc.Datum{Kind: cdc.DatumText, Text: field[:len(field):len(field)]})
		}
		if end == len(line) {
			return nil
		}
		start = end + 1
	}
}

// unescape appends the decoded field to dst. The caller guarantees no
// backslash ends the field.
func unescape(dst, field []byte) []byte {
	for i := 0; i < len(field); i++ {
		c := field[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		c = field[i]
		switch c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'v':
			dst = append(dst, '\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(c - '0')
			for k := 0; k < 2 && i+1 < len(field) && field[i+1] >= '0' && field[i+1] <= '7'; k++ {
				i++
				v = v*8 + int(field[i]-'0')
			}
			dst = append(dst, byte(v)) // \400 and above wrap, as in PostgreSQL
		case 'x':
			if i+1 < len(field) && isHex(field[i+1]) {
				i++
				v := hexVal(field[i])
				if i+1 < len(field) && isHex(field[i+1]) {
					i++
					v = v*16 + hexVal(field[i])
				}
				dst = append(dst, byte(v))
			} else {
				dst = append(dst, 'x') // \x without digits is "x"
			}
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	default:
		return int(c - '0')
	}
}
