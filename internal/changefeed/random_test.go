//go:build !nodb

package changefeed_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/changefeed"
	"github.com/pg-cdc/pg-cdc/internal/changefeed/changefeedtest"
)

// TestFeedRandom: flushes of transactions that change a few keys several
// times (and now and then truncate), compactions at random, and a consumer
// that reads pages of random size in between: it receives exactly every
// committed change, once, in order.
func TestFeedRandom(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			s := changefeedtest.New(t, []string{table})
			f := newFeed(t, s)
			var committed []seen
			var got []seen
			c := changefeed.Cursor{}
			lsn := cdc.LSN(0x1000)
			read := func() {
				p, err := f.Page(context.Background(), table, c, 1+rng.IntN(4))
				if err != nil {
					t.Fatalf("page after %s: %v", c, err)
				}
				got = append(got, page(p)...)
				c = p.Next
			}
			for epoch := uint64(1); epoch <= 14; epoch++ {
				var rows []changefeedtest.Row
				for range 1 + rng.IntN(3) { // transactions
					lsn += 0x100
					for seq := range int64(1 + rng.IntN(5)) {
						r := ch(cdc.OpUpdate, lsn, seq, int64(1+rng.IntN(3)), fmt.Sprintf("e%d.%d", epoch, seq))
						switch k := rng.IntN(10); {
						case k == 0 && epoch > 2:
							r = changefeedtest.Row{Op: cdc.OpTruncate, LSN: lsn, Seq: seq}
						case k < 3:
							r.Op = cdc.OpInsert
						case k < 4:
							r.Op, r.Status = cdc.OpDelete, ""
						}
						rows = append(rows, r)
					}
				}
				s.Flush(epoch, map[string][]changefeedtest.Row{table: rows})
				for _, r := range rows {
					w := seen{LSN: r.LSN, Seq: r.Seq, Op: string(r.Op), ID: r.ID, Status: r.Status}
					switch r.Op {
					case cdc.OpDelete:
						w.Status = nil
					case cdc.OpTruncate:
						w.ID, w.Status = nil, nil
					}
					committed = append(committed, w)
				}
				for range rng.IntN(3) {
					read()
				}
				if rng.IntN(3) == 0 {
					s.Compact(table)
				}
			}
			for range 200 {
				p, err := f.Page(context.Background(), table, c, 3)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, page(p)...)
				c = p.Next
				if !p.More {
					break
				}
			}
			same(t, "the consumer's changes", got, committed)
		})
	}
}
