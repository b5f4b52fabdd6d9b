package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/mergesql"
	"github.com/pg-cdc/pg-cdc/internal/readpath"
)

const asOfHelp = "the point to read: a manifest version N, epoch:N, lsn:X/Y, an RFC 3339 time, main, staging or raw@<RFC 3339 time>; empty for the newest version"

// AtOutput is the point a result was read at.
type AtOutput struct {
	Version uint64 `json:"version" jsonschema:"the manifest version read"`
	Epoch   uint64 `json:"epoch" jsonschema:"that version's epoch"`
	EndLSN  string `json:"end_lsn" jsonschema:"that version's end LSN"`
	// Point reads exactly this again, however the sink moves on.
	Point string `json:"point" jsonschema:"a point that reads exactly this again (pass it as as_of): the version number, or the lsn or time asked for inside a version"`
}

func atOutput(at readpath.At) AtOutput {
	out := AtOutput{Version: at.Version(), Epoch: at.Manifest.Epoch, EndLSN: at.Manifest.EndLSN.String(), Point: pinned(at)}
	return out
}

// pinned is a point that resolves to at again: a bound's LSN or time
// (the history is immutable, so it resolves the same), else the version.
func pinned(at readpath.At) string {
	switch {
	case at.Bound.LSN != 0:
		return "lsn:" + at.Bound.LSN.String()
	case !at.Bound.Time.IsZero():
		return at.Bound.Time.UTC().Format(time.RFC3339Nano)
	}
	return strconv.FormatUint(at.Version(), 10)
}

// resolve resolves a point for a tool and records it for the audit.
func (s *Server) resolve(ctx context.Context, point string) (readpath.At, error) {
	access.RecordFrom(ctx).Point = point
	at, err := s.o.Reader.Resolve(ctx, point)
	if err != nil {
		return readpath.At{}, callError(err)
	}
	return at, nil
}

// freshAsOf: the sink at m holds every transaction the source committed up
// to this time (the manifest's fresh_as_of, which the flush and the idle
// advance record; for an older manifest its newest flush's commit time).
// Zero before any.
func freshAsOf(m *manifest.Manifest) time.Time { return m.Freshness() }

func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

type AsOfInput struct {
	AsOf string `json:"as_of,omitempty" jsonschema:"the point to read: a manifest version N, epoch:N, lsn:X/Y, an RFC 3339 time, main, staging or raw@<RFC 3339 time>; empty for the newest version"`
}

type TableInput struct {
	Table string `json:"table" jsonschema:"the table: schema.table, or its bare name when one schema has it"`
	AsOf  string `json:"as_of,omitempty" jsonschema:"the point to read: a manifest version N, epoch:N, lsn:X/Y, an RFC 3339 time, main, staging or raw@<RFC 3339 time>; empty for the newest version"`
}

// TableSummary is one table of list_tables.
type TableSummary struct {
	Name          string   `json:"name" jsonschema:"schema.table"`
	Schema        string   `json:"schema"`
	Table         string   `json:"table"`
	View          string   `json:"view" jsonschema:"the SQL name of its current state"`
	ChangesView   string   `json:"changes_view" jsonschema:"the SQL name of its change rows"`
	Rows          int64    `json:"rows" jsonschema:"live rows of its current state"`
	PrimaryKey    []string `json:"primary_key" jsonschema:"the primary key's columns; empty for a keyless table"`
	SchemaVersion int      `json:"schema_version"`
	Generation    string   `json:"generation"`
	Snapshot      string   `json:"snapshot" jsonschema:"pending, backfilling or complete: until complete the state holds part of the table"`
	FreshAsOf     string   `json:"fresh_as_of,omitempty" jsonschema:"the sink holds every transaction the source committed up to this time"`
}

type ListTablesOutput struct {
	At     AtOutput       `json:"at"`
	Tables []TableSummary `json:"tables"`
}

// ViewNamer is an optional capability of a Reader (changefeed.ViewNamer
// too): the name a table's views have in the engine when that is not its
// PostgreSQL schema and name — tables whose names differ only in case are
// read by aliases, as DuckDB matches names without regard to case.
type ViewNamer interface {
	ViewName(m *manifest.Manifest, table string) (schema, name string)
}

