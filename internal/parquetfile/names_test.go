package parquetfile

import (
	"slices"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestMetadataColumnNames keeps cdc.MetadataColumns, which init checks
// source columns against, equal to the columns the files hold.
func TestMetadataColumnNames(t *testing.T) {
	s, err := NewSchema(&cdc.Table{ID: cdc.TableID{Schema: "s", Name: "t"}, Columns: []cdc.Column{{Name: "id", TypeOID: oidInt4}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range s.schema.Fields()[:firstDataLeaf] {
		got = append(got, f.Name())
	}
	if !slices.Equal(got, cdc.MetadataColumns) {
		t.Errorf("file metadata columns %q, cdc.MetadataColumns %q", got, cdc.MetadataColumns)
	}
}

// TestOddColumnNames: any PostgreSQL column name other than a metadata
// column's is a Parquet column name as it is.
func TestOddColumnNames(t *testing.T) {
	names := []string{"Mixed Case", "a.b", `we"ird`, `back\slash`, "a/b", "..", "😀", "列", "__other", "_lsn", strings.Repeat("x", 63)}
	tbl := &cdc.Table{ID: cdc.TableID{Schema: "s", Name: "t"}}
	for i, n := range names {
		tbl.Columns = append(tbl.Columns, cdc.Column{Name: n, TypeOID: oidText, FieldID: i + 1})
	}
	s, err := NewSchema(tbl)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range s.schema.Fields()[firstDataLeaf:] {
		if f.Name() != names[i] {
			t.Errorf("column %d is %q, want %q", i, f.Name(), names[i])
		}
	}
	for _, meta := range cdc.MetadataColumns {
		bad := &cdc.Table{ID: tbl.ID, Columns: []cdc.Column{{Name: meta, TypeOID: oidText}}}
		if _, err := NewSchema(bad); err == nil {
			t.Errorf("NewSchema accepted a column named %s", meta)
		}
	}
}
