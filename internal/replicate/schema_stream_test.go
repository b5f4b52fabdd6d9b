package replicate

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/flush"
)

// committedCatalog shows a column only once its transaction has committed,
// as PostgreSQL's catalog does to another session.
type committedCatalog struct {
	mu      sync.Mutex
	visible bool
	cols    fakeCatalog
	calls   int
}

func (c *committedCatalog) DescribeColumns(ctx context.Context, rel uint32, names []string) ([]cdc.Column, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if !c.visible {
		return fakeCatalog{}.DescribeColumns(ctx, rel, names)
	}
	return c.cols.DescribeColumns(ctx, rel, names)
}

func (c *committedCatalog) commit() {
	c.mu.Lock()
	c.visible = true
	c.mu.Unlock()
}

// TestColumnAddedInsideAStreamedTransaction: the Relation of an ADD
// COLUMN ... DEFAULT arrives inside a streamed transaction, before it
// commits, when the catalog cannot show the column yet. The version is
// recorded at the commit, with the value earlier rows read described then
// (here 7), not NULL; rows the transaction inserted before the ALTER read
// it in the merged state.
func TestColumnAddedInsideAStreamedTransaction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int64
	}{{"memory", 1 << 20}, {"spilled", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			cat := &committedCatalog{cols: fakeCatalog{
				"w": {TypeOID: oidInt4, TypeMod: -1, PGType: "integer", AttNum: 3, Missing: strptr("7")},
			}}
			h := start(t, options{limits: flush.Limits{Interval: time.Hour, MaxRows: 1}, budget: tc.budget, catalog: cat})
			c700 := startLSN + 0x900
			h.push(data(
				pgStreamStart(700, true),
				pgRelation(700, true, itemsOID, "public", "items", colID, colV),
				pgInsert(700, true, itemsOID, txt("1"), txt("before")),
				pgRelation(700, true, itemsOID, "public", "items", colID, colV, colW),
				pgInsert(700, true, itemsOID, txt("2"), txt("after"), txt("20")),
				pgStreamStop(),
			)...)
			h.waitIdle()
			cat.commit()
			h.push(data(pgStreamCommit(700, c700, endOf(c700), commitTime(c700)))...)
			h.waitFor("the streamed transaction durable", func() bool { return h.manifest().EndLSN == endOf(c700) })
			mt := h.manifest().Tables["public.items"]
			checkVersions(t, mt, []string{"1@0: id#1 v#2", "2@1: id#1 v#2 w#3=7"})
			checkMerged(t, h, mt, []string{"id=1 v=before w=7", "id=2 v=after w=20"})
		})
	}
}