// views are the quoted names of a table's current state and change rows
// in the engine at a point. Without ViewNamer a table with a case twin
// (public."T" beside public.t) is looked up in the reader's table list,
// which names its alias; any other table is read by its PostgreSQL names.
func (s *Server) views(ctx context.Context, at readpath.At, key string) (string, string, error) {
	m := at.Manifest
	mt := m.Tables[key]
	schema, name := mt.Schema, mt.Name
	if n, ok := s.o.Reader.(ViewNamer); ok {
		schema, name = n.ViewName(m, key)
	} else if caseTwin(m, key) {
		ts, err := s.o.Reader.Tables(ctx, at)
		if err != nil {
			return "", "", callError(err)
		}
		for _, t := range ts {
			if t.Name == key && t.View != "" {
				return t.View, "changes." + t.View, nil
			}
		}
	}
	v := mergesql.Ident(schema) + "." + mergesql.Ident(name)
	return v, "changes." + v, nil
}

// caseTwin reports whether another table of m has key's schema and name
// but for case: one name to DuckDB.
func caseTwin(m *manifest.Manifest, key string) bool {
	mt := m.Tables[key]
	for k, o := range m.Tables {
		if k != key && strings.EqualFold(o.Schema, mt.Schema) && strings.EqualFold(o.Name, mt.Name) {
			return true
		}
	}
	return false
}

