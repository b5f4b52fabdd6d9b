package postgres

import (
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

// TestSampleSnapshot: counts and rows as the exported snapshot saw them,
// whatever was written since; a TRUNCATE since the snapshot is reported as
// a rewrite instead of an empty table.
func TestSampleSnapshot(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY, v text)`, `INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 3) g`)
	tbl := e.table("public.t")
	r := e.replConn()
	_, snapshot, err := r.CreateSlot(ctx, "sample_slot")
	if err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO t VALUES (4, 'after')`, `UPDATE t SET v = NULL WHERE id = 1`, `DELETE FROM t WHERE id = 2`)

	key := func(s string) []cdc.Datum { return []cdc.Datum{{Kind: cdc.DatumText, Text: []byte(s)}} }
	rows, found, rewritten, err := e.db.SampleSnapshot(ctx, snapshot, tbl, [][]cdc.Datum{key("1"), key("2"), key("4")})
	if err != nil || rewritten || rows != 3 || len(found) != 3 {
		t.Fatalf("SampleSnapshot: %d rows, %d found, rewritten %v, %v; want 3 rows, 3 answers", rows, len(found), rewritten, err)
	}
	if found[0] == nil || string(found[0][1].Text) != "row 1" || found[1] == nil || string(found[1][0].Text) != "2" || found[2] != nil {
		t.Errorf("rows by key: %v; want id 1 as 'row 1', id 2 present, id 4 absent (as of the snapshot)", found)
	}

	e.exec(`TRUNCATE t`)
	if _, _, rewritten, err := e.db.SampleSnapshot(ctx, snapshot, tbl, nil); err != nil || !rewritten {
		t.Errorf("after TRUNCATE: rewritten %v, %v; want rewritten", rewritten, err)
	}
	if _, _, _, err := e.db.SampleSnapshot(ctx, "", tbl, nil); err == nil {
		t.Error("no snapshot: no error")
	}
	e.exec(`SELECT pg_drop_replication_slot('sample_slot')`)
}

// A partitioned table has no storage of its own (relfilenode 0): its
// leaves' are what a TRUNCATE or a new partition replaces.
func TestSampleSnapshotPartitioned(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t)
	e.exec(`CREATE TABLE p (id int PRIMARY KEY, v text) PARTITION BY RANGE (id)`,
		`CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (1) TO (100)`,
		`CREATE TABLE p2 PARTITION OF p FOR VALUES FROM (100) TO (200)`,
		`INSERT INTO p VALUES (1, 'one'), (2, 'two'), (150, 'one fifty')`)
	tbl := e.table("public.p")
	r := e.replConn()
	_, snapshot, err := r.CreateSlot(ctx, "sample_part_slot")
	if err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO p VALUES (3, 'after')`, `DELETE FROM p WHERE id = 150`)

	key := func(s string) []cdc.Datum { return []cdc.Datum{{Kind: cdc.DatumText, Text: []byte(s)}} }
	rows, found, rewritten, err := e.db.SampleSnapshot(ctx, snapshot, tbl, [][]cdc.Datum{key("150"), key("3")})
	if err != nil || rewritten || rows != 3 || len(found) != 2 {
		t.Fatalf("SampleSnapshot: %d rows, %d found, rewritten %v, %v; want 3 rows, 2 answers", rows, len(found), rewritten, err)
	}
	if found[0] == nil || string(found[0][1].Text) != "one fifty" || found[1] != nil {
		t.Errorf("rows by key: %v; want id 150 present (in another partition), id 3 absent (as of the snapshot)", found)
	}

	e.exec(`CREATE TABLE p3 PARTITION OF p FOR VALUES FROM (200) TO (300)`)
	if _, _, rewritten, err := e.db.SampleSnapshot(ctx, snapshot, tbl, nil); err != nil || !rewritten {
		t.Errorf("after a new partition: rewritten %v, %v; want rewritten", rewritten, err)
	}
	e.exec(`DROP TABLE p3`)
	if rows, _, rewritten, err := e.db.SampleSnapshot(ctx, snapshot, tbl, nil); err != nil || rewritten || rows != 3 {
		t.Errorf("with the snapshot's partitions again: %d rows, rewritten %v, %v; want 3 rows", rows, rewritten, err)
	}
	e.exec(`TRUNCATE p2`)
	if _, _, rewritten, err := e.db.SampleSnapshot(ctx, snapshot, tbl, nil); err != nil || !rewritten {
		t.Errorf("after TRUNCATE of a partition: rewritten %v, %v; want rewritten", rewritten, err)
	}
	e.exec(`SELECT pg_drop_replication_slot('sample_part_slot')`)
}
