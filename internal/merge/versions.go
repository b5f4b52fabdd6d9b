package merge

import (
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// Schema versions (design.md §8). The merge reads every file in the table's
// newest schema version: parquet-go maps a file's columns to it by name, so
// a dropped column is not read and a column the file lacks reads NULL. A
// column is the same column across versions when its field id is; so a
// newest-version column whose field id the file's version does not have
// (added after the file was written, or dropped and added again under the
// same name) takes the value rows written before it existed read in
// PostgreSQL: its recorded missing value (the ADD COLUMN's DEFAULT), or
// NULL. A column the file's version has under another name (a rename) is
// read under that name (readSchemas); one it has with another type is
// converted by parquet-go (integer widening, integer to string: the only
// type changes the stream follows).

// versionFills returns, per file key, the leaf values to put in place of
// the columns the file's schema version lacks; files that lack none are not
// listed.
func versionFills(mt *manifest.Table, schema *parquetfile.Schema, newest *manifest.SchemaVersion) (map[string]map[int][]parquet.Value, error) {
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
		// The same column: the same field id, whatever its name there (a
		// rename; readSchemas reads it under that name); without field ids
		// (an older manifest), the same name.
		type ident struct {
			name string
			id   int
		}
		have := map[ident]bool{}
		for _, c := range sv.Columns {
			if c.FieldID != 0 {
				have[ident{id: c.FieldID}] = true
			} else {
				have[ident{name: c.Name}] = true
			}
		}
		var fills map[int][]parquet.Value
		for i, c := range newest.Columns {
			if (c.FieldID != 0 && have[ident{id: c.FieldID}]) || (c.FieldID == 0 && have[ident{name: c.Name}]) {
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
	return byFile(mt, func(v int) (map[int][]parquet.Value, bool, error) {
		if v == newest.Version {
			return nil, false, nil
		}
		f, err := forVersion(v)
		return f, f != nil, err
	})
}

// byFile maps the key of every file of mt (base and deltas) to forVersion
// of the schema version it was written with; files for whose version it
// reports nothing (false) are left out. forVersion caches per version
// itself.
func byFile[T any](mt *manifest.Table, forVersion func(v int) (T, bool, error)) (map[string]T, error) {
	out := map[string]T{}
	add := func(v int, files []manifest.File) error {
		x, ok, err := forVersion(v)
		if err != nil || !ok {
			return err
		}
		for _, f := range files {
			out[f.Path] = x
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

// readSchemas returns, per file key, the schema to read the file with when
// its version names some newest-version columns otherwise (renamed: same
// field id, another name). It is the newest schema with those columns under
// the file's names, so parquet-go finds them and the rows come out in the
// newest layout; columns the file's version lacks get a name no file holds
// (they read NULL, and versionFills fills them).
func readSchemas(mt *manifest.Table, newest *cdc.Table) (map[string]*parquet.Schema, error) {
	byVersion := map[int]*parquet.Schema{}
	forVersion := func(v int) (*parquet.Schema, error) {
		if ps, ok := byVersion[v]; ok {
			return ps, nil
		}
		sv := mt.SchemaAt(v)
		if sv == nil {
			return nil, fmt.Errorf("merge %s: a file was written with schema version %d, which the manifest does not hold", mt.ID(), v)
		}
		names := map[int]string{}
		for _, c := range sv.Columns {
			if c.FieldID != 0 {
				names[c.FieldID] = c.Name
			}
		}
		t := *newest
		t.Columns = append([]cdc.Column(nil), newest.Columns...)
		renamed := false
		for i, c := range t.Columns {
			name, ok := names[c.FieldID]
			switch {
			case c.FieldID == 0 || (ok && name == c.Name):
			case ok:
				t.Columns[i].Name, renamed = name, true
			default:
				t.Columns[i].Name = fmt.Sprintf("__pgcdc_absent_%d", i)
			}
		}
		var ps *parquet.Schema
		if renamed {
			sc, err := parquetfile.NewSchema(&t)
			if err != nil {
				return nil, fmt.Errorf("merge %s: read schema of version %d: %w", mt.ID(), v, err)
			}
			ps = sc.Parquet()
		}
		byVersion[v] = ps
		return ps, nil
	}
	return byFile(mt, func(v int) (*parquet.Schema, bool, error) {
		ps, err := forVersion(v)
		return ps, ps != nil, err
	})
}

// unchangedRenames returns, per file key, the renames (the name in the
// file's schema version → the newest name) to apply to the names its rows
// list in __unchanged, which name columns as the file's version called
// them; files of versions without renames are not listed.
func unchangedRenames(mt *manifest.Table, newest *manifest.SchemaVersion) (map[string]map[string]string, error) {
	byVersion := map[int]map[string]string{}
	return byFile(mt, func(v int) (map[string]string, bool, error) {
		if ren, ok := byVersion[v]; ok {
			return ren, ren != nil, nil
		}
		sv := mt.SchemaAt(v)
		if sv == nil {
			return nil, false, fmt.Errorf("merge %s: a file was written with schema version %d, which the manifest does not hold", mt.ID(), v)
		}
		var ren map[string]string
		for _, c := range newest.Columns {
			for _, fc := range sv.Columns {
				if c.FieldID != 0 && fc.FieldID == c.FieldID && fc.Name != c.Name {
					if ren == nil {
						ren = map[string]string{}
					}
					ren[fc.Name] = c.Name
				}
			}
		}
		byVersion[v] = ren
		return ren, ren != nil, nil
	})
}

// renameUnchanged rewrites the names row lists in __unchanged by ren.
func renameUnchanged(row parquet.Row, ren map[string]string) {
	for i, v := range row {
		if v.Column() != parquetfile.LeafUnchanged || v.IsNull() {
			continue
		}
		if name, ok := ren[string(v.ByteArray())]; ok {
			row[i] = parquet.ByteArrayValue([]byte(name)).Level(v.RepetitionLevel(), v.DefinitionLevel(), parquetfile.LeafUnchanged)
		}
	}
}
