//go:build !nodb

package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// dsn opens an in-memory database with the options DuckDB takes at start:
// extensions are never installed or loaded on demand (parquet, json, icu
// and core_functions are linked into the driver), community and unsigned
// extensions are refused, and secrets are never read from or written to
// ~/.duckdb. Being in the DSN, these hold before the first statement runs.
// allowed_directories cannot go here (DuckDB: "could not set invalid or
// local option for global database config"), nor enable_external_access,
// which must come after it.
const dsn = "?autoinstall_known_extensions=false&autoload_known_extensions=false" +
	"&allow_community_extensions=false&allow_unsigned_extensions=false&allow_persistent_secrets=false"

// sandboxStatements lock the database down, in the one order DuckDB v2.0
// accepts. They run once per database, on its first connection; the
// settings are database-global, so every pooled connection sees them.
//
//  1. temp_directory first: after enable_external_access=false DuckDB
//     refuses it ("Modifying the temp_directory has been disabled by
//     configuration"). The default would be ./.tmp under the working
//     directory.
//  2. allowed_directories before enable_external_access=false: after it,
//     "Cannot change allowed_directories when enable_external_access is
//     disabled". Every entry ends in "/", so a sibling sharing the prefix
//     (<dir>-evil/) stays out. DuckDB appends the temp_directory itself.
//  3. The limits (memory, spill, threads) and the time zone: any time
//     before the lock.
//  4. enable_external_access=false: from here on files outside the allowed
//     directories, URLs, extension loading and getenv() are gone.
//  5. lock_configuration=true last: after it no SET or RESET succeeds, so
//     nothing a request does can undo 1–4.
func sandboxStatements(spill string, data []string, l Limits) []string {
	dirs := make([]string, len(data))
	for i, d := range data {
		dirs[i] = literal(dirEntry(d))
	}
	return []string{
		"SET temp_directory = " + literal(spill),
		"SET allowed_directories = [" + strings.Join(dirs, ", ") + "]",
		"SET max_temp_directory_size = '" + strconv.FormatInt(l.SpillBytes, 10) + "B'",
		"SET memory_limit = '" + strconv.FormatInt(l.MemoryBytes, 10) + "B'",
		"SET threads = " + strconv.Itoa(l.Threads),
		// Timestamps render in UTC whatever the host's zone (icu is linked).
		// GLOBAL: TimeZone is a session setting, and a plain SET holds for
		// the connection that ran it only (the read-back on a second
		// connection caught it: "Etc/UTC", the host's).
		"SET GLOBAL TimeZone = 'UTC'",
		"SET enable_external_access = false",
		"SET lock_configuration = true",
	}
}

// applySandbox runs the statements on c. skip is for tests that prove the
// read-back catches a missing setting; it is nil in Open.
func applySandbox(ctx context.Context, c *sql.Conn, stmts []string, skip func(string) bool) error {
	for _, s := range stmts {
		if skip != nil && skip(s) {
			continue
		}
		if _, err := c.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("sandbox: %s: %w", s, err)
		}
	}
	return nil
}

