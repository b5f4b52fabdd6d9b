package e2e

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
)

// duck runs a query in an in-memory DuckDB, the independent reader of the
// files pg-cdc wrote, and returns every row.
func duck(t *testing.T, query string) [][]any {
	t.Helper()
	db, err := sql.Open("duckdb", "?autoinstall_known_extensions=false&autoload_known_extensions=false")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatalf("duckdb %s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// deltaFiles lists a table's delta files in manifest m as a DuckDB list
// literal, or "" when there are none.
func deltaFiles(root string, m *manifest.Manifest, table string) string {
	var files []string
	for _, d := range m.Tables[table].Deltas {
		for _, f := range d.Files {
			files = append(files, fmt.Sprintf("'%s'", filepath.Join(root, f.Path)))
		}
	}
	if len(files) == 0 {
		return ""
	}
	return "[" + strings.Join(files, ", ") + "]"
}

func asInt(t *testing.T, v any) int64 {
	t.Helper()
	switch v := v.(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case uint64:
		return int64(v)
	case int:
		return int64(v)
	}
	t.Fatalf("not an integer: %T %v", v, v)
	return 0
}
