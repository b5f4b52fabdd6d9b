//go:build !nodb

package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pg-cdc/pg-cdc/internal/access"
	"github.com/pg-cdc/pg-cdc/internal/api"
	"github.com/pg-cdc/pg-cdc/internal/cdc"
	"github.com/pg-cdc/pg-cdc/internal/changefeed/changefeedtest"
	"github.com/pg-cdc/pg-cdc/internal/manifest"
	"github.com/pg-cdc/pg-cdc/internal/query"
)

// ids are the id values of a rows response, in order.
func ids(t *testing.T, resp map[string]any) []int {
	t.Helper()
	rows, _ := resp["rows"].([]any)
	out := []int{}
	for _, r := range rows {
		o := r.(map[string]any)
		id, ok := o["id"].(float64)
		if !ok {
			t.Fatalf("row without a numeric id: %v", o)
		}
		out = append(out, int(id))
	}
	return out
}

func sameIDs(t *testing.T, what string, got []int, want ...int) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: ids %v, want %v", what, got, want)
	}
}

func TestTables(t *testing.T) {
	e := newEnv(t)
	resp := e.get("/v1/tables", 200)
	ts := resp["tables"].([]any)
	if len(ts) != 4 {
		t.Fatalf("%d tables", len(ts))
	}
	byName := map[string]map[string]any{}
	for _, x := range ts {
		m := x.(map[string]any)
		byName[m["name"].(string)] = m
	}
	if got := byName[orders]["rows"]; got != 4.0 {
		t.Errorf("orders rows %v", got)
	}
	if rec := e.lastRecord(); rec.Endpoint != "GET /v1/tables" || rec.Surface != access.SurfaceREST || len(rec.Tables) != 4 {
		t.Errorf("audit %+v", rec)
	}

	d := e.get("/v1/tables/public.orders", 200)
	if d["rows"] != 4.0 || fmt.Sprint(d["primary_key"]) != "[id]" || d["generation"] != "g0001" || d["fresh_as_of"] == nil {
		t.Errorf("detail %v", d)
	}
	cols := d["schema_versions"].([]any)[0].(map[string]any)["columns"].([]any)
	if c := cols[2].(map[string]any); c["name"] != "amount" || c["field_id"] != 3.0 || c["type"] != "DECIMAL(12,2)" {
		t.Errorf("amount column %v", c)
	}
	// A bare name one schema has; one two schemas have; an odd name,
	// escaped; unknown names with the closest; traversal.
	if d := e.get("/v1/tables/events", 200); d["name"] != events || fmt.Sprint(d["primary_key"]) != "[]" {
		t.Errorf("events: %v", d)
	}
	problemCode(t, e.get("/v1/tables/orders", 404), "ambiguous_table")
	if d := e.get("/v1/tables/"+url.PathEscape(odd), 200); d["name"] != odd || d["rows"] != 1.0 {
		t.Errorf("odd: %v", d)
	}
	p := e.get("/v1/tables/public.ordrs", 404)
	problemCode(t, p, "unknown_table")
	if fmt.Sprint(p["closest"]) != "[public.orders shop.orders]" {
		t.Errorf("closest %v", p["closest"])
	}
	for _, path := range []string{"/v1/tables/..%2f..%2fetc%2fpasswd", "/v1/tables/%2e%2e", "/v1/tables/public.orders%00", "/v1/tables/" + url.PathEscape(`public"; DROP TABLE x; --`) + "/rows"} {
		problemCode(t, e.get(path, 404), "unknown_table")
	}
	problemCode(t, e.get("/v1/tables/public.orders/nope", 404), "not_found")
	problemCode(t, e.do("DELETE", "/v1/tables", "", 405), "method_not_allowed")
	problemCode(t, e.get("/v1/tables?as_of=nope", 400), "bad_point")
	problemCode(t, e.get("/v1/tables?as_of=99", 400), "outside_retention")
	problemCode(t, e.get("/v1/tables?bogus=1", 400), "unknown_parameter")
}