// verifySandbox reads every setting back on c (a connection other than the
// one that set them: the settings must hold for new connections) and fails
// naming the first that is not in force.
func verifySandbox(ctx context.Context, c *sql.Conn, spill string, data []string, l Limits) error {
	got := map[string]string{}
	rows, err := c.QueryContext(ctx, "SELECT name, value FROM duckdb_settings()")
	if err != nil {
		return fmt.Errorf("sandbox: read settings: %w", err)
	}
	for rows.Next() {
		var name string
		var value sql.NullString
		if err := rows.Scan(&name, &value); err != nil {
			rows.Close()
			return fmt.Errorf("sandbox: read settings: %w", err)
		}
		got[name] = value.String
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("sandbox: read settings: %w", err)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sandbox: read settings: %w", err)
	}
	var memory, spillCap string
	if err := c.QueryRowContext(ctx, "SELECT format_bytes(?::BIGINT), format_bytes(?::BIGINT)", l.MemoryBytes, l.SpillBytes).Scan(&memory, &spillCap); err != nil {
		return fmt.Errorf("sandbox: format limits: %w", err)
	}
	want := []struct{ name, value string }{
		{"enable_external_access", "false"},
		{"lock_configuration", "true"},
		{"autoinstall_known_extensions", "false"},
		{"autoload_known_extensions", "false"},
		{"allow_community_extensions", "false"},
		{"allow_unsigned_extensions", "false"},
		{"allow_persistent_secrets", "false"},
		{"temp_directory", spill},
		{"allowed_paths", "[]"},
		{"memory_limit", memory},
		{"max_temp_directory_size", spillCap},
		{"threads", strconv.Itoa(l.Threads)},
		{"TimeZone", "UTC"},
	}
	for _, w := range want {
		v, ok := got[w.name]
		if !ok {
			v = "(no such setting)"
		}
		if v != w.value {
			return &SandboxError{Setting: w.name, Got: v, Want: w.value}
		}
	}
	// The list exactly: the data directories and the temp directory DuckDB
	// adds, nothing more (read as a list, not as its display string, so a
	// comma in a path cannot fool the comparison).
	var allowed []string
	dr, err := c.QueryContext(ctx, "SELECT unnest(current_setting('allowed_directories'))::VARCHAR")
	if err != nil {
		return fmt.Errorf("sandbox: read allowed_directories: %w", err)
	}
	for dr.Next() {
		var d string
		if err := dr.Scan(&d); err != nil {
			dr.Close()
			return fmt.Errorf("sandbox: read allowed_directories: %w", err)
		}
		allowed = append(allowed, d)
	}
	if err := dr.Close(); err != nil {
		return fmt.Errorf("sandbox: read allowed_directories: %w", err)
	}
	if err := dr.Err(); err != nil {
		return fmt.Errorf("sandbox: read allowed_directories: %w", err)
	}
	wantDirs := []string{dirEntry(spill)}
	for _, d := range data {
		wantDirs = append(wantDirs, dirEntry(d))
	}
	slices.Sort(allowed)
	slices.Sort(wantDirs)
	wantDirs = slices.Compact(wantDirs)
	if !slices.Equal(allowed, wantDirs) {
		return &SandboxError{Setting: "allowed_directories", Got: strings.Join(allowed, ", "), Want: strings.Join(wantDirs, ", ")}
	}
	return nil
}

// checkCanaries proves on c that this DuckDB refuses what the settings say
// it refuses, with files the engine made for the purpose in its own
// directory: a file outside every allowed directory, and, inside the spill
// directory (allowed), a symlink to that file and a symlink to its
// directory. DuckDB v2.0 resolves symlinks before it checks a path against
// allowed_directories, so both links are refused; a DuckDB that followed
// them would let any symlink in a data dir read the whole file system, and
// Open refuses to serve on it rather than trust a data dir to hold none.
func checkCanaries(ctx context.Context, c *sql.Conn, engineDir, spill string) error {
	outsideDir := filepath.Join(engineDir, "canary")
	if err := os.Mkdir(outsideDir, 0o700); err != nil {
		return fmt.Errorf("sandbox canary: %w", err)
	}
	outside := filepath.Join(outsideDir, "outside.txt")
	if err := os.WriteFile(outside, []byte("canary"), 0o600); err != nil {
		return fmt.Errorf("sandbox canary: %w", err)
	}
	fileLink := filepath.Join(spill, "canary-file")
	dirLink := filepath.Join(spill, "canary-dir")
	if err := os.Symlink(outside, fileLink); err != nil {
		return fmt.Errorf("sandbox canary: %w", err)
	}
	if err := os.Symlink(outsideDir, dirLink); err != nil {
		return fmt.Errorf("sandbox canary: %w", err)
	}
	defer func() {
		os.Remove(fileLink)
		os.Remove(dirLink)
		os.RemoveAll(outsideDir)
	}()
	for _, probe := range []struct{ what, path string }{
		{"a file outside the allowed directories", outside},
		{"a symlink to a file outside", fileLink},
		{"a symlink to a directory outside", filepath.Join(dirLink, "outside.txt")},
	} {
		var content string
		err := c.QueryRowContext(ctx, "SELECT content FROM read_text("+literal(probe.path)+")").Scan(&content)
		var de *duckdb.Error
		if errors.As(err, &de) && de.Type == duckdb.ErrorTypePermission {
			continue
		}
		if err == nil {
			return &SandboxError{Setting: "canary: " + probe.what, Got: "read " + probe.path, Want: "Permission Error"}
		}
		return fmt.Errorf("sandbox canary: %s: %w", probe.what, err)
	}
	return nil
}

// dirEntry is d as an allowed_directories entry: with a trailing slash.
func dirEntry(d string) string { return strings.TrimSuffix(d, "/") + "/" }

// literal quotes s as a SQL string literal.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
