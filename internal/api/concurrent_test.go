//go:build !nodb

package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/changefeed/changefeedtest"
)

// TestChangesConcurrent: consumers follow the feed over HTTP while new
// versions and compactions land under them; each receives every change
// once and in order.
func TestChangesConcurrent(t *testing.T) {
	e := newEnv(t)
	var done atomic.Bool
	var wg sync.WaitGroup
	results := make([][]string, 4)
	errs := make(chan error, len(results))
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			after := ""
			for n := 0; n < 5000; n++ {
				finished := done.Load()
				resp, err := e.srv.Client().Get(e.srv.URL + "/v1/tables/public.orders/changes?limit=" + fmt.Sprint(1+i) + "&after=" + url.QueryEscape(after))
				if err != nil {
					errs <- err
					return
				}
				var page struct {
					Changes []struct {
						Cursor string         `json:"cursor"`
						Op     string         `json:"op"`
						Row    map[string]any `json:"row"`
					} `json:"changes"`
					NextCursor string `json:"next_cursor"`
					More       bool   `json:"more"`
				}
				err = json.NewDecoder(resp.Body).Decode(&page)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					errs <- fmt.Errorf("consumer %d: status %d: %v", i, resp.StatusCode, err)
					return
				}
				for _, c := range page.Changes {
					results[i] = append(results[i], fmt.Sprintf("%s:%s%v", c.Cursor, c.Op, c.Row["id"]))
				}
				after = page.NextCursor
				if finished && !page.More {
					return
				}
			}
			errs <- fmt.Errorf("consumer %d never caught up", i)
		}()
	}
	want := []string{"0.200.0:I1", "0.200.1:I2", "0.200.2:I3", "0.200.3:I4", "0.200.4:I5", "0.300.0:U2", "0.300.1:D3"}
	lsn := cdc.LSN(0x400)
	for epoch := uint64(3); epoch < 11; epoch++ {
		rows := []changefeedtest.Row{ch(cdc.OpUpdate, lsn, 0, 1, fmt.Sprint(epoch), "1"), ch(cdc.OpUpdate, lsn, 1, 1, "again", "1"), ch(cdc.OpInsert, lsn, 2, int64(epoch+10), "new", "1")}
		e.sink.Flush(epoch, map[string][]changefeedtest.Row{orders: rows})
		for _, r := range rows {
			want = append(want, fmt.Sprintf("0.%X.%d:%s%d", uint32(lsn), r.Seq, r.Op, r.ID))
		}
		if epoch%2 == 0 {
			e.sink.Compact(orders)
		}
		lsn += 0x100
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, got := range results {
		if !slices.Equal(got, want) {
			t.Errorf("consumer %d:\n got  %v\n want %v", i, got, want)
		}
	}
}
