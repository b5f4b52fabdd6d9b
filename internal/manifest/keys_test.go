package manifest

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// unescapeKeyElement inverts EscapeKeyElement. It accepts hex digits of
// either case, so that it also inverts a key that a case-insensitive
// filesystem folded to lower case, and refuses everything EscapeKeyElement
// never writes.
func unescapeKeyElement(s string) (string, error) {
	if s == "%" {
		return "", nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-':
			b.WriteByte(c)
		case c == '%' && i+2 < len(s):
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("bad escape at %d in %q", i, s)
			}
			b.WriteByte(hi<<4 | lo)
			i += 2
		default:
			return "", fmt.Errorf("byte %q at %d in %q is never written", c, i, s)
		}
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("empty element")
	}
	return b.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func TestFileKeyEscaping(t *testing.T) {
	long := strings.Repeat("é", 31) + "x" // 63 bytes, PostgreSQL's limit
	for _, tt := range []struct {
		id   cdc.TableID
		want string // the <schema>/<table> prefix
	}{
		{cdc.TableID{Schema: "public", Name: "orders"}, "public/orders"},
		{cdc.TableID{Schema: "public", Name: "T"}, "public/%54"},
		{cdc.TableID{Schema: "public", Name: "t"}, "public/t"},
		{cdc.TableID{Schema: "public", Name: "a.b"}, "public/a%2Eb"},
		{cdc.TableID{Schema: "a", Name: "b"}, "a/b"},
		{cdc.TableID{Schema: "..", Name: "."}, "%2E%2E/%2E"},
		{cdc.TableID{Schema: ".tmp-x", Name: ".lock-y"}, "%2Etmp-x/%2Elock-y"},
		{cdc.TableID{Schema: "s/..", Name: `a\b "c"`}, "s%2F%2E%2E/a%5Cb%20%22c%22"},
		{cdc.TableID{Schema: "100%", Name: "日本"}, "100%25/%E6%97%A5%E6%9C%AC"},
		{cdc.TableID{Schema: "x", Name: "😀"}, "x/%F0%9F%98%80"},
		{cdc.TableID{Schema: "", Name: ""}, "%/%"},
	} {
		key := FileKey(tt.id, "g0001", KindDelta, 7, 1)
		if want := tt.want + "/g0001/delta/00000007/part-00001.parquet"; key != want {
			t.Errorf("FileKey(%q) = %s, want %s", tt.id, key, want)
		}
		if err := blob.ValidKey(key); err != nil {
			t.Errorf("FileKey(%q): %v", tt.id, err)
		}
	}
	if got := EscapeKeyElement(long); len(got) > 189 {
		t.Errorf("a 63-byte name escapes to %d bytes", len(got))
	}
}

// FuzzFileKey checks the three promises of the key layout for any pair of
// tables: every key is valid (never leaves the sink root), the schema and
// table elements round-trip even after folding to lower case, and two
// different tables never share a directory, even on a case-insensitive
// filesystem.
func FuzzFileKey(f *testing.F) {
	seeds := [][4]string{
		{"public", "orders", "public", "Orders"},
		{"public", "T", "public", "t"},
		{"public", "a.b", "a", "b"},
		{"a.b", "c", "a", "b.c"},
		{"a/b", "c", "a", "b/c"},
		{"..", ".", ".", ".."},
		{"%41", "x", "A", "x"},
		{"", "x", "%", "x"},
		{`we"ird`, `back\slash`, "sp ace", "日本語😀"},
		{".tmp-1", ".lock-2", "_pgcdc", "manifest.json"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, s1, t1, s2, t2 string) {
		a, b := cdc.TableID{Schema: s1, Name: t1}, cdc.TableID{Schema: s2, Name: t2}
		keyA := FileKey(a, "g0001", KindBase, 0, 0)
		keyB := FileKey(b, "g0001", KindBase, 0, 0)
		for _, tc := range []struct {
			id  cdc.TableID
			key string
		}{{a, keyA}, {b, keyB}} {
			if err := blob.ValidKey(tc.key); err != nil {
				t.Fatalf("FileKey(%q): %v", tc.id, err)
			}
			parts := strings.Split(tc.key, "/")
			for _, p := range parts {
				if strings.HasPrefix(p, ".") {
					t.Fatalf("FileKey(%q) = %q: element %q starts with a dot", tc.id, tc.key, p)
				}
			}
			for i, want := range []string{tc.id.Schema, tc.id.Name} {
				for _, el := range []string{parts[i], strings.ToLower(parts[i])} {
					got, err := unescapeKeyElement(el)
					if err != nil && want != "" {
						t.Fatalf("unescape %q of FileKey(%q): %v", el, tc.id, err)
					}
					if got != want {
						t.Fatalf("unescape %q of FileKey(%q) = %q, want %q", el, tc.id, got, want)
					}
				}
				if want != "" {
					if got, err := url.PathUnescape(parts[i]); err != nil || got != want {
						t.Fatalf("url.PathUnescape(%q) = %q, %v; want %q", parts[i], got, err, want)
					}
				}
			}
		}
		dirA := strings.Join(strings.Split(keyA, "/")[:2], "/")
		dirB := strings.Join(strings.Split(keyB, "/")[:2], "/")
		if a != b && strings.EqualFold(dirA, dirB) {
			t.Fatalf("tables %q and %q share the directory %q / %q", a, b, dirA, dirB)
		}
	})
}