func (s *Server) listTables(ctx context.Context, in AsOfInput) (ListTablesOutput, error) {
	at, err := s.resolve(ctx, in.AsOf)
	if err != nil {
		return ListTablesOutput{}, err
	}
	ts, err := s.o.Reader.Tables(ctx, at)
	if err != nil {
		return ListTablesOutput{}, callError(err)
	}
	out := ListTablesOutput{At: atOutput(at), Tables: []TableSummary{}}
	for _, t := range ts {
		mt := at.Manifest.Tables[t.Name]
		if mt == nil {
			continue
		}
		v := mergesql.Ident(mt.Schema) + "." + mergesql.Ident(mt.Name)
		if t.View != "" {
			v = t.View // a case twin's alias
		}
		cv := "changes." + v
		out.Tables = append(out.Tables, TableSummary{Name: t.Name, Schema: mt.Schema, Table: mt.Name, View: v, ChangesView: cv, Rows: t.Rows,
			PrimaryKey: nonNil(mt.PrimaryKey), SchemaVersion: t.SchemaVersion, Generation: t.Generation, Snapshot: t.Snapshot, FreshAsOf: timeText(t.FreshAsOf)})
	}
	rec := access.RecordFrom(ctx)
	rec.Rows = int64(len(out.Tables))
	return out, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ColumnInfo is one column of a schema version.
type ColumnInfo struct {
	Name        string `json:"name"`
	PGType      string `json:"pg_type" jsonschema:"the PostgreSQL type"`
	ParquetType string `json:"parquet_type"`
	Nullable    bool   `json:"nullable"`
	FieldID     int    `json:"field_id" jsonschema:"the Parquet field id: stable across renames"`
	// MissingValue is what rows written before the column existed read.
	MissingValue string `json:"missing_value,omitempty" jsonschema:"what rows written before the column existed read (PostgreSQL text form); absent: NULL"`
}

// SchemaVersionInfo is one schema version of a table.
type SchemaVersionInfo struct {
	Version   int          `json:"version"`
	FromEpoch uint64       `json:"from_epoch" jsonschema:"the epoch it is in force from"`
	Columns   []ColumnInfo `json:"columns"`
	Changes   []string     `json:"changes" jsonschema:"what changed from the version before (empty for the first)"`
}

type DescribeTableOutput struct {
	At              AtOutput            `json:"at"`
	Name            string              `json:"name"`
	View            string              `json:"view"`
	ChangesView     string              `json:"changes_view"`
	ChangeColumns   []ResultColumn      `json:"change_columns" jsonschema:"the metadata columns the change rows carry besides the table's: __op (I, U, D, T), __lsn and __seq (the order), __xid, __op_ts (commit time), __unchanged (unchanged TOAST columns)"`
	PrimaryKey      []string            `json:"primary_key"`
	ReplicaIdentity string              `json:"replica_identity"`
	Generation      string              `json:"generation"`
	Snapshot        string              `json:"snapshot"`
	Rows            int64               `json:"rows" jsonschema:"live rows of the current state"`
	FreshAsOf       string              `json:"fresh_as_of,omitempty"`
	SchemaVersion   int                 `json:"schema_version" jsonschema:"the current schema version"`
	Columns         []ColumnInfo        `json:"columns" jsonschema:"the current schema version's columns"`
	SchemaVersions  []SchemaVersionInfo `json:"schema_versions"`
}

// changeColumns are the metadata columns of changes."schema"."table",
// after the table's own (mergesql's metadata).
var changeColumns = []ResultColumn{
	{Name: "__op", Type: "VARCHAR"},
	{Name: "__lsn", Type: "BIGINT"},
	{Name: "__seq", Type: "BIGINT"},
	{Name: "__xid", Type: "BIGINT"},
	{Name: "__op_ts", Type: "TIMESTAMP WITH TIME ZONE"},
	{Name: "__unchanged", Type: "VARCHAR[]"},
}

func columnInfos(cs []manifest.Column) []ColumnInfo {
	out := make([]ColumnInfo, 0, len(cs))
	for _, c := range cs {
		ci := ColumnInfo{Name: c.Name, PGType: c.PGType, ParquetType: c.ParquetType, Nullable: c.Nullable, FieldID: c.FieldID}
		if c.MissingValue != nil {
			ci.MissingValue = *c.MissingValue
		}
		out = append(out, ci)
	}
	return out
}

func schemaVersions(mt *manifest.Table) []SchemaVersionInfo {
	out := []SchemaVersionInfo{}
	var prev []manifest.Column
	for i, sv := range mt.Schemas {
		changes := []string{}
		if i > 0 {
			changes = schemaChanges(prev, sv.Columns)
		}
		out = append(out, SchemaVersionInfo{Version: sv.Version, FromEpoch: sv.FromEpoch, Columns: columnInfos(sv.Columns), Changes: changes})
		prev = sv.Columns
	}
	return out
}

// schemaChanges words what changed from one column list to the next, by
// field id (a rename keeps it).
func schemaChanges(from, to []manifest.Column) []string {
	old := map[int]manifest.Column{}
	for _, c := range from {
		old[c.FieldID] = c
	}
	seen := map[int]bool{}
	out := []string{}
	for _, c := range to {
		o, ok := old[c.FieldID]
		seen[c.FieldID] = true
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("column %s %s added", c.Name, c.PGType))
		default:
			if o.Name != c.Name {
				out = append(out, fmt.Sprintf("column %s renamed to %s", o.Name, c.Name))
			}
			if o.PGType != c.PGType {
				out = append(out, fmt.Sprintf("column %s: type %s → %s", c.Name, o.PGType, c.PGType))
			}
			if o.Nullable != c.Nullable {
				out = append(out, fmt.Sprintf("column %s: nullable %t → %t", c.Name, o.Nullable, c.Nullable))
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(old)) {
		if !seen[id] {
			out = append(out, fmt.Sprintf("column %s dropped", old[id].Name))
		}
	}
	return out
}

func (s *Server) describeTable(ctx context.Context, in TableInput) (DescribeTableOutput, error) {
	at, err := s.resolve(ctx, in.AsOf)
	if err != nil {
		return DescribeTableOutput{}, err
	}
	key, mt, err := lookupTable(at.Manifest, in.Table)
	if err != nil {
		return DescribeTableOutput{}, err
	}
	access.RecordFrom(ctx).Tables = []string{key}
	v, cv, err := s.views(ctx, at, key)
	if err != nil {
		return DescribeTableOutput{}, err
	}
	res, err := s.o.Reader.Query(ctx, at, "SELECT count(*) FROM "+v)
	if err != nil {
		return DescribeTableOutput{}, callError(err)
	}
	rows, _ := res.Rows[0][0].(int64)
	state := mt.Snapshot.State
	if state == "" {
		state = manifest.SnapshotComplete
	}
	var cols []ColumnInfo
	if cur := mt.CurrentSchema(); cur != nil {
		cols = columnInfos(cur.Columns)
	}
	return DescribeTableOutput{
		At: atOutput(at), Name: key, View: v, ChangesView: cv, ChangeColumns: changeColumns,
		PrimaryKey: nonNil(mt.PrimaryKey), ReplicaIdentity: mt.ReplicaIdentity, Generation: mt.Generation, Snapshot: state,
		Rows: rows, FreshAsOf: timeText(freshAsOf(at.Manifest)), SchemaVersion: mt.SchemaVersion,
		Columns: nonNil(cols), SchemaVersions: schemaVersions(mt),
	}, nil
}

type SchemaHistoryOutput struct {
	At       AtOutput            `json:"at"`
	Name     string              `json:"name"`
	Current  int                 `json:"current" jsonschema:"the current schema version"`
	Versions []SchemaVersionInfo `json:"versions" jsonschema:"every schema version, oldest first, each with what changed from the one before"`
}

func (s *Server) schemaHistory(ctx context.Context, in TableInput) (SchemaHistoryOutput, error) {
	at, err := s.resolve(ctx, in.AsOf)
	if err != nil {
		return SchemaHistoryOutput{}, err
	}
	key, mt, err := lookupTable(at.Manifest, in.Table)
	if err != nil {
		return SchemaHistoryOutput{}, err
	}
	rec := access.RecordFrom(ctx)
	rec.Tables = []string{key}
	vs := schemaVersions(mt)
	rec.Rows = int64(len(vs))
	return SchemaHistoryOutput{At: atOutput(at), Name: key, Current: mt.SchemaVersion, Versions: vs}, nil
}

// ResultColumn is one column of a result.
type ResultColumn struct {
	Name string `json:"name"`
	Type string `json:"type" jsonschema:"DuckDB's name for its type (BIGINT, VARCHAR, DECIMAL(12,3), TIMESTAMP WITH TIME ZONE, …)"`
}

// rows is a result as tools return it: its columns, and its rows, each
// an array of cells in the columns' order.
type rows struct {
	columns   []ResultColumn
	rows      [][]Value
	truncated bool
}

func rowsOf(res *readpath.Result, limit int) rows {
	out := rows{columns: resultColumns(res.Columns), rows: [][]Value{}, truncated: res.Truncated}
	for _, row := range res.Rows {
		if len(out.rows) == limit {
			out.truncated = true
			break
		}
		cells := make([]Value, len(row))
		for j, v := range row {
			cells[j] = cell(v)
		}
		out.rows = append(out.rows, cells)
	}
	return out
}

// maxExact is the largest integer every JSON client reads exactly (a
// float64 holds it: JavaScript's Number.MAX_SAFE_INTEGER); the SDK itself
// re-decodes structured output through float64.
const maxExact = 1<<53 - 1

// cell is a value as a row carries it: the read path's JSON form
// (readpath.JSONValue), with integers beyond ±maxExact as their decimal
// strings, at any depth, so no client reads a different number.
func cell(v any) Value { return exact(readpath.JSONValue(v)) }

func exact(v any) any {
	switch x := v.(type) {
	case int64:
		if x > maxExact || x < -maxExact {
			return strconv.FormatInt(x, 10)
		}
	case int:
		return exact(int64(x))
	case uint64:
		if x > maxExact {
			return strconv.FormatUint(x, 10)
		}
	case uint:
		return exact(uint64(x))
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return exact(i)
		}
		if !strings.ContainsAny(string(x), ".eE") {
			return string(x) // beyond int64: HUGEINT, UHUGEINT, BIGNUM
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = exact(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = exact(e)
		}
		return out
	}
	return v
}

type SampleInput struct {
	Table string `json:"table" jsonschema:"the table: schema.table, or its bare name when one schema has it"`
	N     int    `json:"n,omitempty" jsonschema:"how many rows (default 10, at most the server's row cap)"`
	AsOf  string `json:"as_of,omitempty" jsonschema:"the point to read: a manifest version N, epoch:N, lsn:X/Y, an RFC 3339 time, main, staging or raw@<RFC 3339 time>; empty for the newest version"`
}

type SampleOutput struct {
	At        AtOutput       `json:"at"`
	Name      string         `json:"name"`
	Columns   []ResultColumn `json:"columns"`
	Rows      [][]Value      `json:"rows" jsonschema:"the rows, each an array of cells in the columns' order"`
	Truncated bool           `json:"truncated" jsonschema:"rows were left out at the server's byte cap"`
}

func (s *Server) sampleRows(ctx context.Context, in SampleInput) (SampleOutput, error) {
	n := in.N
	switch {
	case n == 0:
		n = 10
	case n < 0 || n > s.o.MaxRows:
		return SampleOutput{}, fmt.Errorf("n = %d: ask for 1 to %d rows", n, s.o.MaxRows)
	}
	at, err := s.resolve(ctx, in.AsOf)
	if err != nil {
		return SampleOutput{}, err
	}
	key, mt, err := lookupTable(at.Manifest, in.Table)
	if err != nil {
		return SampleOutput{}, err
	}
	rec := access.RecordFrom(ctx)
	rec.Tables = []string{key}
	v, _, err := s.views(ctx, at, key)
	if err != nil {
		return SampleOutput{}, err
	}
	// The first n rows in primary-key order: the same rows every time at
	// the same point (a keyless table: in file order).
	order := ""
	if len(mt.PrimaryKey) > 0 {
		ks := make([]string, len(mt.PrimaryKey))
		for i, k := range mt.PrimaryKey {
			ks[i] = mergesql.Ident(k)
		}
		order = " ORDER BY " + strings.Join(ks, ", ")
	}
	res, err := s.o.Reader.Query(ctx, at, fmt.Sprintf("SELECT * FROM %s%s LIMIT %d", v, order, n))
	if err != nil {
		return SampleOutput{}, callError(err)
	}
	rs := rowsOf(res, n)
	out := SampleOutput{At: atOutput(at), Name: key, Columns: rs.columns, Rows: rs.rows, Truncated: rs.truncated && len(rs.rows) < n}
	rec.Rows, rec.Truncated = int64(len(out.Rows)), out.Truncated
	return out, nil
}