func TestRows(t *testing.T) {
	e := newEnv(t)
	resp := e.get("/v1/tables/public.orders/rows", 200)
	sameIDs(t, "all", ids(t, resp), 1, 2, 4, 5)
	first := resp["rows"].([]any)[0].(map[string]any)
	if first["amount"] != "10.50" || first["status"] != "pending" || !strings.HasSuffix(fmt.Sprint(first["at"]), "Z") {
		t.Errorf("values: %v", first)
	}
	if resp["next_cursor"] != nil || resp["changes_cursor"] == nil {
		t.Errorf("cursors: %v %v", resp["next_cursor"], resp["changes_cursor"])
	}
	if r := resp["rows"].([]any)[3].(map[string]any); r["status"] != nil || r["amount"] != nil {
		t.Errorf("nulls: %v", r)
	}
	resp = e.get("/v1/tables/public.orders/rows?columns=status,id", 200)
	if cols := resp["columns"].([]any); len(cols) != 2 || cols[0].(map[string]any)["name"] != "status" || len(resp["rows"].([]any)[0].(map[string]any)) != 2 {
		t.Errorf("projection: %v", resp)
	}
	for _, c := range []struct {
		filters []string
		want    []int
	}{
		{[]string{"status:eq:pending"}, []int{1}},
		{[]string{"status:eq:x' OR 1=1 --"}, []int{4}}, // the value is a parameter: it matches itself only
		{[]string{`status:eq:pending" OR "1"="1`}, []int{}},
		{[]string{"status:ne:pending"}, []int{2, 4}},
		{[]string{"id:in:1|4|99"}, []int{1, 4}},
		{[]string{"amount:gt:5"}, []int{1, 2}},
		{[]string{"amount:le:10.5", "id:ge:2"}, []int{4}},
		{[]string{"id:lt:2"}, []int{1}},
		{[]string{"status:is_null"}, []int{5}},
		{[]string{"status:not_null", "id:ne:1"}, []int{2, 4}},
		{[]string{"status:like:pa%"}, []int{2}},
		{[]string{"at:gt:2000-01-01T00:00:00Z"}, []int{1, 2, 4}},
		{[]string{"status:eq:a:b:c"}, []int{}}, // a value may hold colons
	} {
		v := url.Values{"filter": c.filters}
		resp := e.get("/v1/tables/public.orders/rows?"+v.Encode(), 200)
		sameIDs(t, fmt.Sprint(c.filters), ids(t, resp), c.want...)
	}
	rec := e.lastRecord()
	if rec.Endpoint != "GET /v1/tables/{table}/rows" || fmt.Sprint(rec.Tables) != "[public.orders]" || fmt.Sprint(rec.Filters) != "[status:eq:a:b:c]" {
		t.Errorf("audit %+v", rec)
	}
	for _, c := range []struct{ query, code string }{
		{"filter=id:eq:abc", "bad_filter"},
		{"filter=nope:eq:1", "unknown_column"},
		{"filter=status:zz:1", "bad_filter"},
		{"filter=status:eq", "bad_filter"},
		{"filter=status", "bad_filter"},
		{"filter=id:is_null:1", "bad_filter"},
		{"filter=" + q(`"id" = 1 --:eq:1`), "unknown_column"},
		{"limit=0", "bad_limit"}, {"limit=-1", "bad_limit"}, {"limit=abc", "bad_limit"}, {"limit=1001", "bad_limit"},
		{"limit=99999999999999999999", "bad_limit"}, {"limit=1.5", "bad_limit"}, {"limit=1&limit=2", "repeated_parameter"},
		{"columns=id,id", "bad_columns"}, {"columns=", "bad_columns"}, {"columns=idd", "unknown_column"},
		{"cursor=garbage!", "bad_cursor"}, {"cursor=e30", "bad_cursor"},
		{"as_of=epoch:x", "bad_point"}, {"offset=3", "unknown_parameter"},
	} {
		problemCode(t, e.get("/v1/tables/public.orders/rows?"+c.query, 400), c.code)
	}
	if p := e.get("/v1/tables/public.orders/rows?columns=idd", 400); fmt.Sprint(p["closest"]) != "[id]" {
		t.Errorf("closest column %v", p["closest"])
	}
	// As of points.
	sameIDs(t, "as of version 2", ids(t, e.get("/v1/tables/public.orders/rows?as_of=2", 200)), 1, 2, 3, 4, 5)
	sameIDs(t, "as of version 1", ids(t, e.get("/v1/tables/public.orders/rows?as_of=1", 200)))
	sameIDs(t, "as of epoch 1", ids(t, e.get("/v1/tables/public.orders/rows?as_of=epoch:1", 200)), 1, 2, 3, 4, 5)
	if rec := e.lastRecord(); rec.Point != "epoch:1" {
		t.Errorf("audit point %q", rec.Point)
	}
	// The odd table, its rows and its changes.
	sameIDs(t, "odd", ids(t, e.get("/v1/tables/"+url.PathEscape(odd)+"/rows", 200)), 1)
}

