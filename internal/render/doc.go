// Package render turns rows of pg-cdc's Parquet files back into what
// PostgreSQL itself would print, for `pg-cdc dump`.
//
// Input is a parquet.Row in the exact leaf layout internal/parquetfile writes
// (design.md §4): the metadata leaves __op, __lsn, __seq, __xid, __op_ts and
// __unchanged (a list, one leaf), then one leaf per table column in table
// order; an array column is Optional(List(Optional(element))) and holds one
// value per element (or one for a NULL or empty list), with repetition and
// definition levels. The columns are described by the manifest
// (manifest.Column), whose ParquetType chooses the renderer.
//
// Invariants:
//
//   - Text output (Table.AppendText, the CSV format) is PostgreSQL 15's own
//     output text under DateStyle ISO, IntervalStyle postgres, TimeZone UTC,
//     extra_float_digits ≥ 1 and bytea_output hex, byte for byte, for every
//     value a file holds exactly (docs/types.md). Values a documented type
//     rule changed when the file was written print as written: numeric NaN
//     in a DECIMAL column as NULL, a timestamp beyond year 294247 as
//     infinity, a multi-dimensional array or one with a lower bound other
//     than 1 as a one-dimensional array.
//   - JSON output (Table.AppendJSON, the JSONL format) is one JSON value per
//     column: integers and finite floats as numbers, json/jsonb embedded,
//     arrays as JSON arrays, NULL as null, everything else as a JSON string
//     of the text form above (DECIMAL included, so its digits and scale are
//     never rounded by a reader's float64). docs/types.md, "Dump output".
//   - CSV output is RFC 4180 with PostgreSQL's COPY … CSV convention: NULL is
//     an empty unquoted field, the empty string is "" (encoding/csv cannot
//     tell them apart, so the fields are written here).
//   - Rendering never panics on a row of another layout: a value of an
//     unexpected kind, level or column index is an error naming the column.
//   - Metadata columns are not rendered; ReadMeta decodes them for the
//     caller that merges rows.
package render
