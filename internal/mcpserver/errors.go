package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

// callError words a read path error for the caller: what was wrong and
// how to fix the call. The original stays in the chain.
func callError(err error) error {
	if err == nil {
		return nil
	}
	var refused *readpath.RefusedError
	var limit *readpath.LimitError
	switch {
	case errors.As(err, &refused):
		return fmt.Errorf("%w. The sandbox allows exactly one statement, a SELECT (or WITH … SELECT), over the views \"schema\".\"table\" (current state) and changes.\"schema\".\"table\" (change rows); with ordinary functions; no DDL, DML, COPY, ATTACH, PRAGMA, SET, EXPLAIN, extensions, files (read_parquet, globs, 'file' as a table) or catalog and settings functions (duckdb_*, current_setting)", err)
	case errors.Is(err, readpath.ErrInvalid):
		return fmt.Errorf("%w. Fix the SQL (DuckDB's dialect); list_tables names the views and describe_table their columns", err)
	case errors.As(err, &limit), errors.Is(err, readpath.ErrLimit):
		return fmt.Errorf("%w. Ask for less: filter or aggregate in SQL, select fewer columns, or add a LIMIT", err)
	case errors.Is(err, manifest.ErrOutsideRetention):
		return fmt.Errorf("%w. Ask for a point inside that window (get_manifest shows it)", err)
	case errors.Is(err, readpath.ErrPoint):
		return fmt.Errorf("%w. as_of takes a manifest version N, epoch:N, lsn:X/Y, an RFC 3339 time, main, staging, raw@<RFC 3339 time> or nothing (the newest version)", err)
	case errors.Is(err, readpath.ErrCollected):
		return fmt.Errorf("%w (the call can simply be repeated)", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("the call was cancelled or timed out: %w", err)
	}
	return fmt.Errorf("read path error (not the call's fault; try again later): %w", err)
}

// lookupTable finds a table of m by "schema.table", or by its bare name
// when one schema has it. The error names the closest tables.
func lookupTable(m *manifest.Manifest, name string) (string, *manifest.Table, error) {
	if name == "" {
		return "", nil, fmt.Errorf("table is required: give it as schema.table (list_tables lists them)")
	}
	if mt, ok := m.Tables[name]; ok {
		return name, mt, nil
	}
	var found []string
	for key, mt := range m.Tables {
		if mt.Name == name {
			found = append(found, key)
		}
	}
	slices.Sort(found)
	switch len(found) {
	case 1:
		return found[0], m.Tables[found[0]], nil
	case 0:
		return "", nil, fmt.Errorf("table %q is not captured at version %d%s; list_tables lists the tables", name, m.Version, readpath.DidYouMean(readpath.Closest(name, slices.Sorted(maps.Keys(m.Tables)))))
	}
	return "", nil, fmt.Errorf("table %q is ambiguous: %s have it; name it with its schema", name, strings.Join(found, ", "))
}
