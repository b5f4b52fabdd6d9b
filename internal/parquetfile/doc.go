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
//     buffered data passes a byte budget (DefaultRowGroupBytes), whatever the
//     number of rows; min/max bounds of byte-array columns outside the
//     primary key are not kept, because parquet-go holds them whole until
//     Close.
//
// Mapping (by type OID and typmod; the manifest's parquet_type in brackets):
// bool [BOOLEAN]; int2 [INT16]; int4 [INT32]; int8 and oid [INT64];
// float4 [FLOAT] and float8 [DOUBLE], NaN and ±Infinity kept;
// numeric(p,s) with 1 ≤ p ≤ 38 and 0 ≤ s ≤ p [DECIMAL(p,s)] on INT32
// (p ≤ 9), INT64 (p ≤ 18) or the smallest FIXED_LEN_BYTE_ARRAY; other
// numerics, unconstrained included [STRING] with PostgreSQL's exact text;
// bytea [BINARY]; date [DATE]; timestamp [TIMESTAMP(us)]; timestamptz
// [TIMESTAMP(us,UTC)]; uuid [UUID]; json and jsonb [JSON], the text exactly
// as sent; everything else, text types included [STRING], the text form.
// A decimal's text is parsed exactly; fractional digits beyond the scale
// are accepted only when they are zeros (the value is unchanged).
//
// Input is PostgreSQL's text output under the session settings the source
// adapter sets (DateStyle 'ISO, YMD', TimeZone 'UTC', extra_float_digits 3,
// bytea_output hex, IntervalStyle postgres). Dates and timestamps before the
// common era (" BC") are stored with astronomical year numbering (1 BC is
// year 0), the same proleptic Gregorian calendar PostgreSQL, Parquet readers
// and DuckDB use; ±infinity has no Parquet representation and is refused.
package parquetfile
