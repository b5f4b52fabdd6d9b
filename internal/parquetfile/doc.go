// Package parquetfile maps PostgreSQL columns to Parquet types and writes
// change rows (design.md §4) as Parquet files with parquet-go's Row API.
//
// Invariants:
//
//   - Column order is fixed: the metadata columns __op, __lsn, __seq, __xid,
//     __op_ts, __unchanged, then the table's columns in table order.
//     parquet.Group sorts its fields by name, so the schema root is an
//     explicitly ordered group; every row is built in leaf-column order with
//     explicit repetition and definition levels.
//   - Metadata columns are required (__unchanged is an optional list that is
//     always written, empty when no column is unchanged); every table column
//     is optional, because key-only deletes, truncate markers and unchanged
//     TOAST values carry NULLs whatever the source's NOT NULL says.
//   - A value is converted exactly, or written by a documented Rule
//     (docs/types.md: ±infinity as the extreme values DuckDB reads as
//     ±infinity, numeric NaN in a DECIMAL column as NULL, multi-dimensional
//     arrays flattened, ...), counted per column (Writer.Adjusted) and
//     reported once per column (Schema.SetReporter). Only malformed input
//     is refused, with an error matching cdc.ErrData that names the table,
//     the column, its types and the value. Bad input never panics (fuzzed).
//   - A table column carries its stable field id (cdc.Column.FieldID) when it
//     is positive; metadata columns carry none.
//   - Write copies what it needs before returning: callers may reuse the
//     Datum buffers. Memory is bounded by flushing a row group whenever the
//     buffered data passes a byte budget (DefaultRowGroupBytes), whatever the
//     number of rows; min/max bounds of byte-array columns outside the
//     primary key are not kept, because parquet-go holds them whole until
//     Close.
//
// Mapping: docs/types.md, one table of every PostgreSQL type, by the type
// the values have (a domain's base type; an array's element inside a LIST),
// unless a per-column override (cdc.Column.Repr, "string") chooses the text
// form. Input is PostgreSQL's text output under the session settings the
// source adapter sets (DateStyle 'ISO, YMD', TimeZone 'UTC',
// extra_float_digits 3, bytea_output hex, IntervalStyle postgres).
package parquetfile
