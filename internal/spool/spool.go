// Package spool writes a Parquet file to the local state directory before it
// is uploaded to the sink whole. Writing locally first keeps memory bounded
// (row groups go to disk as they fill) and means a sink never holds a partial
// object: the upload is a single atomic Put of a finished file.
//
// Spooled files are scratch: the manifest never names them, and a crash
// leaves only garbage in the state directory that the next run removes.
package spool

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// File is one Parquet file being written locally.
type File struct {
	path   string
	f      *os.File
	buf    *bufio.Writer
	pw     *parquetfile.Writer
	size   int64
	closed bool
}

// Create opens a new spool file in dir.
func Create(dir string, schema *parquetfile.Schema) (*File, error) {
	return create(dir, schema, parquetfile.NewWriter)
}

// CreatePipelined opens a new spool file in dir whose rows are encoded and
// written on a goroutine of its own (parquetfile.NewPipelinedWriter), so
// the caller's work between Writes overlaps with the compression. Finish or
// Remove ends that goroutine.
func CreatePipelined(dir string, schema *parquetfile.Schema) (*File, error) {
	return create(dir, schema, parquetfile.NewPipelinedWriter)
}

func create(dir string, schema *parquetfile.Schema, newWriter func(io.Writer, *parquetfile.Schema) *parquetfile.Writer) (*File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create spool dir: %w", err)
	}
	f, err := os.CreateTemp(dir, "part-*.parquet")
	if err != nil {
		return nil, fmt.Errorf("create spool file: %w", err)
	}
	buf := bufio.NewWriterSize(f, 1<<20)
	return &File{path: f.Name(), f: f, buf: buf, pw: newWriter(buf, schema)}, nil
}

// Write appends one row.
func (s *File) Write(meta cdc.RowMeta, values []cdc.Datum) error {
	return s.pw.Write(meta, values)
}

// Adjusted returns, per column, the values written so far that a documented
// type rule changed (parquetfile.Writer.Adjusted).
func (s *File) Adjusted() map[string]int64 { return s.pw.Adjusted() }

// Rows returns the rows written so far.
func (s *File) Rows() int64 { return s.pw.Rows() }

// Finish writes the Parquet footer and closes the local file. It returns the
// file's size.
func (s *File) Finish() (int64, error) {
	if s.closed {
		return s.size, nil
	}
	s.closed = true
	if err := s.pw.Close(); err != nil {
		s.f.Close()
		return 0, fmt.Errorf("finish spool file %s: %w", s.path, err)
	}
	if err := s.buf.Flush(); err != nil {
		s.f.Close()
		return 0, fmt.Errorf("finish spool file %s: %w", s.path, err)
	}
	st, err := s.f.Stat()
	if err != nil {
		s.f.Close()
		return 0, fmt.Errorf("finish spool file %s: %w", s.path, err)
	}
	s.size = st.Size()
	if err := s.f.Close(); err != nil {
		return 0, fmt.Errorf("finish spool file %s: %w", s.path, err)
	}
	return s.size, nil
}

// Upload puts the finished file to the store under key.
func (s *File) Upload(ctx context.Context, store blob.Store, key string) error {
	if !s.closed {
		return fmt.Errorf("upload %s: spool file not finished", key)
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	defer f.Close()
	if err := store.Put(ctx, key, f); err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	return nil
}

// Remove closes (if needed) and deletes the local file.
func (s *File) Remove() error {
	if !s.closed {
		s.closed = true
		s.pw.Abort() // before the file closes under its encoder
		s.f.Close()
	}
	if err := os.Remove(s.path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove spool file: %w", err)
	}
	return nil
}
