package postgres

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// relation is a catalog row before its columns and key are attached.
type relation struct {
	oid         uint32
	schema      string
	name        string
	kind        string // pg_class.relkind
	persistence string // pg_class.relpersistence
	replident   string // pg_class.relreplident
}

// DiscoverTables lists the tables to capture, sorted by schema then name.
//
// With include non-empty, exactly those tables are returned: one that does not
// exist, is not a table (a view, say), or is unlogged or temporary (logical
// decoding never sees those) is an error naming it, and so is one that an
// exclude pattern also matches (explicit beats silent). Partitions may be
// included by name.
//
// Otherwise every permanent ordinary table and partitioned table in schemas
// is returned (every non-system schema when schemas is empty), except
// partitions: a partitioned table is captured as one table through its root,
// the COPY of the root reads every partition, and EnsurePublication publishes
// partition changes under the root (publish_via_partition_root). A schema
// that does not exist is an error.
//
// exclude holds exact "schema.table" names or path.Match globs on
// "schema.table"; a malformed pattern is an error.
//
// Columns are in attnum order without dropped and generated columns
// (pgoutput does not send generated columns, so the COPY must not either).
// PrimaryKey holds the columns that identify a row in the stream: the replica
// identity index's under REPLICA IDENTITY USING INDEX, the primary key's
// otherwise. A table whose replica identity index is gone is reported as
// REPLICA IDENTITY NOTHING, which is how PostgreSQL then treats it.
func (db *DB) DiscoverTables(ctx context.Context, schemas []string, include []cdc.TableID, exclude []string) ([]*cdc.Table, error) {
	for _, p := range exclude {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("discover tables: exclude pattern %q: %w", p, err)
		}
	}
	var tables []*cdc.Table
	err := db.with(ctx, func(c *pgx.Conn) error {
		rels, err := listRelations(ctx, c, schemas, include, exclude)
		if err != nil {
			return err
		}
		tables, err = describe(ctx, c, rels)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("discover tables on %s: %w", db.server, err)
	}
	return tables, nil
}

func excluded(id cdc.TableID, exclude []string) bool {
	s := id.String()
	for _, p := range exclude {
		if ok, _ := path.Match(p, s); ok || p == s { // patterns were validated
			return true
		}
	}
	return false
}

const relationColumns = `SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text,
	c.relpersistence::text, c.relreplident::text
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace `

func scanRelations(rows pgx.Rows) ([]relation, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (relation, error) {
		var rel relation
		err := r.Scan(&rel.oid, &rel.schema, &rel.name, &rel.kind, &rel.persistence, &rel.replident)
		return rel, err
	})
}

func listRelations(ctx context.Context, c *pgx.Conn, schemas []string, include []cdc.TableID, exclude []string) ([]relation, error) {
	if len(include) > 0 {
		return includedRelations(ctx, c, include, exclude)
	}
	if len(schemas) > 0 {
		rows, err := c.Query(ctx, `SELECT s FROM unnest($1::text[]) s
			WHERE NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = s) ORDER BY s`, schemas)
		if err != nil {
			return nil, err
		}
		missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("schema %s does not exist", strings.Join(missing, ", "))
		}
	}
	rows, err := c.Query(ctx, relationColumns+`
		WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p' AND NOT c.relispartition
		  AND CASE WHEN cardinality($1::text[]) > 0 THEN n.nspname = ANY($1::text[])
		      ELSE n.nspname NOT IN ('pg_catalog', 'information_schema')
		           AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp\_%' END`, schemas)
	if err != nil {
		return nil, err
	}
	all, err := scanRelations(rows)
	if err != nil {
		return nil, err
	}
	rels := all[:0]
	for _, r := range all {
		if !excluded(cdc.TableID{Schema: r.schema, Name: r.name}, exclude) {
			rels = append(rels, r)
		}
	}
	return rels, nil
}

