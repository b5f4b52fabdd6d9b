package postgres

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// publicationMembers lists the relations that are members of pub by
// themselves (pg_publication_rel), as "schema.table".
func (e *env) publicationMembers(pub string) []string {
	e.t.Helper()
	got := e.queryString(`SELECT coalesce(string_agg(n.nspname || '.' || c.relname, ',' ORDER BY n.nspname, c.relname), '')
		FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
		JOIN pg_class c ON c.oid = r.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE p.pubname = $1`, pub)
	if got == "" {
		return nil
	}
	return strings.Split(got, ",")
}

// TestEnsurePublicationInheritance: a parent and its inheritance child are
// each published by themselves (ONLY), in either order and again at every
// restart, without "relation is already member of publication"; a
// partitioned root named with ONLY still publishes its partitions' rows
// under the root. A row of the child arrives as the child's only, and the
// reads of the parent (snapshot COPY, backfill chunk, row by key) see its
// own rows only, as the stream delivers them.
func TestEnsurePublicationInheritance(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(
		`CREATE TABLE person (id int PRIMARY KEY, name text)`,
		`CREATE TABLE emp (salary int, PRIMARY KEY (id)) INHERITS (person)`,
		`CREATE TABLE parted (id int PRIMARY KEY) PARTITION BY RANGE (id)`,
		`CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (100)`,
		`INSERT INTO person VALUES (1, 'parent row')`,
		`INSERT INTO emp VALUES (2, 'child row', 10)`,
		`INSERT INTO parted VALUES (3)`,
	)
	person := cdc.TableID{Schema: "public", Name: "person"}
	emp := cdc.TableID{Schema: "public", Name: "emp"}
	parted := cdc.TableID{Schema: "public", Name: "parted"}

	// The child first, then the parent: what discovery does when it finds
	// both (sorted), one table at a time. Adding the parent without ONLY
	// would add the child again, and fail.
	for _, ids := range [][]cdc.TableID{{emp}, {person}, {parted}, {emp, parted, person}, {emp, parted, person}} {
		if err := e.db.EnsurePublication(ctx, "pub", ids); err != nil {
			t.Fatalf("publish %v: %v", ids, err)
		}
	}
	want := []string{"public.emp", "public.parted", "public.person"}
	if got := e.publicationMembers("pub"); !reflect.DeepEqual(got, want) {
		t.Errorf("members = %q, want %q", got, want)
	}
	if got := e.publicationTables("pub"); !reflect.DeepEqual(got, want) {
		t.Errorf("published tables = %q, want %q", got, want)
	}

	// A new publication with both, created at once; and the parent alone:
	// the child is not a member then.
	if err := e.db.EnsurePublication(ctx, "both", []cdc.TableID{emp, person}); err != nil {
		t.Fatal(err)
	}
	if got := e.publicationMembers("both"); !reflect.DeepEqual(got, []string{"public.emp", "public.person"}) {
		t.Errorf("both: members = %q", got)
	}
	if err := e.db.EnsurePublication(ctx, "parent_only", []cdc.TableID{person}); err != nil {
		t.Fatal(err)
	}
	if got := e.publicationTables("parent_only"); !reflect.DeepEqual(got, []string{"public.person"}) {
		t.Errorf("parent_only: published = %q, want the parent alone", got)
	}
	// A publication made before pg-cdc used ONLY (the parent without it,
	// so the child is a member too) is left as it is.
	e.exec(`CREATE PUBLICATION legacy FOR TABLE person`)
	if err := e.db.EnsurePublication(ctx, "legacy", []cdc.TableID{emp, person}); err != nil {
		t.Fatalf("legacy publication: %v", err)
	}

	// The reads of the parent see its own row only; of the root, its
	// partition's.
	if got := show(e.copyRows("", e.table("public.person"))); got != show([]row{{str("1"), str("parent row")}}) {
		t.Errorf("copy person = %s", got)
	}
	if got := show(e.copyRows("", e.table("public.parted"))); got != show([]row{{str("3")}}) {
		t.Errorf("copy parted = %s", got)
	}
	for _, c := range []struct {
		id   string
		want []string
	}{{"public.person", []string{"1"}}, {"public.emp", []string{"2"}}, {"public.parted", []string{"3"}}} {
		var keys []string
		_, _, err := e.db.ReadChunk(ctx, e.table(c.id), nil, 10, func(v []cdc.Datum) error {
			keys = append(keys, string(v[0].Text))
			return nil
		})
		if err != nil || !reflect.DeepEqual(keys, c.want) {
			t.Errorf("chunk of %s = %q, %v; want %q", c.id, keys, err, c.want)
		}
	}
	key := func(id string) []cdc.Datum { return []cdc.Datum{{Kind: cdc.DatumText, Text: []byte(id)}} }
	if _, found, err := e.db.ReadRow(ctx, e.table("public.person"), key("2"), []int{1}); err != nil || found {
		t.Errorf("person's row 2 (the child's): found %t, %v", found, err)
	}
	if vals, found, err := e.db.ReadRow(ctx, e.table("public.person"), key("1"), []int{1}); err != nil || !found || string(vals[0].Text) != "parent row" {
		t.Errorf("person's row 1: %v, found %t, %v", vals, found, err)
	}
	if _, found, err := e.db.ReadRow(ctx, e.table("public.parted"), key("3"), []int{0}); err != nil || !found {
		t.Errorf("parted's row 3: found %t, %v", found, err)
	}

	// The stream: each row under its own relation, once.
	r := e.replConn()
	cp, _, err := r.CreateSlot(ctx, "slot_inherit")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.StartReplication(ctx, "slot_inherit", "pub", cp); err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO person VALUES (11, 'p')`, `INSERT INTO emp VALUES (12, 'e', 20)`, `INSERT INTO parted VALUES (13)`,
		`UPDATE person SET name = 'updated'`, `SELECT pg_logical_emit_message(true, 'test', 'end')`)
	relName := map[uint32]string{}
	var got []string
	inStream := false
	for done := false; !done; {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := r.Receive(rctx)
		cancel()
		if err != nil {
			t.Fatalf("receive: %v (so far %q)", err, got)
		}
		if m.Kind != XLogData {
			continue
		}
		msg, err := pglogrepl.ParseV2(m.Data, inStream)
		if err != nil {
			t.Fatal(err)
		}
		switch msg := msg.(type) {
		case *pglogrepl.StreamStartMessageV2:
			inStream = true
		case *pglogrepl.StreamStopMessageV2:
			inStream = false
		case *pglogrepl.RelationMessageV2:
			relName[msg.RelationID] = msg.RelationName
		case *pglogrepl.InsertMessageV2:
			got = append(got, "I "+relName[msg.RelationID]+" "+string(msg.Tuple.Columns[0].Data))
		case *pglogrepl.UpdateMessageV2:
			got = append(got, "U "+relName[msg.RelationID]+" "+string(msg.NewTuple.Columns[0].Data))
		case *pglogrepl.LogicalDecodingMessageV2:
			done = msg.Prefix == "test"
		}
	}
	// UPDATE person (without ONLY) updates the child's rows too: each
	// under its own relation.
	wantStream := []string{"I person 11", "I emp 12", "I parted 13", "U person 1", "U person 11", "U emp 2", "U emp 12"}
	if !reflect.DeepEqual(got, wantStream) {
		t.Errorf("stream = %q\nwant %q", got, wantStream)
	}
}
