package sinktest

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" driver
)

// openSandboxed opens an in-memory DuckDB that may read files under root and
// nothing else. The order of the settings matters (NOTES-deps §3):
// allowed_directories can only be set while external access is still on,
// and lock_configuration makes all of it permanent for this database.
// Extensions are never installed or loaded on demand: parquet and json are
// linked into the driver.
func openSandboxed(tb testing.TB, root string) *sql.DB {
	tb.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		tb.Fatalf("sink root %s: %v", root, err)
	}
	db, err := sql.Open("duckdb", "?autoinstall_known_extensions=false&autoload_known_extensions=false")
	if err != nil {
		tb.Fatalf("open duckdb: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	for _, stmt := range []string{
		// Spills go to the test's temp dir, not to DuckDB's default .tmp/
		// under the working directory (the package's source tree).
		"SET temp_directory = " + literal(tb.TempDir()),
		"SET TimeZone = 'UTC'",
		// The trailing slash keeps a sibling such as <root>-evil/ out.
		"SET allowed_directories = [" + literal(strings.TrimSuffix(abs, "/")+"/") + "]",
		"SET enable_external_access = false",
		"SET lock_configuration = true",
	} {
		if _, err := db.Exec(stmt); err != nil {
			tb.Fatalf("duckdb %s: %v", stmt, err)
		}
	}
	return db
}

// literal quotes s as a SQL string literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// ident quotes s as a SQL identifier (DuckDB and PostgreSQL agree).
func ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
