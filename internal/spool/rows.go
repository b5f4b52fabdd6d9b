package spool

import "github.com/parquet-go/parquet-go"

// WriteRow appends a row already in the schema's leaf layout
// (parquetfile.Writer.WriteRow).
func (s *File) WriteRow(row parquet.Row) error { return s.pw.WriteRow(row) }

// Size returns roughly how large the file would be if finished now.
func (s *File) Size() int64 { return s.pw.Size() }
