package render

import (
	"bufio"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// Format is an output format of Writer.
type Format string

// The output formats.
const (
	// FormatCSV: RFC 4180, a header row of the column names, then one
	// record per row of PostgreSQL text values; NULL is an empty unquoted
	// field and the empty string is "" (PostgreSQL's COPY … CSV
	// convention). A field is quoted when it is empty, holds a comma, a
	// double quote, CR or LF, starts with a space or tab (as encoding/csv
	// quotes), or is \. (COPY's end-of-data marker). Records end in LF.
	FormatCSV Format = "csv"
	// FormatJSONL: one JSON object per row and line, the table's columns
	// as keys in table order (metadata columns are not included), values
	// as AppendJSON prints them.
	FormatJSONL Format = "jsonl"
)

// Formats lists the formats ParseFormat accepts.
var Formats = []Format{FormatCSV, FormatJSONL}

// ParseFormat parses a --format flag value.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("output format %q: want csv or jsonl", s)
}

// Writer prints rows of one table in one format. Output is buffered: call
// Flush at the end. It is not safe for concurrent use.
type Writer struct {
	t      *Table
	format Format
	w      *bufio.Writer
	keys   [][]byte // JSONL: `"name":` per column, with the separator
	cols   [][]parquet.Value
	line   []byte
	field  []byte
	header bool // the CSV header was written
	err    error
}

// NewWriter returns a writer of t's rows to w in format f.
func NewWriter(w io.Writer, t *Table, f Format) (*Writer, error) {
	if _, err := ParseFormat(string(f)); err != nil {
		return nil, err
	}
	wr := &Writer{t: t, format: f, w: bufio.NewWriterSize(w, 64<<10)}
	if f == FormatJSONL {
		wr.keys = make([][]byte, len(t.names))
		for i, name := range t.names {
			sep := byte(',')
			if i == 0 {
				sep = '{'
			}
			k := appendJSONString([]byte{sep}, []byte(name))
			wr.keys[i] = append(k, ':')
		}
	}
	return wr, nil
}

// WriteRow prints one row (internal/parquetfile's layout; its metadata
// columns are ignored). The CSV header is printed before the first row. A
// row that does not render is an error naming the column, and nothing of it
// is printed; an error of the underlying writer is returned by every later
// call.
func (w *Writer) WriteRow(row parquet.Row) error {
	if w.err != nil {
		return w.err
	}
	if err := w.writeHeader(); err != nil {
		return err
	}
	cols, err := w.t.Split(row, w.cols)
	w.cols = cols
	if err != nil {
		return err
	}
	line := w.line[:0]
	switch w.format {
	case FormatCSV:
		for i, vals := range cols {
			if i > 0 {
				line = append(line, ',')
			}
			var null bool
			w.field, null, err = w.t.AppendText(w.field[:0], i, vals)
			if err != nil {
				return err
			}
			if !null {
				line = appendCSVField(line, w.field)
			}
		}
		line = append(line, '\n')
	case FormatJSONL:
		for i, vals := range cols {
			line = append(line, w.keys[i]...)
			if line, err = w.t.AppendJSON(line, i, vals); err != nil {
				return err
			}
		}
		if len(cols) == 0 {
			line = append(line, '{')
		}
		line = append(line, '}', '\n')
	}
	w.line = line
	return w.write(line)
}

// Flush prints the CSV header if no row was written, then writes out the
// buffered output.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.writeHeader(); err != nil {
		return err
	}
	if err := w.w.Flush(); err != nil {
		w.err = fmt.Errorf("write %s output: %w", w.format, err)
	}
	return w.err
}

func (w *Writer) writeHeader() error {
	if w.header || w.format != FormatCSV {
		return nil
	}
	w.header = true
	line := w.line[:0]
	for i, name := range w.t.names {
		if i > 0 {
			line = append(line, ',')
		}
		line = appendCSVField(line, []byte(name))
	}
	w.line = append(line, '\n')
	return w.write(w.line)
}

func (w *Writer) write(b []byte) error {
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("write %s output: %w", w.format, err)
	}
	return w.err
}

// appendCSVField appends a non-NULL field, quoted when it must be (see
// FormatCSV). encoding/csv would write the empty string unquoted, the same
// as NULL, which is why fields are written here.
func appendCSVField(dst, field []byte) []byte {
	quote := len(field) == 0 || field[0] == ' ' || field[0] == '\t' ||
		(len(field) == 2 && field[0] == '\\' && field[1] == '.')
	for _, c := range field {
		if c == ',' || c == '"' || c == '\r' || c == '\n' {
			quote = true
			break
		}
	}
	if !quote {
		return append(dst, field...)
	}
	dst = append(dst, '"')
	for _, c := range field {
		if c == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, c)
	}
	return append(dst, '"')
}
