package main

import (
	"testing"
	"time"
)

func TestServerDurations(t *testing.T) {
	log := `time=2026-12-02T01:47:16.013Z level=INFO msg="read request" audit=true action=read principal=bob surface=mcp endpoint=query rows=1 truncated=false duration_ms=417
time=2026-12-02T01:47:16.079Z level=INFO msg="read request" audit=true action=read principal=alice surface=mcp endpoint=list_tables rows=1 truncated=false duration_ms=484
time=2026-12-02T01:47:16.080Z level=INFO msg="read request" audit=true action=read principal=alice surface=mcp endpoint=query rows=0 truncated=false duration_ms=9 error="no such table"
time=2026-12-02T01:47:17.000Z level=INFO msg="read request" audit=true action=read principal=bob surface=rest endpoint="GET /v1/tables/{table}/rows" tables=[public.bench] rows=50 truncated=true status=200 duration_ms=261
time=2026-12-02T01:47:17.100Z level=INFO msg="read request" audit=true action=read principal=bob surface=rest endpoint="GET /v1/tables" rows=1 truncated=false status=200 duration_ms=12
time=2026-12-02T01:47:17.200Z level=INFO msg="read request" audit=true action=read principal=bob surface=rest endpoint="GET /v1/tables" rows=0 truncated=false status=404 duration_ms=1
time=2026-12-02T01:49:00.000Z level=INFO msg="read request" audit=true action=read principal=bob surface=rest endpoint="GET /v1/tables" rows=1 truncated=false status=200 duration_ms=99
`
	var eps []*serveEndpoint
	for _, name := range serveEndpoints {
		eps = append(eps, &serveEndpoint{name: name})
	}
	from, _ := time.Parse(time.RFC3339, "2026-12-02T01:47:00Z")
	serverDurations(log, eps, from, from.Add(time.Minute))
	want := map[string][]float64{
		"GET /v1/tables":             {0.012},
		"GET /v1/tables/{t}/rows":    {0.261},
		"MCP tools/call query":       {0.417},
		"MCP tools/call list_tables": {0.484},
	}
	for _, e := range eps {
		if got := e.server; len(got) != len(want[e.name]) || len(got) > 0 && got[0] != want[e.name][0] {
			t.Errorf("%s: %v, want %v", e.name, got, want[e.name])
		}
	}
}

func TestRPCMessage(t *testing.T) {
	sse := "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	if got, ok := rpcMessage("text/event-stream", []byte(sse)); !ok || string(got) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("sse: %q %v", got, ok)
	}
	if got, ok := rpcMessage("application/json", []byte(`{"id":1}`)); !ok || string(got) != `{"id":1}` {
		t.Errorf("json: %q %v", got, ok)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	if p := percentile(xs, 0.5); p != 5 {
		t.Errorf("p50 = %v", p)
	}
	if p := percentile(xs, 0.99); p != 10 {
		t.Errorf("p99 = %v", p)
	}
	if p := percentile(nil, 0.5); p != 0 {
		t.Errorf("empty = %v", p)
	}
}
