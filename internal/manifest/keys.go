package manifest

import (
	"fmt"
	"net/url"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// Kind is the kind of a data file: base or delta.
type Kind string

const (
	KindBase  Kind = "base"
	KindDelta Kind = "delta"
)

// FileKey is the deterministic key of a data file (DESIGN §1 rule 6):
// <schema>/<table>/<gen>/<kind>/<epoch>/part-<n>.parquet, with schema and
// table names path-escaped. A replayed flush writes the same keys.
func FileKey(t cdc.TableID, gen string, kind Kind, epoch uint64, part int) string {
	return fmt.Sprintf("%s/%s/%s/%s/%08d/part-%05d.parquet",
		escape(t.Schema), escape(t.Name), escape(gen), kind, epoch, part)
}

// escape path-escapes one key element. "." and ".." are escaped as well, so
// a key never contains a ".." element.
func escape(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}
