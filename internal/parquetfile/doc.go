// Package parquetfile maps PostgreSQL columns to Parquet types and writes
// change rows (DESIGN §4) as Parquet files with parquet-go's Row API.
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
//   - A value is either converted exactly or refused with an error matching
//     cdc.ErrData that names the table, the column, its types and the value.
//     Nothing is rounded, clamped or turned into NULL, and bad input never
//     panics (fuzzed).
//   - A table column carries its stable field id (cdc.Column.FieldID) when it
//     is positive; metadata columns carry none.
//   - Write copies what it needs before returning: callers may reuse the
//     Datum buffers. Memory is bounded by flushing a row group whenever the
//     buffered data passes a byte budget, whatever the number of rows.
//
// Input is PostgreSQL's text output under the session settings the source
// adapter sets (DateStyle 'ISO, YMD', TimeZone 'UTC', extra_float_digits 3,
// bytea_output hex, IntervalStyle postgres). Dates and timestamps before the
// common era (" BC") are stored with astronomical year numbering (1 BC is
// year 0), the same proleptic Gregorian calendar PostgreSQL, Parquet readers
// and DuckDB use; ±infinity has no Parquet representation and is refused.
package parquetfile
