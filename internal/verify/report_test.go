package verify

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pg-cdc/pg-cdc/internal/cdc"
)

func TestPrintVerify(t *testing.T) {
	rep := &Report{Tables: []TableResult{
		{Table: "public.customers", Equal: true, Key: []string{"id"}, Snapshot: "100:105:102", Watermark: 0x1A2B3C4, Epoch: 42, EndLSN: 0x1A2B400,
			Counts: Counts{SourceRows: 1204, SinkRows: 1204, Matching: 1204}, Newer: 7,
			Adjusted: map[string]int64{"balance": 2}},
		{Table: "public.items", Key: []string{"order_id", "line"}, Snapshot: "100:105:102",
			Counts: Counts{SourceRows: 300, SinkRows: 299, Matching: 296, Missing: 2, Extra: 1, Changed: 1,
				Columns: map[string]int64{"qty": 1, "note": 1}, Unrecovered: 1,
				Ranges: []Range{
					{First: "(order_id, line)=(5, 2)", Last: "(order_id, line)=(5, 2)", Keys: 1, Changed: 1},
					{First: "(order_id, line)=(7, 1)", Last: "(order_id, line)=(9, 3)", Keys: 3, Missing: 2, Extra: 1},
				},
				MoreRanges: 4,
				Examples: []Example{
					{Key: "(order_id, line)=(5, 2)", Column: "qty", Source: "3", Sink: "4"},
					{Key: "(order_id, line)=(5, 2)", Column: "note", Source: "xx…", Sink: "NULL", Unrecovered: true},
				}}},
		{Table: "public.log", Equal: true, Multiset: true, Snapshot: "110:110:", Watermark: 0x1A2B500,
			Counts: Counts{SourceRows: 3, SinkRows: 3, Matching: 3}},
	}}
	var out bytes.Buffer
	rep.WriteText(&out)
	want := `as of source snapshot 100:105:102; watermark 0/1A2B3C4 passed by manifest epoch 42 (end LSN 0/1A2B400)
public.customers: equal: 1204 rows in the source, 1204 in the sink; 7 sink versions newer than the snapshot ignored
  source values a type rule changed, compared as the sink stores them (docs/types.md): balance (2)
public.items: DIFFERENT: 300 rows in the source, 299 in the sink: 296 matching, 2 missing in the sink, 1 extra in the sink, 1 with different values
  columns that differ: note (1), qty (1)
  1 of the differing values are unchanged TOAST values the sink never received (counted in 'pg-cdc status')
  key ranges that differ (key order_id, line):
    (order_id, line)=(5, 2): 1 key (1 with different values)
    (order_id, line)=(7, 1) .. (order_id, line)=(9, 3): 3 keys (2 missing in the sink, 1 extra in the sink)
    … and 4 more ranges
  values that differ (first 2):
    (order_id, line)=(5, 2) qty: source 3, sink 4
    (order_id, line)=(5, 2) note: source xx…, sink NULL (unchanged TOAST, never received)
public.log: equal: 3 rows in the source, 3 in the sink (no primary key: compared as multisets of whole rows) (as of snapshot 110:110:, watermark 0/1A2B500)
3 tables: 2 equal, 1 different
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}

	err := rep.Err()
	if !errors.Is(err, cdc.ErrDifferences) {
		t.Errorf("the verdict is not cdc.ErrDifferences (exit 19): %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "1 of 3 tables differ: public.items") {
		t.Errorf("error: %v", err)
	}
	rep.Tables = rep.Tables[:1]
	if err := rep.Err(); err != nil {
		t.Errorf("equal tables: %v", err)
	}
}