// TestRowsPagination: pages by primary key read the version of the first
// page while new versions land; a cursor is bound to its request; a keyless
// table pages by offset over all its columns; a pinned version that left
// the retention is 410.
func TestRowsPagination(t *testing.T) {
	e := newEnv(t)
	p1 := e.get("/v1/tables/public.orders/rows?limit=2", 200)
	sameIDs(t, "page 1", ids(t, p1), 1, 2)
	next, ok := p1["next_cursor"].(string)
	if !ok {
		t.Fatalf("no next cursor: %v", p1)
	}
	if rec := e.lastRecord(); rec.Rows != 2 || !rec.Truncated {
		t.Errorf("audit rows %d truncated %v", rec.Rows, rec.Truncated)
	}
	e.sink.Flush(3, map[string][]changefeedtest.Row{orders: {ch(cdc.OpInsert, 0x400, 0, 0, "new", "1"), ch(cdc.OpInsert, 0x400, 1, 3, "back", "1"), ch(cdc.OpDelete, 0x400, 2, 4, "", "")}})
	p2 := e.get("/v1/tables/public.orders/rows?limit=2&cursor="+q(next), 200)
	sameIDs(t, "page 2, pinned", ids(t, p2), 4, 5)
	if p2["next_cursor"] != nil || p2["version"] != p1["version"] {
		t.Errorf("page 2: next %v version %v (page 1 %v)", p2["next_cursor"], p2["version"], p1["version"])
	}
	sameIDs(t, "a new first page", ids(t, e.get("/v1/tables/public.orders/rows?limit=3", 200)), 0, 1, 2)
	problemCode(t, e.get("/v1/tables/public.orders/rows?limit=2&filter=id:gt:0&cursor="+q(next), 400), "bad_cursor")
	problemCode(t, e.get("/v1/tables/shop.orders/rows?limit=2&cursor="+q(next), 400), "bad_cursor")
	// Filters and a projection without the key still page by key.
	f1 := e.get("/v1/tables/public.orders/rows?limit=1&columns=status&filter=status:not_null", 200)
	var got []string
	for c := 0; c < 10; c++ {
		for _, r := range f1["rows"].([]any) {
			got = append(got, fmt.Sprint(r.(map[string]any)["status"]))
		}
		n, ok := f1["next_cursor"].(string)
		if !ok {
			break
		}
		f1 = e.get("/v1/tables/public.orders/rows?limit=1&columns=status&filter=status:not_null&cursor="+q(n), 200)
	}
	if fmt.Sprint(got) != "[new pending paid back]" {
		t.Errorf("filtered pages: %v", got)
	}
	// Keyless: (1,a) twice and (2,b), in pages of 2.
	k1 := e.get("/v1/tables/public.events/rows?limit=2", 200)
	sameIDs(t, "keyless page 1", ids(t, k1), 1, 1)
	k2 := e.get("/v1/tables/public.events/rows?limit=2&cursor="+q(k1["next_cursor"].(string)), 200)
	sameIDs(t, "keyless page 2", ids(t, k2), 2)
	// The pinned version leaves the retention.
	e.sink.Compact(orders)
	e.sink.Expire()
	m, _, err := manifest.Load(context.Background(), e.sink.Store)
	if err != nil {
		t.Fatal(err)
	}
	if err := manifest.NewHistory(e.sink.Store).SetOldest(context.Background(), m.Version); err != nil {
		t.Fatal(err)
	}
	problemCode(t, e.get("/v1/tables/public.orders/rows?limit=2&cursor="+q(next), 410), "gone")
	sameIDs(t, "after expiry", ids(t, e.get("/v1/tables/public.orders/rows", 200)), 0, 1, 2, 3, 5)
}

