package generation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/pg-cdc/pg-cdc/internal/blob"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
	"github.com/pg-cdc/pg-cdc/internal/render"
)

// Source is what Validate reads from the source database: the table's row
// count and the rows of some keys, in the exported snapshot the new
// generation was copied under (postgres.DB.SampleSnapshot).
type Source interface {
	// rewritten: the table's storage was replaced (TRUNCATE, a rewriting
	// ALTER TABLE) since the snapshot, so the source can no longer say
	// what the snapshot held (postgres.DB.SampleSnapshot).
	SampleSnapshot(ctx context.Context, snapshot string, t *cdc.Table, keys [][]cdc.Datum) (rows int64, found [][]cdc.Datum, rewritten bool, err error)
}

// Check is what Validate compared for one table.
type Check struct {
	Rows    int64 // rows in the source's snapshot, in the files, and in the base
	Files   int
	Sampled int // rows compared value by value
	// Rewritten: the source could not be compared, because the table was
	// truncated or rewritten after the snapshot (the files were still
	// read back and counted). The stream from the consistent point
	// carries that change, so the merged state is right once start has
	// passed it.
	Rewritten bool
}

// Validate checks the base files a snapshot of t wrote (base) before a
// generation switch makes them visible:
//
//   - every file is read back from the sink, and its row count (from its
//     Parquet footer) is the one the base lists;
//   - the files' rows add up to the base's row count, and that is the row
//     count of the table in the snapshot, counted by the source itself
//     (not by the copy that wrote the files);
//   - up to samples rows, spread evenly over the files, are compared value
//     by value with the same keys read from the source in the snapshot.
//     Each source value goes through the column's Parquet conversion (so a
//     documented type rule applies to both sides alike), and both sides are
//     compared in PostgreSQL's text form. Tables without a primary key are
//     only counted.
//
// When the source reports the table rewritten since the snapshot, only the
// first check is made (Check.Rewritten). A mismatch is an error matching
// cdc.ErrDifferences that names the table, the file or the key, and the
// column. scratch is a local directory for the downloads, which are
// removed.
func Validate(ctx context.Context, src Source, store blob.Store, t *cdc.Table, base *manifest.Base, snapshot string, samples int, scratch string) (Check, error) {
	check := Check{Files: len(base.Files)}
	schema, err := parquetfile.NewSchema(t)
	if err != nil {
		return check, fmt.Errorf("validate %s: %w", t.ID, err)
	}
	rt, err := render.NewTable(schema.ManifestColumns(t))
	if err != nil {
		return check, fmt.Errorf("validate %s: %w", t.ID, err)
	}
	keyCols := make([]int, len(t.PrimaryKey))
	for i, k := range t.PrimaryKey {
		if keyCols[i] = t.ColumnIndex(k); keyCols[i] < 0 {
			return check, fmt.Errorf("validate %s: key column %q is not a column", t.ID, k)
		}
	}
	if len(keyCols) == 0 {
		samples = 0
	}

	var listed int64
	for _, f := range base.Files {
		listed += f.Rows
	}
	if listed != base.RowCount {
		return check, differ(t, "its files list %d rows in all, its base %d", listed, base.RowCount)
	}
	// Rows at these positions (over all files, in order) are sampled.
	var want []int64
	for i := 0; i < samples && int64(i) < base.RowCount; i++ {
		want = append(want, int64(i)*base.RowCount/int64(min(int64(samples), base.RowCount)))
	}
	var sink [][]string // sampled rows, every column as text ("\x00NULL" for NULL)
	var offset int64
	for _, f := range base.Files {
		rows, err := readBack(ctx, store, f, rt, offset, want, scratch)
		if err != nil {
			return check, fmt.Errorf("validate %s: %w", t.ID, err)
		}
		sink = append(sink, rows...)
		offset += f.Rows
	}

	// A key a documented type rule made NULL in the files (numeric NaN in
	// a DECIMAL key) cannot be looked up: that row is not sampled.
	sink = slices.DeleteFunc(sink, func(row []string) bool {
		return slices.ContainsFunc(keyCols, func(c int) bool { return row[c] == null })
	})
	keys := make([][]cdc.Datum, len(sink))
	for i, row := range sink {
		for _, c := range keyCols {
			keys[i] = append(keys[i], cdc.Datum{Kind: cdc.DatumText, Text: []byte(row[c])})
		}
	}
	count, found, rewritten, err := src.SampleSnapshot(ctx, snapshot, t, keys)
	if err != nil {
		return check, fmt.Errorf("validate %s: %w", t.ID, err)
	}
	if rewritten {
		check.Rows, check.Rewritten = base.RowCount, true
		return check, nil
	}
	check.Rows = count
	if count != base.RowCount {
		return check, differ(t, "the source holds %d rows in the snapshot, the new files %d", count, base.RowCount)
	}
	for i, row := range sink {
		if found[i] == nil {
			return check, differ(t, "key %s of the new files is not in the source's snapshot", keyText(t, row, keyCols))
		}
		for c := range t.Columns {
			var text *string
			if found[i][c].Kind == cdc.DatumText {
				s := string(found[i][c].Text)
				text = &s
			}
			vals, err := schema.ColumnValues(c, text)
			if err != nil {
				return check, fmt.Errorf("validate %s: key %s: %w", t.ID, keyText(t, row, keyCols), err)
			}
			got, err := asText(rt, c, vals)
			if err != nil {
				return check, fmt.Errorf("validate %s: key %s: %w", t.ID, keyText(t, row, keyCols), err)
			}
			if got != row[c] {
				return check, differ(t, "key %s, column %q: the new files hold %s, the source %s",
					keyText(t, row, keyCols), t.Columns[c].Name, shown(row[c]), shown(got))
			}
		}
		check.Sampled++
	}
	return check, nil
}

