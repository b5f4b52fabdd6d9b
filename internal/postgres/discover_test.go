package postgres

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func TestIdentityAndPreflight(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	id, err := e.db.Identity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := e.replConn()
	rid, xlogpos, err := r.IdentifySystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id != rid || id.SystemIdentifier == "" || id.Timeline < 1 || id.Database != e.queryString("SELECT current_database()") {
		t.Errorf("Identity %+v, IdentifySystem %+v", id, rid)
	}
	if xlogpos == 0 {
		t.Error("xlogpos is 0")
	}
	if err := e.db.Preflight(ctx, PreflightTarget{Provider: ProviderAuto, Publication: "p", Slot: "s"}); err != nil {
		t.Errorf("preflight as superuser: %v", err)
	}

	x1, err := e.db.CurrentXID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.exec("CREATE TABLE burn (v int)", "INSERT INTO burn VALUES (1)", "INSERT INTO burn VALUES (2)")
	x2, err := e.db.CurrentXID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if x1 == 0 || x2 <= x1 {
		t.Errorf("CurrentXID went %d → %d", x1, x2)
	}
}

func TestPreflightRole(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	role := strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_") + "_role"
	e.exec(`CREATE ROLE "` + role + `" LOGIN`)
	t.Cleanup(func() { e.exec(`DROP OWNED BY "`+role+`"`, `DROP ROLE "`+role+`"`) })
	target := PreflightTarget{Provider: ProviderAuto, Publication: "p", Slot: "s"}

	db, err := Connect(ctx, StaticURL(strings.Replace(e.url, "postgres@", role+"@", 1)))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Preflight(ctx, target)
	db.Close()
	if !errors.Is(err, ErrPreflight) || !strings.Contains(err.Error(), role) {
		t.Fatalf("err = %v, want ErrPreflight naming the role", err)
	}
	if h := cdc.HintOf(err); !strings.Contains(h, `ALTER ROLE "`+role+`" WITH REPLICATION`) {
		t.Errorf("hint = %q", h)
	}

	e.exec(`ALTER ROLE "` + role + `" REPLICATION`)
	db, err = Connect(ctx, StaticURL(strings.Replace(e.url, "postgres@", role+"@", 1)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The publication does not exist, so init must be able to create it.
	err = db.Preflight(ctx, target)
	if !errors.Is(err, ErrPreflight) || !strings.Contains(cdc.HintOf(err), "GRANT CREATE ON DATABASE") {
		t.Fatalf("err = %v (hint %q), want ErrPreflight with GRANT CREATE ON DATABASE", err, cdc.HintOf(err))
	}
	e.exec(`GRANT CREATE ON DATABASE "` + e.queryString("SELECT current_database()") + `" TO "` + role + `"`)
	if err := db.Preflight(ctx, target); err != nil {
		t.Errorf("preflight with REPLICATION and CREATE: %v", err)
	}
}

func discoverFixture(e *env) {
	e.exec(
		`CREATE SCHEMA app`,
		`CREATE SCHEMA other`,
		`CREATE TABLE app.pk (id int PRIMARY KEY, gone text, name text, "Mixed Case" numeric(12,3) NOT NULL, ts timestamptz)`,
		`ALTER TABLE app.pk DROP COLUMN gone`,
		`CREATE TABLE app.composite (a int, b int, c text, PRIMARY KEY (b, a))`,
		`CREATE TABLE app.nopk (v text)`,
		`CREATE TABLE app.full (v text)`,
		`ALTER TABLE app.full REPLICA IDENTITY FULL`,
		`CREATE TABLE app.nothing (id int PRIMARY KEY)`,
		`ALTER TABLE app.nothing REPLICA IDENTITY NOTHING`,
		`CREATE TABLE app.idx (id serial PRIMARY KEY, a int NOT NULL, b int NOT NULL)`,
		`CREATE UNIQUE INDEX idx_ba ON app.idx (b, a)`,
		`ALTER TABLE app.idx REPLICA IDENTITY USING INDEX idx_ba`,
		`CREATE TABLE app.tmp_1 (id int PRIMARY KEY)`,
		`CREATE TABLE app.tmp_2 (id int PRIMARY KEY)`,
		`CREATE TABLE app.parted (id int, at date, PRIMARY KEY (id, at)) PARTITION BY RANGE (at)`,
		`CREATE TABLE app.parted_2024 PARTITION OF app.parted FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')`,
		`CREATE TABLE app.gen (id int PRIMARY KEY, twice int GENERATED ALWAYS AS (id * 2) STORED, v text)`,
		`CREATE VIEW app.v AS SELECT 1 AS x`,
		`CREATE UNLOGGED TABLE app.unlogged (id int PRIMARY KEY)`,
		`CREATE TABLE other.t (id int PRIMARY KEY)`,
	)
}

func ids(tables []*cdc.Table) []string {
	var out []string
	for _, t := range tables {
		out = append(out, t.ID.String())
	}
	return out
}

func TestDiscoverTables(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	discoverFixture(e)

	tables, err := e.db.DiscoverTables(ctx, []string{"app"}, nil, []string{"app.tmp_*"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"app.composite", "app.full", "app.gen", "app.idx", "app.nopk", "app.nothing", "app.parted", "app.pk"}
	if got := ids(tables); !reflect.DeepEqual(got, want) {
		t.Fatalf("tables = %q, want %q", got, want)
	}
	by := map[string]*cdc.Table{}
	for _, tb := range tables {
		by[tb.ID.String()] = tb
	}

	pk := by["app.pk"]
	wantCols := []cdc.Column{
		{Name: "id", TypeOID: 23, TypeMod: -1, PGType: "integer", NotNull: true, FieldID: 1},
		{Name: "name", TypeOID: 25, TypeMod: -1, PGType: "text", FieldID: 3},
		{Name: "Mixed Case", TypeOID: 1700, TypeMod: 12<<16 | 3 + 4, PGType: "numeric(12,3)", NotNull: true, FieldID: 4},
		{Name: "ts", TypeOID: 1184, TypeMod: -1, PGType: "timestamp with time zone", FieldID: 5},
	}
	if !reflect.DeepEqual(pk.Columns, wantCols) {
		t.Errorf("app.pk columns = %+v", pk.Columns)
	}
	if pk.OID == 0 || !reflect.DeepEqual(pk.PrimaryKey, []string{"id"}) || pk.ReplicaIdentity != cdc.ReplicaIdentityDefault {
		t.Errorf("app.pk = %+v", pk)
	}
	for name, want := range map[string]struct {
		key []string
		ri  cdc.ReplicaIdentity
	}{
		"app.composite": {[]string{"b", "a"}, cdc.ReplicaIdentityDefault},
		"app.nopk":      {nil, cdc.ReplicaIdentityDefault},
		"app.full":      {nil, cdc.ReplicaIdentityFull},
		"app.nothing":   {[]string{"id"}, cdc.ReplicaIdentityNothing},
		"app.idx":       {[]string{"b", "a"}, cdc.ReplicaIdentityIndex},
		"app.parted":    {[]string{"id", "at"}, cdc.ReplicaIdentityDefault},
	} {
		tb := by[name]
		if !reflect.DeepEqual(tb.PrimaryKey, want.key) || tb.ReplicaIdentity != want.ri {
			t.Errorf("%s: key %q identity %s, want %q %s", name, tb.PrimaryKey, tb.ReplicaIdentity, want.key, want.ri)
		}
	}
	if got := by["app.gen"].Columns; len(got) != 2 || got[0].Name != "id" || got[1].Name != "v" || got[1].FieldID != 3 {
		t.Errorf("app.gen columns (generated skipped) = %+v", got)
	}

	warnings, err := CheckTables(tables)
	if !errors.Is(err, ErrPreflight) || !strings.Contains(err.Error(), "app.nothing") {
		t.Errorf("CheckTables err = %v", err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "app.nopk") {
		t.Errorf("CheckTables warnings = %q", warnings)
	}

	// Every non-system schema when none are named.
	all, err := e.db.DiscoverTables(ctx, nil, nil, []string{"app.*"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(all); !reflect.DeepEqual(got, []string{"other.t"}) {
		t.Errorf("all schemas minus app.* = %q", got)
	}
}

func TestDiscoverTablesInclude(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	discoverFixture(e)
	id := func(s string) cdc.TableID {
		v, err := cdc.ParseTableID(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	tables, err := e.db.DiscoverTables(ctx, []string{"ignored"}, []cdc.TableID{id("other.t"), id("app.pk"), id("app.parted_2024"), id("app.pk")}, []string{"app.tmp_*"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(tables); !reflect.DeepEqual(got, []string{"app.parted_2024", "app.pk", "other.t"}) {
		t.Errorf("included = %q", got)
	}
	if len(tables[1].Columns) != 4 {
		t.Errorf("app.pk columns = %+v", tables[1].Columns)
	}

	// A name with capitals, a space or a dot is named as PostgreSQL
	// quotes it; a missing one is a configuration error that shows the
	// name quoted (a trailing space visible).
	e.exec(`CREATE TABLE other."Order Items" (id int PRIMARY KEY)`, `CREATE TABLE other."a.b" (id int PRIMARY KEY)`)
	tables, err = e.db.DiscoverTables(ctx, nil, []cdc.TableID{id(`other."Order Items"`), id(`other."a.b"`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(tables); !reflect.DeepEqual(got, []string{"other.Order Items", "other.a.b"}) {
		t.Errorf("quoted names included = %q", got)
	}
	_, err = e.db.DiscoverTables(ctx, nil, []cdc.TableID{id(`other."Order Items "`)}, nil)
	if !errors.Is(err, cdc.ErrUsage) || !strings.Contains(err.Error(), `table other."Order Items " does not exist`) || !strings.Contains(cdc.HintOf(err), `public."Order Items"`) {
		t.Errorf("a missing quoted name: %v (hint %q), want a usage error naming other.\"Order Items \"", err, cdc.HintOf(err))
	}

	for _, tt := range []struct {
		name    string
		schemas []string
		include []cdc.TableID
		exclude []string
		want    []string
	}{
		{"missing", nil, []cdc.TableID{id("app.pk"), id("app.nope"), id("nope.x")}, nil, []string{"app.nope does not exist", "nope.x does not exist"}},
		{"view", nil, []cdc.TableID{id("app.v")}, nil, []string{"app.v is not a table"}},
		{"unlogged", nil, []cdc.TableID{id("app.unlogged")}, nil, []string{"app.unlogged is unlogged"}},
		{"both", nil, []cdc.TableID{id("app.tmp_1")}, []string{"app.tmp_*"}, []string{"app.tmp_1 is both included and excluded"}},
		{"bad pattern", []string{"app"}, nil, []string{"app.[x"}, []string{`exclude pattern "app.[x"`}},
		{"missing schema", []string{"app", "nope", "gone"}, nil, nil, []string{"schema gone, nope does not exist"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.db.DiscoverTables(ctx, tt.schemas, tt.include, tt.exclude)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want %q", err, w)
				}
			}
		})
	}
}

func TestCheckTablesNames(t *testing.T) {
	table := func(schema, name string, cols ...string) *cdc.Table {
		tb := &cdc.Table{ID: cdc.TableID{Schema: schema, Name: name}, ReplicaIdentity: cdc.ReplicaIdentityDefault, PrimaryKey: []string{"id"}}
		tb.Columns = append(tb.Columns, cdc.Column{Name: "id"})
		for _, c := range cols {
			tb.Columns = append(tb.Columns, cdc.Column{Name: c})
		}
		return tb
	}
	// Odd but distinct names are fine, and so are other "__" names.
	ok := []*cdc.Table{
		table("public", "a.b"), table("a", "b"), table("public", "T"), table("public", "t"),
		table(`we"ird`, `x\y`, "__lsn2", "_lsn", "__other", "lsn"),
	}
	if _, err := CheckTables(ok); err != nil {
		t.Errorf("CheckTables(distinct odd names) = %v", err)
	}

	for _, tt := range []struct {
		name   string
		tables []*cdc.Table
		want   []string // in the message and hint
	}{
		{"metadata column", []*cdc.Table{table("public", "Odd T", "__lsn")},
			[]string{`column "__lsn" of table "public"."Odd T"`, "metadata column __lsn", `ALTER TABLE "public"."Odd T" RENAME COLUMN "__lsn" TO "lsn"`}},
		{"metadata column in another case", []*cdc.Table{table("s", "t", "__Op_TS")},
			[]string{`"__Op_TS"`, "metadata column __op_ts", `RENAME COLUMN "__Op_TS" TO "Op_TS"`}},
		{"every metadata name", []*cdc.Table{table("s", "t", "__op", "__seq", "__xid", "__unchanged")},
			[]string{`"__op"`, `"__seq"`, `"__xid"`, `"__unchanged"`}},
		{"same manifest key", []*cdc.Table{table("a", "b.c"), table("a.b", "c")},
			[]string{`tables "a"."b.c" and "a.b"."c" have the same manifest key "a.b.c"`, "rename one of"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CheckTables(tt.tables)
			if !errors.Is(err, ErrPreflight) {
				t.Fatalf("CheckTables = %v, want ErrPreflight", err)
			}
			text := err.Error() + " HINT " + cdc.HintOf(err)
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("error lacks %q:\n%s", w, text)
				}
			}
		})
	}
}