func includedRelations(ctx context.Context, c *pgx.Conn, include []cdc.TableID, exclude []string) ([]relation, error) {
	var nsp, names []string
	for _, id := range include {
		if excluded(id, exclude) {
			return nil, cdc.Usage(fmt.Errorf("table %s is both included and excluded", id.Quoted()))
		}
		nsp, names = append(nsp, id.Schema), append(names, id.Name)
	}
	rows, err := c.Query(ctx, relationColumns+`
		WHERE (n.nspname, c.relname) IN (SELECT * FROM unnest($1::text[], $2::text[]))`, nsp, names)
	if err != nil {
		return nil, err
	}
	rels, err := scanRelations(rows)
	if err != nil {
		return nil, err
	}
	found := make(map[cdc.TableID]relation, len(rels))
	for _, r := range rels {
		found[cdc.TableID{Schema: r.schema, Name: r.name}] = r
	}
	var problems []string
	seen := make(map[cdc.TableID]bool)
	out := rels[:0]
	missing := false
	for _, id := range include {
		r, ok := found[id]
		switch {
		case seen[id]:
			continue
		case !ok:
			missing = true
			problems = append(problems, fmt.Sprintf("table %s does not exist", id.Quoted()))
		case r.kind != "r" && r.kind != "p":
			problems = append(problems, fmt.Sprintf("%s is not a table (relkind %s)", id.Quoted(), r.kind))
		case r.persistence != "p":
			problems = append(problems, fmt.Sprintf("table %s is unlogged or temporary: logical decoding cannot see its changes", id.Quoted()))
		default:
			out = append(out, r)
		}
		seen[id] = true
	}
	if len(problems) > 0 {
		hint := `name each table as PostgreSQL writes it, schema first: public.orders, or public."Order Items" for a name with capitals, spaces or dots`
		if missing {
			// An explicit list names tables that exist: a missing one is
			// far more often a typo than a table to come.
			hint += `; to capture tables the application has not created yet, leave tables.include empty: every table created in source.postgres.schemas is then captured (tables.exclude leaves some out)`
		}
		return nil, &cdc.Error{Class: cdc.ErrUsage, Msg: "tables.include: " + strings.Join(problems, "; "), Hint: hint}
	}
	return out, nil
}

