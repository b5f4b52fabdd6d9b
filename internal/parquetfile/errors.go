package parquetfile

import (
	"fmt"
	"unicode/utf8"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// maxErrorValue bounds how much of a refused value an error repeats: enough
// to find the row, not enough to flood a log with a large text or bytea.
const maxErrorValue = 64

// ValueError is a value that its column's Parquet type cannot represent. It
// matches cdc.ErrData (errors.Is) and carries an operator hint
// (cdc.HintOf); its fields let a caller count refusals per column.
type ValueError struct {
	Table       cdc.TableID
	Column      string
	PGType      string
	ParquetType string
	Value       string // the value's text, truncated to about 64 bytes
	Reason      error
	err         *cdc.Error
}

func newValueError(table cdc.TableID, c *column, text []byte, reason error) *ValueError {
	e := &ValueError{
		Table:       table,
		Column:      c.name,
		PGType:      c.pgType,
		ParquetType: c.parquetType,
		Value:       truncate(text),
		Reason:      reason,
	}
	e.err = &cdc.Error{
		Class: cdc.ErrData,
		Msg: fmt.Sprintf("table %s column %q (%s as %s): value %q: %v",
			table, c.name, c.pgType, c.parquetType, e.Value, reason),
		Hint: fmt.Sprintf("nothing from this transaction on was confirmed, so nothing is lost, but a restart replays the same value; see docs/exit-codes.md (code 17) for the ways out for %s", table),
	}
	return e
}

func (e *ValueError) Error() string { return e.err.Error() }

// Unwrap exposes the classified error, so errors.Is(err, cdc.ErrData) and
// cdc.HintOf see through a ValueError.
func (e *ValueError) Unwrap() error { return e.err }

// truncate returns at most maxErrorValue bytes of b, cut on a rune boundary,
// with "..." when something was cut.
func truncate(b []byte) string {
	if len(b) <= maxErrorValue {
		return string(b)
	}
	n := maxErrorValue
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "..."
}
