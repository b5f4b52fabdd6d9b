package sinktest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/parquetfile"
)

// oidJSON is json's type OID.
const oidJSON = 114

// isTextOID reports the string types (text, varchar, bpchar, name) that pgx
// already returns as their exact text; a cast to text would strip bpchar's
// padding, which the sink keeps.
func isTextOID(oid uint32) bool {
	switch oid {
	case 25, 1043, 1042, 19:
		return true
	}
	return false
}

// SourceRows reads table ("schema.name") from PostgreSQL at url with pgx:
// SELECT cols ORDER BY orderBy, in the shape MergedRows returns. A column
// that the sink stores as its text form (unconstrained numeric, time,
// interval, arrays, enums, ...) is selected as ::text, which is exactly what
// the sink holds; the others come back as pgx's Go values. Order columns
// sort by byte order (COLLATE "C", as DuckDB does), text-stored ones by
// their text; json, which has no order, by its text too.
//
// table is the manifest's key "schema.name"; either part may itself hold
// dots, so it is resolved against the catalog and must name one table.
func SourceRows(tb testing.TB, url, table string, cols []string, orderBy []string) [][]any {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		tb.Fatalf("source rows: parse connection string: %v", err)
	}
	// The settings pg-cdc's source adapter reads under, so that text forms
	// read here are the ones the sink stored.
	for k, v := range map[string]string{
		"DateStyle":          "ISO, YMD",
		"TimeZone":           "UTC",
		"extra_float_digits": "3",
		"bytea_output":       "hex",
		"IntervalStyle":      "postgres",
	} {
		cfg.RuntimeParams[k] = v
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("source rows: connect: %v", err)
	}
	defer conn.Close(context.Background())

	id := resolveTable(ctx, tb, conn, table)
	rel := pgx.Identifier{id.Schema, id.Name}.Sanitize()
	types := columnTypes(ctx, tb, conn, rel, table)
	// The rows pg-cdc captures under the table: an ordinary table's own,
	// not its inheritance children's (each is published under the child);
	// a partitioned table's partitions' (published under the root).
	var partitioned bool
	if err := conn.QueryRow(ctx, `SELECT relkind = 'p' FROM pg_class WHERE oid = $1::regclass`, rel).Scan(&partitioned); err != nil {
		tb.Fatalf("source rows: kind of %s: %v", table, err)
	}
	from := rel
	if !partitioned {
		from = "ONLY " + rel
	}

	q, err := sourceQuery(id, from, cols, orderBy, types)
	if err != nil {
		tb.Fatalf("source rows: %v", err)
	}
	rows, err := conn.Query(ctx, q)
	if err != nil {
		tb.Fatalf("source rows: %s: %v", q, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			tb.Fatalf("source rows: %s: %v", q, err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("source rows: %s: %v", q, err)
	}
	return out
}

// sourceQuery builds SourceRows' SELECT of the table id from from (its
// FROM item) and the table's column types.
func sourceQuery(id cdc.TableID, from string, cols, orderBy []string, types map[string]columnType) (string, error) {
	probe := &cdc.Table{ID: id}
	for _, c := range cols {
		t, ok := types[c]
		if !ok {
			return "", fmt.Errorf("table %s has no column %q", id, c)
		}
		probe.Columns = append(probe.Columns, cdc.Column{Name: c, TypeOID: t.oid, TypeMod: t.typmod})
	}
	schema, err := parquetfile.NewSchema(probe)
	if err != nil {
		return "", err
	}
	// A column the sink stores as text is read as text; the order by it is
	// then by its text, as DuckDB orders the sink's VARCHAR.
	asText := map[string]bool{}
	sel := make([]string, len(cols))
	for i, c := range cols {
		sel[i] = ident(c)
		if schema.ParquetType(i) == "STRING" && !isTextOID(types[c].oid) {
			asText[c] = true
			sel[i] += "::text"
		}
	}
	order := make([]string, len(orderBy))
	for i, c := range orderBy {
		t, ok := types[c]
		if !ok {
			return "", fmt.Errorf("table %s has no column %q to order by", id, c)
		}
		switch {
		case asText[c] || t.oid == oidJSON:
			// json has no ordering operator at all.
			order[i] = ident(c) + `::text COLLATE "C"`
		case t.collatable:
			order[i] = ident(c) + ` COLLATE "C"`
		default:
			order[i] = ident(c)
		}
	}
	q := "SELECT " + strings.Join(sel, ", ") + " FROM " + from
	if len(order) > 0 {
		q += " ORDER BY " + strings.Join(order, ", ")
	}
	return q, nil
}

type columnType struct {
	oid        uint32
	typmod     int32
	collatable bool
}

// columnTypes reads the live columns' types from the catalog.
func columnTypes(ctx context.Context, tb testing.TB, conn *pgx.Conn, rel, table string) map[string]columnType {
	tb.Helper()
	rows, err := conn.Query(ctx, `SELECT attname, atttypid, atttypmod, attcollation <> 0
		FROM pg_attribute WHERE attrelid = $1::text::regclass AND attnum > 0 AND NOT attisdropped`, rel)
	if err != nil {
		tb.Fatalf("source rows: columns of %s: %v", table, err)
	}
	defer rows.Close()
	out := map[string]columnType{}
	for rows.Next() {
		var name string
		var t columnType
		if err := rows.Scan(&name, &t.oid, &t.typmod, &t.collatable); err != nil {
			tb.Fatalf("source rows: columns of %s: %v", table, err)
		}
		out[name] = t
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("source rows: columns of %s: %v", table, err)
	}
	return out
}

// resolveTable finds the one table whose "schema.name" is table.
func resolveTable(ctx context.Context, tb testing.TB, conn *pgx.Conn, table string) cdc.TableID {
	tb.Helper()
	rows, err := conn.Query(ctx, `SELECT n.nspname::text, c.relname::text
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND n.nspname || '.' || c.relname = $1`, table)
	if err != nil {
		tb.Fatalf("source rows: find table %s: %v", table, err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (cdc.TableID, error) {
		var id cdc.TableID
		return id, r.Scan(&id.Schema, &id.Name)
	})
	if err != nil {
		tb.Fatalf("source rows: find table %s: %v", table, err)
	}
	if len(ids) != 1 {
		tb.Fatalf("source rows: %d tables are named %q: %v", len(ids), table, ids)
	}
	return ids[0]
}
