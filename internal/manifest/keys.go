package manifest

import (
	"fmt"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Kind is the kind of a data file: base or delta.
type Kind string

const (
	KindBase  Kind = "base"
	KindDelta Kind = "delta"
)

// FileKey is the deterministic key of a data file (design.md §1 rule 6):
// <schema>/<table>/<gen>/<kind>/<epoch>/part-<n>.parquet, with schema, table
// and generation escaped by EscapeKeyElement. A replayed flush writes the
// same keys.
func FileKey(t cdc.TableID, gen string, kind Kind, epoch uint64, part int) string {
	return fmt.Sprintf("%s/%s/%s/%s/%08d/part-%05d.parquet",
		EscapeKeyElement(t.Schema), EscapeKeyElement(t.Name), EscapeKeyElement(gen), kind, epoch, part)
}

// MergedKey is the key of a file a minor compaction wrote from the deltas
// of epochs from to to: <schema>/<table>/<gen>/delta/<to>/from-<from>-part-<n>
// .parquet. It sits with epoch to's deltas (so it is never taken for an
// upload in flight) under a name no flush writes, and it depends only on
// the inputs, so a rerun after a kill writes the same key.
func MergedKey(t cdc.TableID, gen string, from, to uint64, part int) string {
	return fmt.Sprintf("%s/%s/%s/%s/%08d/from-%08d-part-%05d.parquet",
		EscapeKeyElement(t.Schema), EscapeKeyElement(t.Name), EscapeKeyElement(gen), KindDelta, to, from, part)
}

// EscapeKeyElement turns a name (a PostgreSQL schema or table name: any
// bytes but NUL, up to 63 of them) into one element of a sink key. Bytes
// a-z, 0-9, '_' and '-' stand for themselves; every other byte, including
// upper-case letters, '.', '/', '%' and each byte of a multi-byte character,
// is written %XX with upper-case hex digits. The result:
//
//   - is injective, and stays injective under case folding: the only
//     letters it writes literally are lower-case, and '%' always starts an
//     escape, so "T" (%54) and "t" never share a directory on a
//     case-insensitive filesystem;
//   - never contains '/', never is "." or "..", and never starts with '.',
//     so a key stays under the sink root and never names the filesystem
//     sink's own scratch files (".tmp-", ".lock-");
//   - is valid URL path escaping, so url.PathUnescape returns the name;
//   - is at most 3 × 63 = 189 bytes for a PostgreSQL name, below the usual
//     255-byte limit of a file name.
//
// The empty string, which PostgreSQL never uses as a name, becomes "%", so
// no key element is empty; url.PathUnescape rejects that one.
func EscapeKeyElement(s string) string {
	if s == "" {
		return "%"
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xF])
	}
	return b.String()
}
