package cdc

import "time"

// Op is the kind of a change row (__op).
type Op byte

const (
	OpInsert   Op = 'I'
	OpUpdate   Op = 'U'
	OpDelete   Op = 'D'
	OpTruncate Op = 'T'
)

func (o Op) String() string { return string(rune(o)) }

// DatumKind says what a Datum holds.
type DatumKind uint8

const (
	// DatumNull is SQL NULL, or a column that was not sent (non-key columns of
	// a DELETE under REPLICA IDENTITY DEFAULT).
	DatumNull DatumKind = iota
	// DatumText holds the value in PostgreSQL's text output form.
	DatumText
	// DatumUnchanged is a TOASTed value that an UPDATE did not change and
	// PostgreSQL therefore did not send; it is listed in __unchanged.
	DatumUnchanged
)

// Datum is one column value in PostgreSQL's text form. The snapshot (COPY)
// and the stream (pgoutput) both produce text from the type's output
// function under the same session settings, so one converter turns both into
// the same typed Parquet value.
type Datum struct {
	Kind DatumKind
	Text []byte
}

// Change is one row change inside a transaction. Values are in the table's
// column order.
type Change struct {
	Table  *Table
	Op     Op
	Values []Datum
	// KeyChanged marks the U row of an UPDATE that moved the row to a new
	// primary key. Its unchanged (TOAST) values cannot be taken from an
	// earlier version of the same key, so they must be recovered elsewhere.
	KeyChanged bool
}

// Size is the approximate memory a change holds, used for flush and spill
// budgets.
func (c *Change) Size() int {
	n := 48 + 24*len(c.Values)
	for _, v := range c.Values {
		n += len(v.Text)
	}
	return n
}

// TxnMeta identifies a committed source transaction.
type TxnMeta struct {
	XID XID
	// CommitLSN is the LSN of the commit record; it is written to __lsn.
	CommitLSN LSN
	// EndLSN is the end of the commit record: the position that may be
	// confirmed to PostgreSQL once the transaction is durable.
	EndLSN     LSN
	CommitTime time.Time
}

// RowMeta is the order token and provenance written with every row.
type RowMeta struct {
	Op         Op
	LSN        LSN
	Seq        int64
	XID        XID
	CommitTime time.Time
}
