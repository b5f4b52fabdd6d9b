package mcpserver

import (
	"cmp"
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
		return fmt.Errorf("%w. The sandbox allows exactly one statement, a SELECT (or WITH … SELECT), over the views \"schema\".\"table\" (current state) and changes.\"schema\".\"table\" (change rows); no DDL, DML, COPY, ATTACH, PRAGMA, SET, EXPLAIN, extensions or files outside the data", err)
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
		return "", nil, fmt.Errorf("table %q is not captured at version %d%s; list_tables lists the tables", name, m.Version, closest(name, slices.Collect(maps.Keys(m.Tables))))
	}
	return "", nil, fmt.Errorf("table %q is ambiguous: %s have it; name it with its schema", name, strings.Join(found, ", "))
}

// closest is "; did you mean a, b or c?" for up to three of keys close to
// name (by edit distance, ignoring case, to the key or its table part), or
// "".
func closest(name string, keys []string) string {
	type candidate struct {
		key  string
		dist int
	}
	var cs []candidate
	low := strings.ToLower(name)
	for _, key := range keys {
		k := strings.ToLower(key)
		d := distance(low, k)
		if _, table, ok := strings.Cut(k, "."); ok {
			d = min(d, distance(low, table))
		}
		if d <= max(2, len(name)/2) {
			cs = append(cs, candidate{key, d})
		}
	}
	if len(cs) == 0 {
		return ""
	}
	slices.SortFunc(cs, func(a, b candidate) int { return cmp.Or(cmp.Compare(a.dist, b.dist), cmp.Compare(a.key, b.key)) })
	var names []string
	for _, c := range cs[:min(3, len(cs))] {
		names = append(names, c.key)
	}
	if len(names) == 1 {
		return "; did you mean " + names[0] + "?"
	}
	return "; did you mean " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1] + "?"
}

// distance is the Levenshtein distance of a and b, by runes.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
