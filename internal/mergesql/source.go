package mergesql

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// source is how the files of a table read in its newest schema version:
// the base's rows and the deltas' rows, each a SELECT of the newest
// columns, the metadata columns and __base (whether the row is the base's).
type source struct {
	newest *manifest.SchemaVersion
	base   string // "" without a base
	deltas string // "" without deltas
}

// readSource projects every file group (files of one kind and schema
// version) to the newest version.
func readSource(in Input) (*source, error) {
	mt := in.Table
	newest := mt.CurrentSchema()
	if newest == nil {
		return nil, fmt.Errorf("table %s: no schema version %d in the manifest", mt.ID(), mt.SchemaVersion)
	}
	p, err := newProjector(mt, newest)
	if err != nil {
		return nil, err
	}
	src := &source{newest: newest}
	if b := mt.Base; b != nil && len(b.Files) > 0 {
		// Version 0 (a snapshot base, an older manifest) is the table's
		// first version (manifest.Table.SchemaAt).
		if src.base, err = p.group(in, b.SchemaVersion, b.Files, true); err != nil {
			return nil, err
		}
	}
	var versions []int
	files := map[int][]manifest.File{}
	for _, d := range mt.Deltas {
		v := d.SchemaVersion
		if sv := mt.SchemaAt(v); sv != nil {
			v = sv.Version
		}
		if files[v] == nil {
			versions = append(versions, v)
		}
		files[v] = append(files[v], d.Files...)
	}
	slices.Sort(versions)
	var parts []string
	for _, v := range versions {
		q, err := p.group(in, v, files[v], false)
		if err != nil {
			return nil, err
		}
		parts = append(parts, q)
	}
	src.deltas = strings.Join(parts, "\nUNION ALL\n")
	if src.base == "" && src.deltas == "" {
		return nil, ErrNoFiles
	}
	return src, nil
}

// projector maps the columns of one schema version to the newest.
type projector struct {
	mt     *manifest.Table
	newest *manifest.SchemaVersion
	schema *parquetfile.Schema // the newest version's, for missing values
	types  []string            // DuckDB type of each newest column
}

func newProjector(mt *manifest.Table, newest *manifest.SchemaVersion) (*projector, error) {
	t, err := mt.SourceTableAt(newest.Version)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", mt.ID(), err)
	}
	schema, err := parquetfile.NewSchema(t)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", mt.ID(), err)
	}
	p := &projector{mt: mt, newest: newest, schema: schema}
	for _, c := range newest.Columns {
		dt, err := DuckType(c.ParquetType)
		if err != nil {
			return nil, fmt.Errorf("table %s column %q: %w", mt.ID(), c.Name, err)
		}
		p.types = append(p.types, dt)
	}
	return p, nil
}

// group is the SELECT of files written with schema version v.
func (p *projector) group(in Input, v int, files []manifest.File, base bool) (string, error) {
	sv := p.mt.SchemaAt(v)
	if sv == nil {
		return "", fmt.Errorf("table %s: a file was written with schema version %d, which the manifest does not hold", p.mt.ID(), v)
	}
	paths := make([]string, len(files))
	for i, f := range files {
		path, err := in.Path(f.Path)
		if err != nil {
			return "", fmt.Errorf("table %s: %w", p.mt.ID(), err)
		}
		paths[i] = Literal(path)
	}
	cols, renames, err := p.columns(sv)
	if err != nil {
		return "", err
	}
	unchanged := parquetfile.ColUnchanged
	if len(renames) > 0 {
		// __unchanged names columns as the file's version called them.
		var cases []string
		for old, now := range renames {
			cases = append(cases, fmt.Sprintf("WHEN %s THEN %s", Literal(old), Literal(now)))
		}
		slices.Sort(cases)
		unchanged = fmt.Sprintf("list_transform(__unchanged, lambda x: CASE x %s ELSE x END) AS __unchanged", strings.Join(cases, " "))
	}
	meta := []string{"__op", "__lsn", "__seq", "__xid", "__op_ts", unchanged, fmt.Sprintf("%t AS __base", base)}
	return fmt.Sprintf("SELECT %s FROM read_parquet([%s])%s", strings.Join(append(cols, meta...), ", "), strings.Join(paths, ", "), boundWhere(in.Bound)), nil
}

// columns are the newest columns as files of version sv read them, and
// the renames (old name → newest name) between them.
func (p *projector) columns(sv *manifest.SchemaVersion) ([]string, map[string]string, error) {
	renames := map[string]string{}
	out := make([]string, len(p.newest.Columns))
	for i, c := range p.newest.Columns {
		fc := sameColumn(sv, c)
		switch {
		case fc == nil:
			lit, err := p.missing(i)
			if err != nil {
				return nil, nil, err
			}
			out[i] = lit + " AS " + Ident(c.Name)
		case fc.ParquetType != c.ParquetType:
			out[i] = fmt.Sprintf("CAST(%s AS %s) AS %s", Ident(fc.Name), p.types[i], Ident(c.Name))
		default:
			out[i] = Ident(fc.Name) + " AS " + Ident(c.Name)
		}
		if fc != nil && fc.Name != c.Name {
			renames[fc.Name] = c.Name
		}
	}
	return out, renames, nil
}

// sameColumn is the column of sv that is c: the same field id (whatever
// its name: a rename), or without field ids (an older manifest) the same
// name. Nil: the version lacks it.
func sameColumn(sv *manifest.SchemaVersion, c manifest.Column) *manifest.Column {
	for i := range sv.Columns {
		fc := &sv.Columns[i]
		if (c.FieldID != 0 && fc.FieldID == c.FieldID) || (c.FieldID == 0 && fc.FieldID == 0 && fc.Name == c.Name) {
			return fc
		}
	}
	return nil
}

// missing is the literal of newest column i's missing value: what rows
// written before it existed read.
func (p *projector) missing(i int) (string, error) {
	c := p.newest.Columns[i]
	vals, err := p.schema.ColumnValues(i, c.MissingValue)
	if err != nil {
		return "", fmt.Errorf("table %s column %q: missing value: %w", p.mt.ID(), c.Name, err)
	}
	lit, err := literalOf(c.ParquetType, vals)
	if err != nil {
		return "", fmt.Errorf("table %s column %q: missing value: %w", p.mt.ID(), c.Name, err)
	}
	return fmt.Sprintf("CAST(%s AS %s)", lit, p.types[i]), nil
}