func TestChanges(t *testing.T) {
	e := newEnv(t)
	var got []string
	after := ""
	for range 20 {
		resp := e.get("/v1/tables/public.orders/changes?limit=3&after="+q(after), 200)
		for _, c := range resp["changes"].([]any) {
			m := c.(map[string]any)
			got = append(got, fmt.Sprintf("%s%v", m["op"], m["row"].(map[string]any)["id"]))
			if m["commit_time"] == nil || m["lsn"] == nil {
				t.Errorf("change %v", m)
			}
		}
		after = resp["next_cursor"].(string)
		if resp["more"] != true {
			break
		}
	}
	if fmt.Sprint(got) != "[I1 I2 I3 I4 I5 U2 D3]" {
		t.Errorf("changes %v", got)
	}
	if rec := e.lastRecord(); rec.Endpoint != "GET /v1/tables/{table}/changes" || fmt.Sprint(rec.Tables) != "[public.orders]" {
		t.Errorf("audit %+v", rec)
	}
	old := e.get("/v1/tables/public.orders/changes?limit=1", 200)["next_cursor"].(string)
	for _, bad := range []string{"x", "1.2", "0.0.0' OR 1=1", strings.Repeat("9", 100)} {
		problemCode(t, e.get("/v1/tables/public.orders/changes?after="+q(bad), 400), "bad_cursor")
	}
	problemCode(t, e.get("/v1/tables/public.ordrs/changes", 404), "unknown_table")
	problemCode(t, e.get("/v1/tables/public.orders/changes?limit=-5", 400), "bad_limit")
	// A compaction, then the versions before it leave the retention.
	e.sink.Flush(3, map[string][]changefeedtest.Row{orders: {ch(cdc.OpInsert, 0x400, 0, 6, "new", "1")}})
	e.sink.Compact(orders)
	e.sink.Flush(4, map[string][]changefeedtest.Row{orders: {ch(cdc.OpInsert, 0x500, 0, 7, "new", "1")}})
	e.sink.Expire()
	p := e.get("/v1/tables/public.orders/changes?after="+q(old), 410)
	problemCode(t, p, "gone")
	oldest, ok := p["oldest_cursor"].(string)
	if !ok || oldest != "0.400.9223372036854775807" {
		t.Fatalf("oldest cursor %v", p["oldest_cursor"])
	}
	resp := e.get("/v1/tables/public.orders/changes?after="+q(oldest), 200)
	if cs := resp["changes"].([]any); len(cs) != 1 || cs[0].(map[string]any)["row"].(map[string]any)["id"] != 7.0 {
		t.Errorf("from the oldest cursor: %v", cs)
	}
	// The rows' changes cursor continues the feed after their state.
	rows := e.get("/v1/tables/public.orders/rows", 200)
	resp = e.get("/v1/tables/public.orders/changes?after="+q(rows["changes_cursor"].(string)), 200)
	if cs := resp["changes"].([]any); len(cs) != 0 || resp["more"] != false {
		t.Errorf("after the state: %v", resp)
	}
}

// TestChangesCursorRefused: a cursor is validated whole before the feed is
// read — one that would wrap the query (an LSN of 2^63 or more), has no
// next position, does not parse, or is past the newest committed position
// (0/308 here) is 400 bad_cursor naming the cursor, never a replay of the
// feed from its start.
func TestChangesCursorRefused(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ after, want string }{
		{"80000000.0.9223372036854775807", "2^63 or more"}, // int64(LSN) would be math.MinInt64
		{"FFFFFFFF.FFFFFFFF.0", "2^63 or more"},
		{"7FFFFFFF.FFFFFFFF.9223372036854775807", "last position"},
		{"0.0.9223372036854775808", "sequence"},
		{"0.300", "want <hex>.<hex>.<seq>"},
		{"0.0.1 ", "sequence"},
		{"0.309.0", "past the newest committed position"},
		{"0.309.9223372036854775807", "past the newest committed position"}, // the end-of-LSN form too
		{"7FFFFFFF.0.-1", "past the newest committed position"},
	} {
		p := e.get("/v1/tables/public.orders/changes?after="+q(c.after), 400)
		problemCode(t, p, "bad_cursor")
		detail, _ := p["detail"].(string)
		if p["parameter"] != "after" || !strings.Contains(detail, c.want) || !strings.Contains(detail, strings.TrimSpace(c.after)) {
			t.Errorf("after=%q: %v; want parameter after and a detail naming the cursor and %q", c.after, p, c.want)
		}
	}
	// The newest committed position itself, and the end of its LSN, are
	// cursors: caught up, nothing after them.
	for _, after := range []string{"0.308.0", "0.308.9223372036854775807"} {
		if resp := e.get("/v1/tables/public.orders/changes?after="+q(after), 200); len(resp["changes"].([]any)) != 0 || resp["next_cursor"] != after {
			t.Errorf("after=%s: %v", after, resp)
		}
	}
}

