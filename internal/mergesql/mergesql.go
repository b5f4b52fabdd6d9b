package mergesql

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// Input is one table at one manifest version.
type Input struct {
	Table *manifest.Table
	// Path returns the local path DuckDB reads a file key from (the
	// filesystem sink's file, or the read-through cache's copy).
	Path func(key string) (string, error)
	// Bound, when set, keeps only the rows of transactions at or before it
	// (time travel inside a version, design.md §11).
	Bound Bound
}

// Bound limits the rows read to the transactions committed at or before a
// point: by commit LSN (__lsn ≤ LSN) or by the source's commit time
// (__op_ts ≤ Time). The zero Bound keeps every row.
type Bound struct {
	LSN  cdc.LSN
	Time time.Time
}

// IsZero reports whether b keeps every row.
func (b Bound) IsZero() bool { return b.LSN == 0 && b.Time.IsZero() }

// ErrNoFiles is returned for a table whose manifest entry names no file:
// the caller reads it as empty with the table's columns (Empty).
var ErrNoFiles = errors.New("the table has no files")

// metadata are the metadata columns every file holds, in file order.
var metadata = []string{parquetfile.ColOp, parquetfile.ColLSN, parquetfile.ColSeq, parquetfile.ColXID, parquetfile.ColOpTS, parquetfile.ColUnchanged}

// Columns returns the names of the table's newest schema version, in table
// order: the columns of State.
func Columns(mt *manifest.Table) []string {
	sv := mt.CurrentSchema()
	if sv == nil {
		return nil
	}
	out := make([]string, len(sv.Columns))
	for i, c := range sv.Columns {
		out[i] = c.Name
	}
	return out
}

// Empty is a query with the table's newest columns (and, with changes, the
// metadata columns) and no row: the state of a table with no file yet.
func Empty(mt *manifest.Table, changes bool) (string, error) {
	sv := mt.CurrentSchema()
	if sv == nil {
		return "", fmt.Errorf("table %s: no schema version %d in the manifest", mt.ID(), mt.SchemaVersion)
	}
	var cols []string
	for _, c := range sv.Columns {
		t, err := DuckType(c.ParquetType)
		if err != nil {
			return "", fmt.Errorf("table %s column %q: %w", mt.ID(), c.Name, err)
		}
		cols = append(cols, fmt.Sprintf("CAST(NULL AS %s) AS %s", t, Ident(c.Name)))
	}
	if changes {
		cols = append(cols, "CAST(NULL AS VARCHAR) AS __op", "CAST(NULL AS BIGINT) AS __lsn", "CAST(NULL AS BIGINT) AS __seq",
			"CAST(NULL AS BIGINT) AS __xid", "CAST(NULL AS TIMESTAMPTZ) AS __op_ts", "CAST(NULL AS VARCHAR[]) AS __unchanged")
	}
	return "SELECT " + strings.Join(cols, ", ") + " WHERE false", nil
}

// Ident quotes a DuckDB identifier.
func Ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Literal quotes a DuckDB string literal.
func Literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// boundWhere is the filter of b on the metadata columns, or "".
func boundWhere(b Bound) string {
	var conds []string
	if b.LSN != 0 {
		conds = append(conds, fmt.Sprintf("__lsn <= %d", int64(b.LSN)))
	}
	if !b.Time.IsZero() {
		conds = append(conds, fmt.Sprintf("__op_ts <= make_timestamptz(%d)", b.Time.UnixMicro()))
	}
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}