// describe attaches columns, key and replica identity, and sorts.
func describe(ctx context.Context, c *pgx.Conn, rels []relation) ([]*cdc.Table, error) {
	byOID := make(map[uint32]*cdc.Table, len(rels))
	oids := make([]uint32, 0, len(rels))
	tables := make([]*cdc.Table, 0, len(rels))
	for _, r := range rels {
		t := &cdc.Table{ID: cdc.TableID{Schema: r.schema, Name: r.name}, OID: r.oid, ReplicaIdentity: replicaIdentity(r.replident)}
		byOID[r.oid] = t
		oids = append(oids, r.oid)
		tables = append(tables, t)
	}
	rows, err := c.Query(ctx, `SELECT a.attrelid, a.attname::text, a.atttypid, a.atttypmod,
			format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attnum
		FROM pg_attribute a
		WHERE a.attrelid = ANY($1::oid[]) AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
		ORDER BY a.attrelid, a.attnum`, oids)
	if err != nil {
		return nil, fmt.Errorf("read columns: %w", err)
	}
	var (
		rel    uint32
		col    cdc.Column
		attnum int16
	)
	_, err = pgx.ForEachRow(rows, []any{&rel, &col.Name, &col.TypeOID, &col.TypeMod, &col.PGType, &col.NotNull, &attnum}, func() error {
		col.FieldID = int(attnum)
		byOID[rel].Columns = append(byOID[rel].Columns, col)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read columns: %w", err)
	}
	if err := resolveTypes(ctx, c, tables); err != nil {
		return nil, fmt.Errorf("read column types: %w", err)
	}

	// Key columns in index order; a table has at most one primary key and at
	// most one replica identity index.
	rows, err = c.Query(ctx, `SELECT i.indrelid, i.indisprimary, i.indisreplident, a.attname::text
		FROM pg_index i
		CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indrelid = ANY($1::oid[]) AND (i.indisprimary OR i.indisreplident)
		ORDER BY i.indrelid, k.ord`, oids)
	if err != nil {
		return nil, fmt.Errorf("read keys: %w", err)
	}
	var (
		primary, replident bool
		name               string
	)
	pk := make(map[uint32][]string)
	ri := make(map[uint32][]string)
	_, err = pgx.ForEachRow(rows, []any{&rel, &primary, &replident, &name}, func() error {
		if primary {
			pk[rel] = append(pk[rel], name)
		}
		if replident {
			ri[rel] = append(ri[rel], name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read keys: %w", err)
	}
	for oid, t := range byOID {
		t.PrimaryKey = pk[oid]
		if t.ReplicaIdentity == cdc.ReplicaIdentityIndex {
			if len(ri[oid]) > 0 {
				t.PrimaryKey = ri[oid]
			} else {
				t.ReplicaIdentity = cdc.ReplicaIdentityNothing
			}
		}
	}
	sort.Slice(tables, func(i, j int) bool {
		a, b := tables[i].ID, tables[j].ID
		if a.Schema != b.Schema {
			return a.Schema < b.Schema
		}
		return a.Name < b.Name
	})
	return tables, nil
}

func replicaIdentity(relreplident string) cdc.ReplicaIdentity {
	switch relreplident {
	case "f":
		return cdc.ReplicaIdentityFull
	case "i":
		return cdc.ReplicaIdentityIndex
	case "n":
		return cdc.ReplicaIdentityNothing
	default: // "d"
		return cdc.ReplicaIdentityDefault
	}
}

// CheckTables judges the tables' replica identities. REPLICA IDENTITY
// NOTHING makes PostgreSQL reject UPDATE and DELETE of a published table and
// leaves pg-cdc unable to identify rows, so it is an error of class
// ErrPreflight naming every such table, with the ALTER TABLE to run in the
// hint. A table without a key and without FULL is captured insert-only; each
// gets a warning saying so and how to change it.
//
// Names are checked too, and refused with ErrPreflight: a column named like
// a metadata column (cdc.MetadataColumns, compared without regard to case,
// as DuckDB and most Parquet readers compare column names), because the
// file cannot hold both and renaming it silently would break readers; and
// two tables whose "schema.table" manifest keys are equal (schema "a.b"
// table "c" beside schema "a" table "b.c"), because the manifest, a
// published format, keys tables by that string.
func CheckTables(tables []*cdc.Table) (warnings []string, err error) {
	if err := checkNames(tables); err != nil {
		return nil, err
	}
	var refused, fixes []string
	for _, t := range tables {
		name := pgx.Identifier{t.ID.Schema, t.ID.Name}.Sanitize()
		switch {
		case t.ReplicaIdentity == cdc.ReplicaIdentityNothing:
			refused = append(refused, t.ID.String())
			fixes = append(fixes, fixReplicaIdentityNothing(t.ID, len(t.PrimaryKey) > 0))
		case t.InsertOnly():
			warnings = append(warnings, fmt.Sprintf(
				"table %s has no primary key and REPLICA IDENTITY %s: it is captured insert-only, "+
					"and PostgreSQL rejects its UPDATE and DELETE while it is published; "+
					"add a primary key, or run ALTER TABLE %s REPLICA IDENTITY FULL, to capture updates and deletes",
				t.ID, strings.ToUpper(string(t.ReplicaIdentity)), name))
		}
	}
	if len(refused) > 0 {
		return warnings, &cdc.Error{
			Class: ErrPreflight,
			Msg:   fmt.Sprintf("REPLICA IDENTITY NOTHING on %s: their updates and deletes cannot be captured", strings.Join(refused, ", ")),
			Hint:  strings.Join(fixes, "; "),
		}
	}
	return warnings, nil
}

// checkNames refuses column names taken by metadata columns and tables whose
// manifest keys collide (see CheckTables).
func checkNames(tables []*cdc.Table) error {
	var problems, fixes []string
	byKey := make(map[string]cdc.TableID, len(tables))
	for _, t := range tables {
		name := pgx.Identifier{t.ID.Schema, t.ID.Name}.Sanitize()
		if other, ok := byKey[t.ID.String()]; ok && other != t.ID {
			problems = append(problems, fmt.Sprintf("tables %s and %s have the same manifest key %q",
				pgx.Identifier{other.Schema, other.Name}.Sanitize(), name, t.ID.String()))
			fixes = append(fixes, fmt.Sprintf("rename one of %s and %s (ALTER TABLE … RENAME TO …)",
				pgx.Identifier{other.Schema, other.Name}.Sanitize(), name))
		}
		byKey[t.ID.String()] = t.ID
		for _, c := range t.Columns {
			for _, meta := range cdc.MetadataColumns {
				if strings.EqualFold(c.Name, meta) {
					problems = append(problems, fmt.Sprintf("column %q of table %s takes the name of the metadata column %s", c.Name, name, meta))
					fixes = append(fixes, fmt.Sprintf("ALTER TABLE %s RENAME COLUMN %s TO %s", name,
						pgx.Identifier{c.Name}.Sanitize(), pgx.Identifier{strings.TrimLeft(c.Name, "_")}.Sanitize()))
				}
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return &cdc.Error{
		Class: ErrPreflight,
		Msg:   strings.Join(problems, "; "),
		Hint:  strings.Join(fixes, "; ") + ", or leave the table out with tables.exclude",
	}
}

// pgType is the part of a pg_type row the Parquet mapping needs.
type pgType struct {
	typtype   string // b base, d domain, e enum, c composite, r range, ...
	base      uint32 // a domain's base type
	typmod    int32  // a domain's typmod of its base type
	elem      uint32 // an array's element type
	array     bool   // a true array (category A, variable length, ',' delimited)
	enumLabel []string
}

// resolveTypes fills each column's BaseTypeOID/BaseTypeMod (domains
// resolved), ElemTypeOID (an array's element, domains resolved) and
// EnumLabels (of an enum, or an enum array's element). TypeOID stays what
// pgoutput's Relation message reports.
func resolveTypes(ctx context.Context, c *pgx.Conn, tables []*cdc.Table) error {
	cache := map[uint32]*pgType{}
	get := func(oid uint32) (*pgType, error) {
		if t, ok := cache[oid]; ok {
			return t, nil
		}
		t := &pgType{}
		var delim string
		var category string
		var typlen int16
		err := c.QueryRow(ctx, `SELECT typtype::text, typbasetype, typtypmod, typelem, typcategory::text, typlen, typdelim::text
			FROM pg_type WHERE oid = $1`, oid).Scan(&t.typtype, &t.base, &t.typmod, &t.elem, &category, &typlen, &delim)
		if err != nil {
			return nil, fmt.Errorf("type %d: %w", oid, err)
		}
		// int2vector and oidvector are category A but print "1 2 3".
		t.array = category == "A" && typlen == -1 && t.elem != 0 && oid != 22 && oid != 30
		if t.array {
			var ed string
			if err := c.QueryRow(ctx, `SELECT typdelim::text FROM pg_type WHERE oid = $1`, t.elem).Scan(&ed); err != nil {
				return nil, fmt.Errorf("type %d: %w", t.elem, err)
			}
			t.array = ed == "," // box[] separates elements with ';'
		}
		if t.typtype == "e" {
			rows, err := c.Query(ctx, `SELECT enumlabel::text FROM pg_enum WHERE enumtypid = $1 ORDER BY enumsortorder`, oid)
			if err != nil {
				return nil, fmt.Errorf("enum %d: %w", oid, err)
			}
			if t.enumLabel, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return nil, fmt.Errorf("enum %d: %w", oid, err)
			}
		}
		cache[oid] = t
		return t, nil
	}
	// base follows a chain of domains; a domain's own typmod wins over the
	// column's (which is -1 for a domain column).
	base := func(oid uint32, mod int32) (uint32, int32, *pgType, error) {
		for range 32 {
			t, err := get(oid)
			if err != nil {
				return 0, 0, nil, err
			}
			if t.typtype != "d" {
				return oid, mod, t, nil
			}
			oid, mod = t.base, t.typmod
		}
		return 0, 0, nil, fmt.Errorf("type %d: domain chain too long", oid)
	}
	for _, tbl := range tables {
		for i := range tbl.Columns {
			col := &tbl.Columns[i]
			oid, mod, t, err := base(col.TypeOID, col.TypeMod)
			if err != nil {
				return err
			}
			if oid != col.TypeOID || mod != col.TypeMod {
				col.BaseTypeOID, col.BaseTypeMod = oid, mod // a domain
			}
			if len(t.enumLabel) > 0 {
				col.EnumLabels = t.enumLabel
			}
			if t.array {
				elem, emod, et, err := base(t.elem, mod)
				if err != nil {
					return err
				}
				col.ElemTypeOID = elem
				if emod != mod {
					col.BaseTypeOID, col.BaseTypeMod = oid, emod // an array of a domain
				}
				if len(et.enumLabel) > 0 {
					col.EnumLabels = et.enumLabel
				}
			}
		}
	}
	return nil
}