func TestQuery(t *testing.T) {
	e := newEnv(t)
	resp := e.do("POST", "/v1/query", `{"sql": "SELECT id, amount, status FROM public.orders WHERE id = ? OR status = ? ORDER BY id", "params": [2, "x' OR 1=1 --"]}`, 200)
	if fmt.Sprint(resp["rows"]) != "[[2 20.00 paid] [4 1.00 x' OR 1=1 --]]" || resp["truncated"] != false {
		t.Errorf("query: %v", resp)
	}
	resp = e.do("POST", "/v1/query", `{"sql": "SELECT count(*) AS n FROM public.orders", "as_of": "2"}`, 200)
	if fmt.Sprint(resp["rows"]) != "[[5]]" {
		t.Errorf("as of 2: %v", resp["rows"])
	}
	for _, c := range []struct{ body, code string }{
		{`{"sql": "SELECT 1; INSTALL httpfs"}`, "query_refused"},
		{`{"sql": "COPY (SELECT 1) TO '/tmp/x.csv'"}`, "query_refused"},
		{`{"sql": "SELECT * FROM read_text('/etc/passwd')"}`, "query_refused"},
		{`{"sql": "ATTACH '/tmp/x.db' AS x"}`, "query_refused"},
		{`{"sql": "SELEC 1"}`, "invalid_query"},
		{`{"sql": "SELECT * FROM public.nope"}`, "invalid_query"},
		{`{"sql": `, "bad_body"},
		{`{"sql": 1}`, "bad_body"},
		{`{"sql": "SELECT 1", "extra": true}`, "bad_body"},
		{`{"sql": "SELECT 1"} {"sql": "SELECT 2"}`, "bad_body"},
		{`{}`, "bad_body"},
		{`[]`, "bad_body"},
		{`{"sql": "SELECT ?", "params": [{"a": 1}]}`, "bad_param"},
		{`{"sql": "SELECT 1", "as_of": "nope"}`, "bad_point"},
	} {
		p := e.do("POST", "/v1/query", c.body, 400)
		problemCode(t, p, c.code)
		if c.code == "query_refused" && p["rule"] == nil {
			t.Errorf("%s: no rule: %v", c.body, p)
		}
		// And the next request is served normally.
		if r := e.do("POST", "/v1/query", `{"sql": "SELECT 41 + 1 AS x"}`, 200); fmt.Sprint(r["rows"]) != "[[42]]" {
			t.Fatalf("after %s: %v", c.body, r)
		}
	}
	problemCode(t, e.do("POST", "/v1/query", `{"sql": "SELECT '`+strings.Repeat("x", 2<<20)+`'"}`, 413), "body_too_large")
	problemCode(t, e.get("/v1/query", 405), "method_not_allowed")
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/query", strings.NewReader(`sql=SELECT 1`))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := e.srv.Client().Do(req); err != nil || resp.StatusCode != 415 {
		t.Errorf("a form body: %v %v", resp.StatusCode, err)
	}
}

// TestQueryInfinity: a date's or timestamp's ±infinity is the string
// "infinity" or "-infinity" (docs/api.md: JSON values), at any depth, never
// the date the driver makes of it; finite values next to it keep their
// forms.
func TestQueryInfinity(t *testing.T) {
	e := newEnv(t)
	resp := e.do("POST", "/v1/query", `{"sql": "SELECT 'infinity'::TIMESTAMP AS ts, '-infinity'::TIMESTAMP AS nts, 'infinity'::TIMESTAMPTZ AS tz, '-infinity'::TIMESTAMPTZ AS ntz, 'infinity'::DATE AS d, '-infinity'::DATE AS nd, ['-infinity'::DATE, DATE '2026-01-01'] AS ds, TIMESTAMP '294246-01-01 00:00:00' AS finite"}`, 200)
	b, _ := json.Marshal(resp["rows"])
	want := `[["infinity","-infinity","infinity","-infinity","infinity","-infinity",["-infinity","2026-01-01"],"294246-01-01T00:00:00Z"]]`
	if string(b) != want {
		t.Errorf("rows = %s\nwant %s", b, want)
	}
}