// null stands for NULL among texts: PostgreSQL text never holds a NUL byte.
const null = "\x00NULL"

func asText(rt *render.Table, col int, vals []parquet.Value) (string, error) {
	s, isNull, err := rt.Text(col, vals)
	if isNull {
		return null, err
	}
	return s, err
}

func shown(s string) string {
	if s == null {
		return "NULL"
	}
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func keyText(t *cdc.Table, row []string, keyCols []int) string {
	var b bytes.Buffer
	b.WriteByte('(')
	for i, c := range keyCols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", t.Columns[c].Name, shown(row[c]))
	}
	b.WriteByte(')')
	return b.String()
}

func differ(t *cdc.Table, format string, args ...any) error {
	return &cdc.Error{Class: cdc.ErrDifferences,
		Msg:  fmt.Sprintf("the new generation of table %s does not match the source: ", t.ID) + fmt.Sprintf(format, args...),
		Hint: "nothing was switched: readers still see the current generation; run the command again, and if it fails the same way, keep the log and report it"}
}

// readBack downloads f, checks its footer's row count, and returns the rows
// at the positions of want that fall in it (offset is the position of its
// first row), each column rendered as text.
func readBack(ctx context.Context, store blob.Store, f manifest.File, rt *render.Table, offset int64, want []int64, scratch string) ([][]string, error) {
	local, err := download(ctx, store, f.Path, scratch)
	if err != nil {
		return nil, err
	}
	defer os.Remove(local)
	fh, err := os.Open(local)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", f.Path, err)
	}
	if pf.NumRows() != f.Rows {
		return nil, &cdc.Error{Class: cdc.ErrDifferences,
			Msg: fmt.Sprintf("file %s holds %d rows, the manifest entry says %d", f.Path, pf.NumRows(), f.Rows)}
	}
	r := parquet.NewReader(pf)
	defer r.Close()
	var out [][]string
	buf := make([]parquet.Row, 1)
	var split [][]parquet.Value
	for _, pos := range want {
		if pos < offset || pos >= offset+f.Rows {
			continue
		}
		if err := r.SeekToRow(pos - offset); err != nil {
			return nil, fmt.Errorf("file %s: seek to row %d: %w", f.Path, pos-offset, err)
		}
		n, err := r.ReadRows(buf)
		if n == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("file %s: read row %d: %w", f.Path, pos-offset, err)
		}
		if split, err = rt.Split(buf[0], split); err != nil {
			return nil, fmt.Errorf("file %s: row %d: %w", f.Path, pos-offset, err)
		}
		row := make([]string, len(split))
		for c, vals := range split {
			if row[c], err = asText(rt, c, vals); err != nil {
				return nil, fmt.Errorf("file %s: row %d: %w", f.Path, pos-offset, err)
			}
		}
		out = append(out, row)
	}
	return out, nil
}

func download(ctx context.Context, store blob.Store, key, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	local, err := blob.Download(ctx, store, key, dir, "validate-*.parquet")
	if err != nil {
		return "", fmt.Errorf("read back: %w", err)
	}
	return local, nil
}
