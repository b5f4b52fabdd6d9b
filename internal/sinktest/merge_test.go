package sinktest

import (
	"slices"
	"testing"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func TestMergedRowsInsertUpdateDelete(t *testing.T) {
	s := newSink(t)
	items := itemsTable()
	s.table(items, 0)
	s.base(items,
		ins(100, 0, "id", "1", "name", "a", "price", "1.50", "ref", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "doc", `{"b": [1, 2], "a": "x"}`),
		ins(100, 1, "id", "2", "name", "b", "price", "-2.00"),
		ins(100, 2, "id", "3", "name", "c"))
	s.delta(items, 1, []change{
		upd(200, 0, "id", "1", "name", "a2", "payload", "p", "price", "99999999.99", "ref", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
		del(200, 1, "id", "2"),
	})
	cols, rows := MergedRows(t, s.commit(), "public.items")
	if !slices.Equal(cols, []string{"id", "name", "payload", "price", "ref", "doc"}) {
		t.Errorf("cols = %v", cols)
	}
	checkRows(t, rows,
		`1 | "a2" | "p" | 99999999.99 | a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 | NULL`,
		`3 | "c" | NULL | NULL | NULL | NULL`)
	if _, ok := rows[0][4].(duckdb.UUID); !ok {
		t.Errorf("ref is a %T, want duckdb.UUID", rows[0][4])
	}
}

func TestMergedRowsDeleteThenReinsert(t *testing.T) {
	s := newSink(t)
	items := itemsTable()
	s.table(items, 0)
	s.base(items, ins(100, 0, "id", "1", "name", "x"), ins(100, 1, "id", "2", "name", "x"))
	// Key 1: delete and insert in one transaction. Key 2: across epochs.
	s.delta(items, 1, []change{del(200, 0, "id", "1"), ins(200, 1, "id", "1", "name", "y")})
	s.delta(items, 2, []change{del(300, 0, "id", "2")})
	s.delta(items, 3, []change{ins(400, 0, "id", "2", "name", "z")})
	_, rows := MergedRows(t, s.commit(), "public.items")
	checkRows(t, rows,
		`1 | "y" | NULL | NULL | NULL | NULL`,
		`2 | "z" | NULL | NULL | NULL | NULL`)
}

func TestMergedRowsPrimaryKeyChange(t *testing.T) {
	s := newSink(t)
	items := itemsTable()
	s.table(items, 0)
	s.base(items, ins(100, 0, "id", "1", "name", "a"), ins(100, 1, "id", "5", "name", "e"))
	// UPDATE items SET id = 10 WHERE id = 1: D old key, then U new key.
	s.delta(items, 1, []change{del(200, 0, "id", "1"), upd(200, 1, "id", "10", "name", "a")})
	_, rows := MergedRows(t, s.commit(), "public.items")
	checkRows(t, rows,
		`5 | "e" | NULL | NULL | NULL | NULL`,
		`10 | "a" | NULL | NULL | NULL | NULL`)
}

func TestMergedRowsUnchangedToast(t *testing.T) {
	s := newSink(t)
	items := itemsTable()
	s.table(items, 0)
	s.base(items,
		ins(100, 0, "id", "1", "name", "a", "payload", "P1"),
		ins(100, 1, "id", "2", "name", "b", "payload", "Q1"))
	s.delta(items, 1, []change{
		upd(200, 0, "id", "1", "name", "a2", "payload", unchanged),
		upd(200, 1, "id", "2", "name", "b2", "payload", "Q2"),
		// Key 3 was never seen whole: nothing to take the value from.
		upd(200, 2, "id", "3", "name", "c", "payload", unchanged),
	})
	s.delta(items, 2, []change{
		upd(300, 0, "id", "1", "name", "a3", "payload", unchanged, "price", "5.00"),
		upd(300, 1, "id", "2", "name", "b3", "payload", unchanged, "doc", unchanged),
	})
	_, rows := MergedRows(t, s.commit(), "public.items")
	checkRows(t, rows,
		`1 | "a3" | "P1" | 5 | NULL | NULL`,
		`2 | "b3" | "Q2" | NULL | NULL | NULL`,
		`3 | "c" | NULL | NULL | NULL | NULL`)
}

func TestMergedRowsTruncate(t *testing.T) {
	s := newSink(t)
	items := itemsTable()
	s.table(items, 0)
	s.base(items, ins(100, 0, "id", "1", "name", "a"), ins(100, 1, "id", "2", "name", "b"))
	s.delta(items, 1, []change{ins(200, 0, "id", "3", "name", "c")})
	// TRUNCATE, then an insert in the same transaction.
	s.delta(items, 2, []change{trunc(300, 0), ins(300, 1, "id", "4", "name", "d")})
	s.delta(items, 3, []change{ins(400, 0, "id", "5", "name", "e"), upd(400, 1, "id", "4", "name", "d2")})
	// A change older than the truncate, in a later file (a replay): gone too.
	s.delta(items, 4, []change{ins(250, 0, "id", "6", "name", "f")})
	_, rows := MergedRows(t, s.commit(), "public.items")
	checkRows(t, rows,
		`4 | "d2" | NULL | NULL | NULL | NULL`,
		`5 | "e" | NULL | NULL | NULL | NULL`)
}

func TestMergedRowsReplayedAndOutOfOrder(t *testing.T) {
	s := newSink(t)
	items := itemsTable()
	s.table(items, 0)
	s.base(items, ins(100, 0, "id", "1", "name", "a"), ins(100, 1, "id", "2", "name", "b"))
	epoch1 := []change{upd(200, 0, "id", "1", "name", "a2", "payload", "p"), del(200, 1, "id", "2")}
	// The same flush written twice (a retry after a crash) ...
	s.delta(items, 1, epoch1, epoch1)
	s.delta(items, 2, epoch1)
	// ... and a delayed older change, which must neither win nor resurrect.
	s.delta(items, 3, []change{upd(150, 0, "id", "1", "name", "old"), upd(150, 1, "id", "2", "name", "zombie")})
	_, rows := MergedRows(t, s.commit(), "public.items")
	checkRows(t, rows, `1 | "a2" | "p" | NULL | NULL | NULL`)
}

// A base compaction wrote, then replays of deltas it folded: key 1's base
// row filled payload from an older version, and a replayed copy of that
// version (payload unchanged) ties with it; key 2's base row lost payload
// after a delete the base no longer holds, and a replayed insert from before
// the delete is older than it.
func TestMergedRowsBaseAgainstReplays(t *testing.T) {
	s := newSink(t)
	items := itemsTable()
	s.table(items, 0)
	s.base(items,
		upd(300, 0, "id", "1", "name", "a3", "payload", "P1"),
		upd(300, 2, "id", "2", "name", "b", "payload", unchanged))
	s.delta(items, 1, []change{
		ins(100, 1, "id", "2", "name", "old", "payload", "OLD"),
		upd(300, 0, "id", "1", "name", "a3", "payload", unchanged),
	})
	_, rows := MergedRows(t, s.commit(), "public.items")
	checkRows(t, rows,
		`1 | "a3" | "P1" | NULL | NULL | NULL`,
		`2 | "b" | NULL | NULL | NULL | NULL`)
}

func TestMergedRowsInsertOnly(t *testing.T) {
	s := newSink(t)
	log := logTable()
	s.table(log, 0)
	s.base(log, ins(100, 0, "at", "2026-11-29 08:00:00+00", "msg", "before truncate"))
	s.delta(log, 1, []change{trunc(200, 0), ins(200, 1, "at", "2026-11-29 09:00:00+00", "msg", "same")})
	part := []change{
		ins(300, 0, "at", "2026-11-29 10:00:00.5+00", "msg", "same"),
		ins(300, 1, "at", "2026-11-29 10:00:00.5+00", "msg", "same"),
	}
	s.delta(log, 2, part)
	s.delta(log, 3, part) // replayed
	cols, rows := MergedRows(t, s.commit(), "public.log")
	if !slices.Equal(cols, []string{"at", "msg"}) {
		t.Errorf("cols = %v", cols)
	}
	// Identical rows are kept: they are distinct changes by (__lsn, __seq).
	checkRows(t, rows,
		`2026-11-29T09:00:00Z | "same"`,
		`2026-11-29T10:00:00.5Z | "same"`,
		`2026-11-29T10:00:00.5Z | "same"`)
}

func TestMergedRowsAddedColumn(t *testing.T) {
	s := newSink(t)
	v1 := itemsTable()
	v1.Columns = v1.Columns[:2] // id, name
	s.table(v1, 0)
	s.base(v1, ins(100, 0, "id", "1", "name", "a"), ins(100, 1, "id", "2", "name", "b"))
	v2 := itemsTable()
	v2.Columns = v2.Columns[:4] // + payload, price
	s.table(v2, 1)
	s.delta(v2, 1, []change{upd(200, 0, "id", "2", "name", "b2", "payload", "p", "price", "0.10")})
	// A column in the schema that no file has yet.
	v3 := itemsTable()
	s.table(v3, 2)
	cols, rows := MergedRows(t, s.commit(), "public.items")
	if len(cols) != 6 {
		t.Errorf("cols = %v", cols)
	}
	checkRows(t, rows,
		`1 | "a" | NULL | NULL | NULL | NULL`,
		`2 | "b2" | "p" | 0.1 | NULL | NULL`)
}

func TestMergedRowsEmptyAndTextKeys(t *testing.T) {
	s := newSink(t)
	s.table(itemsTable(), 0)
	tags := &cdc.Table{
		ID: cdc.TableID{Schema: "app data", Name: "Tags"},
		Columns: []cdc.Column{
			{Name: "k", TypeOID: 25, TypeMod: -1, FieldID: 1},
			{Name: "n", TypeOID: 23, TypeMod: -1, FieldID: 2},
		},
		PrimaryKey: []string{"k", "n"},
	}
	s.table(tags, 0)
	s.base(tags, ins(100, 0, "k", "b", "n", "1"), ins(100, 1, "k", "a", "n", "2"),
		ins(100, 2, "k", "a", "n", "1"), ins(100, 3, "k", "É", "n", "1"), ins(100, 4, "k", "Z", "n", "1"))
	root := s.commit()
	cols, rows := MergedRows(t, root, "public.items")
	if len(cols) != 6 || len(rows) != 0 {
		t.Errorf("empty table: cols %v, %d rows", cols, len(rows))
	}
	_, rows = MergedRows(t, root, "app data.Tags")
	// Byte order: upper case before lower case, non-ASCII last.
	checkRows(t, rows, `"Z" | 1`, `"a" | 1`, `"a" | 2`, `"b" | 1`, `"É" | 1`)
}

func TestSandboxRefusesOutsideFiles(t *testing.T) {
	root := t.TempDir()
	db := openSandboxed(t, root)
	for _, q := range []string{
		"SELECT * FROM read_csv('/etc/passwd')",
		"SELECT * FROM read_text('" + root + "-evil/x')",
		"SET enable_external_access = true",
		"SET allowed_directories = ['/']",
		"INSTALL httpfs",
	} {
		_, err := db.Exec(q)
		if err == nil {
			t.Errorf("%s succeeded in the sandbox", q)
			continue
		}
		t.Logf("%s: %v", q, err)
	}
}