func TestManifestRefsDiffSnapshotStatus(t *testing.T) {
	e := newEnv(t)
	m := e.get("/v1/manifest", 200)
	if m["version"] != 3.0 || m["manifest"].(map[string]any)["tables"].(map[string]any)[orders] == nil || m["bound"] != nil {
		t.Errorf("manifest: %v", m["version"])
	}
	if m := e.get("/v1/manifest?as_of=lsn:0/250", 200); m["version"] != 3.0 || m["bound"].(map[string]any)["lsn"] != "0/250" {
		t.Errorf("manifest as of lsn: %v %v", m["version"], m["bound"])
	}
	r := e.get("/v1/refs?tags=5", 200)
	if r["newest"].(map[string]any)["version"] != 3.0 || len(r["tags"].([]any)) == 0 {
		t.Errorf("refs: %v", r)
	}
	problemCode(t, e.get("/v1/refs?tags=-1", 400), "bad_tags")
	d := e.get("/v1/diff?from=2&to=3&table=public.orders", 200)
	if c := d["tables"].(map[string]any)[orders].(map[string]any); c["changed"] != 1.0 || c["deleted"] != 1.0 || c["inserted"] != 0.0 || d["differences"] != true {
		t.Errorf("diff: %v", d)
	}
	problemCode(t, e.get("/v1/diff?to=3", 400), "missing_parameter")
	problemCode(t, e.get("/v1/diff?from=2&table=nope", 404), "unknown_table")
	s := e.get("/v1/snapshot", 200)
	ot := s["tables"].(map[string]any)[orders].(map[string]any)
	if ds := ot["deltas"].([]any); len(ds) != 2 || ot["base"] != nil || s["iceberg_metadata_location"] != nil {
		t.Errorf("snapshot: %v", s)
	}
	path := ot["deltas"].([]any)[0].(map[string]any)["files"].([]any)[0].(map[string]any)["path"].(string)
	if !strings.HasPrefix(path, "public/orders/g0001/delta/") {
		t.Errorf("file key %q", path)
	}
	if s := e.get("/v1/snapshot?as_of=2&table=public.orders", 200); len(s["tables"].(map[string]any)) != 1 {
		t.Errorf("snapshot of one table: %v", s)
	}
	st := e.get("/v1/status", 200)
	if st["version"] != 3.0 || st["is_stale"] != false || st["fresh_as_of"] == nil || st["end_lsn"] == nil || st["server_version"] != "test" {
		t.Errorf("status: %v", st)
	}
}

// TestStatusStale: is_stale compares fresh_as_of (the manifest's, recorded
// at each flush and idle advance) with the objective.
func TestStatusStale(t *testing.T) {
	s := changefeedtest.New(t, []string{orders})
	s.Flush(1, map[string][]changefeedtest.Row{orders: {ch(cdc.OpInsert, 0x200, 0, 1, "a", "")}})
	r, err := query.NewReader(query.ReaderOptions{Sink: s.Store, TempDir: filepath.Join(t.TempDir(), "query")})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fresh := s.Now
	for _, c := range []struct {
		now   time.Duration
		stale bool
	}{{time.Minute, false}, {2 * time.Hour, true}} {
		h := api.New(api.Options{Reader: r, StaleAfter: time.Hour, Now: func() time.Time { return fresh.Add(c.now) }})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/status", nil))
		var st map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != 200 {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if st["is_stale"] != c.stale || st["fresh_as_of"] != fresh.Format(time.RFC3339) || st["lag_seconds"] != c.now.Seconds() {
			t.Errorf("now +%s: %v", c.now, st)
		}
	}
	// An idle advance moves fresh_as_of without a flush.
	idle := fresh.Add(90 * time.Minute)
	if _, err := s.MC.Commit(context.Background(), func(m *manifest.Manifest) error { m.FreshAsOf = idle; m.EndLSN += 0x100; return nil }); err != nil {
		t.Fatal(err)
	}
	h := api.New(api.Options{Reader: r, StaleAfter: time.Hour, Now: func() time.Time { return fresh.Add(2 * time.Hour) }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/status", nil))
	var st map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &st)
	if st["is_stale"] != false || st["fresh_as_of"] != idle.Format(time.RFC3339) {
		t.Errorf("after an idle advance: %v", st)
	}
}
