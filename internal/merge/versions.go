package merge

import (
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// Schema versions (DESIGN §8). The merge reads every file in the table's
// newest schema version: parquet-go maps a file's columns to it by name, so
// a dropped column is not read and a column the file lacks reads NULL. A
// column is the same column across versions when its field id is; so a
// newest-version column whose field id the file's version does not have
// (added after the file was written, or dropped and added again under the
// same name) takes the value rows written before it existed read in
// PostgreSQL: its recorded missing value (the ADD COLUMN's DEFAULT), or
// NULL.

// versionFills returns, per file key, the leaf values to put in place of
// the columns the file's schema version lacks; files that lack none are not
// listed.
func versionFills(mt *manifest.Table, schema *parquetfile.Schema, newest *manifest.SchemaVersion) (map[string]map[int][]parquet.Value, error) {
	out := map[string]map[int][]parquet.Value{}
	values := map[int][]parquet.Value{} // by newest column index, computed once
	fillsOf := map[int]map[int][]parquet.Value{}
	forVersion := func(v int) (map[int][]parquet.Value, error) {
		if f, ok := fillsOf[v]; ok {
			return f, nil
		}
		sv := mt.SchemaAt(v)
		if sv == nil {
			return nil, fmt.Errorf("merge %s: a file was written with schema version %d, which the manifest does not hold", mt.ID(), v)
		}
		// The same column: same field id and name (without field ids, an
		// older manifest, by name alone).
		type ident struct {
			name string
			id   int
		}
		have := map[ident]bool{}
		for _, c := range sv.Columns {
			have[ident{c.Name, c.FieldID}] = true
		}
		var fills map[int][]parquet.Value
		for i, c := range newest.Columns {
			if have[ident{c.Name, c.FieldID}] {
				continue
			}
			vals, ok := values[i]
			if !ok {
				var err error
				if vals, err = schema.ColumnValues(i, c.MissingValue); err != nil {
					return nil, fmt.Errorf("merge %s: column %q: missing value: %w", mt.ID(), c.Name, err)
				}
				values[i] = vals
			}
			if fills == nil {
				fills = map[int][]parquet.Value{}
			}
			fills[parquetfile.FirstDataLeaf+i] = vals
		}
		fillsOf[v] = fills
		return fills, nil
	}
	add := func(v int, files []manifest.File) error {
		if v == newest.Version {
			return nil
		}
		f, err := forVersion(v)
		if err != nil || f == nil {
			return err
		}
		for _, file := range files {
			out[file.Path] = f
		}
		return nil
	}
	if mt.Base != nil {
		if err := add(mt.Base.SchemaVersion, mt.Base.Files); err != nil {
			return nil, err
		}
	}
	for _, d := range mt.Deltas {
		if err := add(d.SchemaVersion, d.Files); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fillRow returns row with the values of each leaf in fills replaced by
// fills' values. A row holds its values in leaf order; a new row is
// returned, row is left as it was.
func fillRow(row parquet.Row, fills map[int][]parquet.Value) parquet.Row {
	out := make(parquet.Row, 0, len(row)+len(fills))
	done := map[int]bool{}
	for _, v := range row {
		leaf := v.Column()
		if f, ok := fills[leaf]; ok {
			if !done[leaf] {
				out = append(out, f...)
				done[leaf] = true
			}
			continue
		}
		out = append(out, v)
	}
	return out
}
