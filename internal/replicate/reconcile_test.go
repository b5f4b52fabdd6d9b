package replicate

import (
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/control"
	"github.com/pg-cdc/pg-cdc/internal/flush"
)

// reconcileMsg is the logical message `pg-cdc reconcile` writes for the
// items table with these columns.
func reconcileMsg(t *testing.T, lsn cdc.LSN, cols ...cdc.Column) []Message {
	t.Helper()
	prefix, content, err := control.Encode(control.Reconcile{Tables: []control.Shape{{Schema: "public", Name: "items", OID: itemsOID, Columns: cols}}})
	if err != nil {
		t.Fatal(err)
	}
	return data(pgLogical(0, false, false, lsn, prefix, content))
}

// TestReconcileRecordsUnannouncedChange: an ADD COLUMN … DEFAULT that no
// row change has announced is recorded by a reconcile request, with the
// default earlier rows read taken from the request (the catalog as it was
// at the request's position), not from the catalog when the request
// arrives; it becomes durable on an idle source; and the Relation message
// that the next row change brings binds that version instead of making
// another. A request whose shape is already the table's changes nothing,
// and a change this version does not follow is not fatal.
func TestReconcileRecordsUnannouncedChange(t *testing.T) {
	// What the catalog says when the request arrives: the column has been
	// dropped and re-added since, with another default.
	cat := fakeCatalog{"w": {TypeOID: oidInt4, TypeMod: -1, PGType: "integer", AttNum: 4, Missing: strptr("99")}}
	h := start(t, options{limits: flush.Limits{Interval: 50 * time.Millisecond, MaxRows: 1000}, catalog: cat})
	c := startLSN + 0x100
	next := func() cdc.LSN { c += 0x100; return c }

	id := cdc.Column{Name: "id", TypeOID: oidInt8, TypeMod: -1, PGType: "bigint", NotNull: true, AttNum: 1}
	v := cdc.Column{Name: "v", TypeOID: oidText, TypeMod: -1, PGType: "text", AttNum: 2}
	w := cdc.Column{Name: "w", TypeOID: oidInt4, TypeMod: -1, PGType: "integer", AttNum: 3, Missing: strptr("7")}

	c1 := next()
	h.push(tx(500, c1, rel(colID, colV), insert("1", "a"), insert("2", "b"))...)
	h.waitFor("epoch 1 durable", func() bool { return h.manifest().EndLSN == endOf(c1) })

	// The same shape: nothing to record, but the position is still reached.
	same := next()
	h.push(reconcileMsg(t, same, id, v)...)
	h.waitFor("unchanged request durable", func() bool { return h.manifest().EndLSN >= same })
	if got := h.manifest().Tables["public.items"].SchemaVersion; got != 1 {
		t.Fatalf("schema version %d after a request with the recorded shape, want 1", got)
	}

	// ADD COLUMN w int DEFAULT 7, no row changed since: recorded, durable
	// on an idle source.
	added := next()
	h.push(reconcileMsg(t, added, id, v, w)...)
	h.waitFor("reconciled version durable", func() bool { return h.manifest().EndLSN >= added })
	mt := h.manifest().Tables["public.items"]
	checkVersions(t, mt, []string{"1@0: id#1 v#2", "2@3: id#1 v#2 w#3=7"})
	checkMerged(t, h, mt, []string{"id=1 v=a w=7", "id=2 v=b w=7"})

	// The next change's Relation has that shape: bound, not a new version.
	c3 := next()
	h.push(tx(501, c3, rel(colID, colV, colW), insert("3", "c", "30"))...)
	h.waitFor("epoch with the new column durable", func() bool { return h.manifest().EndLSN == endOf(c3) })
	mt = h.manifest().Tables["public.items"]
	checkVersions(t, mt, []string{"1@0: id#1 v#2", "2@3: id#1 v#2 w#3=7"})
	checkMerged(t, h, mt, []string{"id=1 v=a w=7", "id=2 v=b w=7", "id=3 v=c w=30"})

	// v changed to a type readers cannot cast to: logged, not recorded, and
	// the stream goes on (it stops at the table's next change, as without
	// the request).
	bad := next()
	vDate := v
	vDate.TypeOID, vDate.PGType = 1082, "date"
	h.push(reconcileMsg(t, bad, id, vDate, w)...)
	h.waitFor("unsupported request passed", func() bool { return h.manifest().EndLSN >= bad })
	if got := h.manifest().Tables["public.items"].SchemaVersion; got != 2 {
		t.Fatalf("schema version %d after an unsupported change was reconciled, want 2", got)
	}
	if !h.running() {
		t.Fatal("the stream stopped at a reconcile request for a change it does not follow")
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestSameShape is what `pg-cdc reconcile` uses to skip tables whose
// recorded version already has the catalog's shape.
func TestSameShape(t *testing.T) {
	tbl := &cdc.Table{ID: cdc.TableID{Schema: "public", Name: "items"}, OID: itemsOID, Columns: []cdc.Column{
		{Name: "id", TypeOID: oidInt8, TypeMod: -1}, {Name: "v", TypeOID: oidText, TypeMod: -1},
	}}
	shape := func(cols ...cdc.Column) control.Shape {
		return control.Shape{Schema: "public", Name: "items", OID: itemsOID, Columns: cols}
	}
	id, v := tbl.Columns[0], tbl.Columns[1]
	renamed, widened := v, id
	renamed.Name = "vv"
	widened.TypeOID = oidText
	for _, c := range []struct {
		name  string
		shape control.Shape
		want  bool
	}{
		{"same", shape(id, v), true},
		{"added", shape(id, v, cdc.Column{Name: "w", TypeOID: oidInt4, TypeMod: -1}), false},
		{"dropped", shape(id), false},
		{"renamed", shape(id, renamed), false},
		{"retyped", shape(widened, v), false},
	} {
		if got := SameShape(tbl, c.shape); got != c.want {
			t.Errorf("%s: SameShape = %v, want %v", c.name, got, c.want)
		}
	}
}
