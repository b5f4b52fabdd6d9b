package postgres

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// row is a parsed row with nil for NULL, copied out of the parser.
type row []*string

func str(s string) *string { return &s }

func parseAll(ncols int, chunks ...[]byte) ([]row, error) {
	var rows []row
	p := newCopyParser(ncols, func(vals []cdc.Datum) error {
		r := make(row, len(vals))
		for i, v := range vals {
			if v.Kind == cdc.DatumText {
				r[i] = str(string(v.Text))
			}
		}
		rows = append(rows, r)
		return nil
	})
	for _, c := range chunks {
		if _, err := p.Write(c); err != nil {
			return rows, err
		}
	}
	return rows, p.Close()
}

func TestCopyParser(t *testing.T) {
	tests := []struct {
		name  string
		ncols int
		in    string
		want  []row
	}{
		{"plain", 2, "a\tb\n1\t2\n", []row{{str("a"), str("b")}, {str("1"), str("2")}}},
		{"null and empty", 3, "\\N\t\t\\N\n", []row{{nil, str(""), nil}}},
		{"escaped controls", 1, `a\tb\nc\rd\be\ff\vg` + "\n", []row{{str("a\tb\nc\rd\be\ff\vg")}}},
		{"backslashes", 2, `\\` + "\t" + `\\N` + "\n", []row{{str(`\`), str(`\N`)}}},
		{"backslash N inside a field is N", 1, `a\Nb` + "\n", []row{{str("aNb")}}},
		{"other escapes are the character", 1, `\q\"\.` + "\n", []row{{str(`q".`)}}},
		{"escaped tab is data", 1, "a\\\tb\n", []row{{str("a\tb")}}},
		{"octal", 1, `\101\0\7\777\1234` + "\n", []row{{str("A\x00\x07\xff" + "S4")}}},
		{"hex", 1, `\x41\x4\xg\xFfz` + "\n", []row{{str("A\x04xg\xffz")}}},
		{"unicode", 2, "héllo\t日本語 🐘\n", []row{{str("héllo"), str("日本語 🐘")}}},
		{"bytea hex text", 1, `\\x00ff5c` + "\n", []row{{str(`\x00ff5c`)}}},
		{"end marker", 1, "a\n\\.\n", []row{{str("a")}}},
		{"no columns", 0, "\n\n", []row{{}, {}}},
		{"empty single column", 1, "\n", []row{{str("")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseAll(tt.ncols, []byte(tt.in))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %s, want %s", show(got), show(tt.want))
			}
			// Any split into two writes gives the same rows.
			for i := 0; i <= len(tt.in); i++ {
				got, err := parseAll(tt.ncols, []byte(tt.in[:i]), []byte(tt.in[i:]))
				if err != nil || !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("split at %d: got %s, %v", i, show(got), err)
				}
			}
		})
	}
}

func TestCopyParserErrors(t *testing.T) {
	tests := []struct {
		name  string
		ncols int
		in    string
		want  string
	}{
		{"too few fields", 2, "a\tb\nc\n", "row 2: 1 fields, want 2"},
		{"too many fields", 2, "a\tb\tc\n", "row 1: more than 2 fields"},
		{"trailing backslash", 1, "a\\\n", "row 1: backslash at end of line"},
		{"truncated", 1, "a\nb", "row 2: truncated"},
		{"data after end", 1, "\\.\na\n", "row 1: data after the end-of-data marker"},
		{"data in a table without columns", 0, "x\n", "row 1: data in a row of a table without columns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseAll(tt.ncols, []byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCopyParserEmitError(t *testing.T) {
	boom := errors.New("boom")
	n := 0
	p := newCopyParser(1, func([]cdc.Datum) error {
		if n++; n == 3 {
			return boom
		}
		return nil
	})
	_, err := p.Write([]byte("a\nb\nc\nd\n"))
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "row 3") {
		t.Fatalf("err = %v, want boom at row 3", err)
	}
	if p.rows != 2 {
		t.Errorf("rows = %d, want 2", p.rows)
	}
}

// TestCopyParserDoesNotModifyInput: io.Writer must not change its argument.
func TestCopyParserDoesNotModifyInput(t *testing.T) {
	in := []byte(`a\tb` + "\t" + `\\N` + "\n")
	orig := bytes.Clone(in)
	if _, err := parseAll(2, in); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, orig) {
		t.Fatalf("input changed to %q", in)
	}
}

// encodeField writes a value the way PostgreSQL's COPY TO does.
func encodeField(v []byte) []byte {
	var b []byte
	for _, c := range v {
		switch c {
		case '\\':
			b = append(b, `\\`...)
		case '\t':
			b = append(b, `\t`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\v':
			b = append(b, `\v`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func encodeRow(vals []*string) []byte {
	var b []byte
	for i, v := range vals {
		if i > 0 {
			b = append(b, '\t')
		}
		if v == nil {
			b = append(b, `\N`...)
		} else {
			b = append(b, encodeField([]byte(*v))...)
		}
	}
	return append(b, '\n')
}

func show(rows []row) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString("[")
		for i, v := range r {
			if i > 0 {
				b.WriteString(" ")
			}
			if v == nil {
				b.WriteString("NULL")
			} else {
				b.WriteString(strings.ReplaceAll(strings.ReplaceAll(*v, "\t", `⇥`), "\n", `⏎`))
			}
		}
		b.WriteString("]")
	}
	return b.String()
}

// FuzzCopyParser: any input, split anywhere, never panics and parses the same
// as when written at once.
func FuzzCopyParser(f *testing.F) {
	f.Add([]byte("a\tb\n\\N\t\\x41\\101\n"), uint8(2), uint16(3))
	f.Add([]byte("\\.\n"), uint8(1), uint16(0))
	f.Add([]byte("\n\n"), uint8(0), uint16(1))
	f.Add([]byte("a\\"), uint8(1), uint16(1))
	f.Fuzz(func(t *testing.T, in []byte, ncols uint8, split uint16) {
		n := int(ncols % 8)
		whole, errWhole := parseAll(n, in)
		s := int(split) % (len(in) + 1)
		parts, errParts := parseAll(n, in[:s], in[s:])
		if (errWhole == nil) != (errParts == nil) {
			t.Fatalf("whole: %v, split at %d: %v", errWhole, s, errParts)
		}
		if !reflect.DeepEqual(whole, parts) {
			t.Fatalf("whole %s, split at %d %s", show(whole), s, show(parts))
		}
	})
}

// FuzzCopyRoundTrip: whatever PostgreSQL can write, the parser reads back.
func FuzzCopyRoundTrip(f *testing.F) {
	f.Add("a\tb", "", false, true)
	f.Add(`\N`, "\n\r\\", true, false)
	f.Fuzz(func(t *testing.T, a, b string, aNull, bNull bool) {
		want := row{str(a), str(b)}
		if aNull {
			want[0] = nil
		}
		if bNull {
			want[1] = nil
		}
		got, err := parseAll(2, encodeRow(want))
		if err != nil {
			t.Fatalf("parse %q: %v", encodeRow(want), err)
		}
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Fatalf("round trip of %s gave %s", show([]row{want}), show(got))
		}
	})
}
